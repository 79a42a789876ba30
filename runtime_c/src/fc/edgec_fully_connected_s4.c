/*
 * edgec_fully_connected_s4.c -- fully connected layer with int4 weights (packed two per byte, low
 * nibble first) and int8 activations: CMSIS-NN arm_fully_connected_s4's packing and arithmetic
 * (Source/FullyConnectedFunctions/arm_fully_connected_s4.c, arm_nn_vec_mat_mult_t_s4) with
 * per-channel requantization; golden: edgec.ops.int4.fully_connected_s4. A row of an odd
 * input_c starts in the middle of a byte every other row, as in CMSIS-NN's stream.
 */
#include "../support/edgec_s4.h"

static int fully_connected_s4_valid(const edgec_fully_connected_s4_desc *d, const int8_t *input, const int8_t *output)
{
    if (!d || !input || !output || !d->filter || !d->multiplier || !d->shift) {
        return 0;
    }
    return d->batches >= 1 && d->input_c >= 1 && d->output_c >= 1 && (int64_t)d->batches * d->input_c <= INT32_MAX &&
           (int64_t)d->batches * d->output_c <= INT32_MAX && (int64_t)d->input_c * d->output_c <= INT32_MAX &&
           edgec_s4_output_valid(d->input_offset, d->output_offset, d->act_min, d->act_max, d->shift, d->output_c);
}

edgec_status edgec_fully_connected_s4(const edgec_fully_connected_s4_desc *desc, const int8_t *input, int8_t *output)
{
    if (!fully_connected_s4_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_fully_connected_s4_desc d = *desc;
    const edgec_output_stage stage = edgec_output_stage_make(d.output_offset, d.act_min, d.act_max);
    for (int32_t b = 0; b < d.batches; b++) {
        const int8_t *x = input + b * d.input_c;
        for (int32_t o = 0; o < d.output_c; o++) {
            const uint32_t bias = d.bias ? (uint32_t)d.bias[o] : 0u;
            const uint32_t acc = edgec_s4_dot(d.filter, o * d.input_c, x, d.input_c, d.input_offset, bias);
            output[b * d.output_c + o] = edgec_requantize_s8((int32_t)acc, d.multiplier[o], d.shift[o], stage);
        }
    }
    return EDGEC_OK;
}

#if defined(__ARM_FEATURE_DSP)
/*
 * The DSP path (edgec_s4.h): the input row's whole blocks of 8 widened once into scratch in SMLAD
 * pair order, with the offset added, then two rows at a time: four SMLAD per packed word of each.
 * Rows longer than EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT (the 16x sums could overflow) run the
 * portable loop.
 */
edgec_status edgec_fully_connected_s4_dsp(const edgec_fully_connected_s4_desc *desc, const int8_t *input,
                                          int8_t *output, int16_t *scratch)
{
    if (!fully_connected_s4_valid(desc, input, output) || desc->input_c % 2 != 0 || desc->input_c < 8 || !scratch ||
        !edgec_word_aligned(scratch)) {
        return EDGEC_ARG_ERROR;
    }
    if (desc->input_c > EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT) {
        return edgec_fully_connected_s4(desc, input, output);
    }
    const edgec_fully_connected_s4_desc d = *desc;
    /* The short requantization (edgec_s4_requantize_short) when every channel admits it. */
    const int short_requant = edgec_dsp_requant_all_wide(d.multiplier, d.shift, d.output_c);
    edgec_s4_rows rows = { d.filter, d.input_c,
                           input,    d.input_offset,
                           d.bias,   d.multiplier,
                           d.shift,  edgec_output_stage_make(d.output_offset, d.act_min, d.act_max) };
    for (int32_t b = 0; b < d.batches; b++) {
        rows.x = input + b * d.input_c;
        edgec_s4_dsp_widen(rows.x, d.input_c / 8, d.input_offset, scratch);
        edgec_s4_dsp_rows(&rows, scratch, d.output_c, short_requant, edgec_dsp_round_base(d.output_offset),
                          output + b * d.output_c);
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_DSP */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/*
 * The Helium path (edgec_s4.h): the bias holds the input offset folded in (bias[o] + input_offset *
 * sum_k w[o][k], modulo 2^32), so the int8 input multiplies as it is; each input row is
 * deinterleaved once into scratch, then four rows at a time, two VMLADAVA per 16 packed bytes of
 * each. Rows longer than EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT run the portable loop (offset 0).
 */
edgec_status edgec_fully_connected_s4_mve(const edgec_fully_connected_s4_desc *desc, const int8_t *input,
                                          int8_t *output, int8_t *scratch)
{
    if (!fully_connected_s4_valid(desc, input, output) || desc->input_c % 2 != 0 || !desc->bias || !scratch) {
        return EDGEC_ARG_ERROR;
    }
    edgec_fully_connected_s4_desc d = *desc;
    if (d.input_c > EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT) {
        d.input_offset = 0;
        return edgec_fully_connected_s4(&d, input, output);
    }
    const edgec_s4_rows rows = { d.filter, d.input_c,
                                 input,    0,
                                 d.bias,   d.multiplier,
                                 d.shift,  edgec_output_stage_make(d.output_offset, d.act_min, d.act_max) };
    for (int32_t b = 0; b < d.batches; b++) {
        edgec_s4_mve_deinterleave(input + b * d.input_c, d.input_c, scratch);
        edgec_s4_mve_rows(&rows, scratch, d.output_c, output + b * d.output_c);
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_MVE */
