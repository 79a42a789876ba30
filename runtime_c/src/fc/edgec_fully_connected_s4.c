/*
 * edgec_fully_connected_s4.c -- fully connected layer with int4 weights (packed two per byte, low
 * nibble first) and int8 activations: CMSIS-NN arm_fully_connected_s4's packing and arithmetic
 * (Source/FullyConnectedFunctions/arm_fully_connected_s4.c, arm_nn_vec_mat_mult_t_s4) with
 * per-channel requantization; golden: edgec.ops.int4.fully_connected_s4. A row of an odd
 * input_c starts in the middle of a byte every other row, as in CMSIS-NN's stream.
 */
#include "../support/edgec_support.h"

static int fully_connected_s4_valid(const edgec_fully_connected_s4_desc *d, const int8_t *input,
                                    const int8_t *output)
{
    if (!d || !input || !output || !d->filter || !d->multiplier || !d->shift) {
        return 0;
    }
    return d->batches >= 1 && d->input_c >= 1 && d->output_c >= 1 &&
           (int64_t)d->batches * d->input_c <= INT32_MAX &&
           (int64_t)d->batches * d->output_c <= INT32_MAX &&
           (int64_t)d->input_c * d->output_c <= INT32_MAX &&
           edgec_s4_output_valid(d->input_offset, d->output_offset, d->act_min, d->act_max,
                                 d->shift, d->output_c);
}

edgec_status edgec_fully_connected_s4(const edgec_fully_connected_s4_desc *desc,
                                      const int8_t *input, int8_t *output)
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
            output[b * d.output_c + o] =
                edgec_requantize_s8((int32_t)acc, d.multiplier[o], d.shift[o], stage);
        }
    }
    return EDGEC_OK;
}
