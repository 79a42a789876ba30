/*
 * edgec_fully_connected_s4.c -- fully connected layer with int4 weights (packed two per byte, low
 * nibble first) and int8 activations: CMSIS-NN arm_fully_connected_s4's packing and arithmetic
 * (Source/FullyConnectedFunctions/arm_fully_connected_s4.c, arm_nn_vec_mat_mult_t_s4) with
 * per-channel requantization; golden: edgec.ops.int4.fully_connected_s4. A row of an odd
 * input_c starts in the middle of a byte every other row, as in CMSIS-NN's stream.
 */
#include "../support/edgec_support.h"

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
 * The DSP path. Each row's packed weights are read a word (eight weights) at a time; masking
 * with 0xF0F0F0F0 (the high nibbles) and after a left shift by 4 (the low ones) leaves each
 * weight times 16 in a byte, which SXTB16 (and SXTB16 ROR #8) widen into int16 pairs:
 * (16w0, 16w4), (16w2, 16w6), (16w1, 16w5), (16w3, 16w7). The input row is widened once into
 * scratch in that pair order, with the offset added, so four SMLAD take eight MACs; two rows share
 * each scratch load. The SMLAD sum is 16 times the dot product, exact while
 * input_c * 255 * 128 < 2^31 (input_c <= EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT; longer rows run
 * the portable loop), then divided by 16; a tail of input_c % 8 runs the portable loop.
 */
static void fc_s4_widen_input(const int8_t *x, int32_t blocks, int32_t offset, int16_t *scratch)
{
    static const int8_t order[8] = { 0, 4, 2, 6, 1, 5, 3, 7 };
    for (int32_t b = 0; b < blocks; b++) {
        for (int32_t i = 0; i < 8; i++) {
            scratch[8 * b + i] = (int16_t)((int32_t)x[8 * b + order[i]] + offset);
        }
    }
}

/* acc += the SMLAD pair products of one weight word (eight weights) and its four input pairs. */
static inline int32_t fc_s4_smlad8(int32_t w, int32_t x04, int32_t x26, int32_t x15, int32_t x37, int32_t acc)
{
    const int32_t lows = (int32_t)(((uint32_t)w << 4) & 0xF0F0F0F0u);
    const int32_t highs = (int32_t)((uint32_t)w & 0xF0F0F0F0u);
    acc = __smlad(x04, __sxtb16(lows), acc);
    acc = __smlad(x26, edgec_sxtb16_ror8(lows), acc);
    acc = __smlad(x15, __sxtb16(highs), acc);
    return __smlad(x37, edgec_sxtb16_ror8(highs), acc);
}

/* 16 * the dot products of the widened blocks with row w (acc[0]) and, for rows == 2, with the
 * row row_bytes after it (acc[1]); the two-row loop has no branch but its own. */
static EDGEC_NOINLINE void fc_s4_rows16(const int16_t *scratch, const int8_t *w, int32_t row_bytes, int32_t blocks,
                                        int32_t rows, int32_t acc[2])
{
    const int8_t *x = (const int8_t *)scratch;
    const int8_t *const w_end = w + 4 * blocks;
    int32_t acc0 = 0;
    int32_t acc1 = 0;
    int32_t x04;
    int32_t x26;
    int32_t x15;
    int32_t x37;
    if (rows == 2) {
        for (; w < w_end; w += 4) {
            edgec_dsp_load_2words(&x, &x04, &x26);
            edgec_dsp_load_2words(&x, &x15, &x37);
            acc0 = fc_s4_smlad8(edgec_s16_dsp_load_weights(w), x04, x26, x15, x37, acc0);
            acc1 = fc_s4_smlad8(edgec_s16_dsp_load_weights(w + row_bytes), x04, x26, x15, x37, acc1);
        }
    } else {
        for (; w < w_end; w += 4) {
            edgec_dsp_load_2words(&x, &x04, &x26);
            edgec_dsp_load_2words(&x, &x15, &x37);
            acc0 = fc_s4_smlad8(edgec_s16_dsp_load_weights(w), x04, x26, x15, x37, acc0);
        }
    }
    acc[0] = acc0;
    acc[1] = acc1;
}

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
    const edgec_output_stage stage = edgec_output_stage_make(d.output_offset, d.act_min, d.act_max);
    const int32_t blocks = d.input_c / 8;
    const int32_t tail = 8 * blocks;
    const int32_t row_bytes = d.input_c / 2;
    /* The int8 DSP kernels' short requantization (edgec_dsp_requant) when every channel admits it. */
    const int short_requant = edgec_dsp_requant_all_short(d.multiplier, d.shift, d.output_c);
    const int32_t round_base = edgec_dsp_round_base(d.output_offset);
    for (int32_t b = 0; b < d.batches; b++) {
        const int8_t *x = input + b * d.input_c;
        fc_s4_widen_input(x, blocks, d.input_offset, scratch);
        for (int32_t o = 0; o < d.output_c; o += 2) {
            const int32_t rows = EDGEC_MIN(2, d.output_c - o);
            int32_t acc16[2];
            fc_s4_rows16(scratch, d.filter + o * row_bytes, row_bytes, blocks, rows, acc16);
            for (int32_t r = 0; r < rows; r++) {
                uint32_t acc = (d.bias ? (uint32_t)d.bias[o + r] : 0u) + (uint32_t)(acc16[r] / 16);
                if (tail < d.input_c) {
                    acc = edgec_s4_dot(d.filter, (o + r) * d.input_c + tail, x + tail, d.input_c - tail, d.input_offset,
                                       acc);
                }
                int8_t *y = output + b * d.output_c + o + r;
                if (short_requant) {
                    const int32_t v = edgec_dsp_requantize_ssat8(
                        (int32_t)acc, edgec_dsp_requant_make(d.multiplier[o + r], d.shift[o + r], round_base));
                    *y = (int8_t)EDGEC_MIN(EDGEC_MAX(v, d.act_min), d.act_max);
                } else {
                    *y = edgec_requantize_s8((int32_t)acc, d.multiplier[o + r], d.shift[o + r], stage);
                }
            }
        }
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_DSP */
