/*
 * edgec_lstm_s16.c -- 16x8 LSTM over a sequence (or one step of a stream): int16 input and hidden
 * state (symmetric), int8 weights, int64 bias, int16 cell state with a power-of-two scale.
 *
 * TFLite Micro's 16x8 UNIDIRECTIONAL_SEQUENCE_LSTM (no peephole, projection or layer norm) as
 * CMSIS-NN's arm_lstm_unidirectional_s16 computes it (arm_nn_lstm_step_s16,
 * arm_nn_lstm_calculate_gate_s16, arm_nn_vec_mat_mul_result_acc_s16, arm_elementwise_mul_s16 /
 * _acc_s16 / _s16_batch_offset, arm_nn_activation_s16): per gate an int16 x int8 matmul of the input
 * (plus the bias) and one of the hidden state, each summed exactly in int64 and brought to Q3.12 by
 * requantize_s64, added with saturation; the gates and the cell state as edgec_lstm_s8's. The dot
 * products run two rows at a time: on Helium's VMLALDAVA (Cortex-M55), on SMLALD with the DSP
 * extension (x and h reordered into the scratch), else in plain C; all exact in int64.
 * Golden: edgec.ops.recurrent.lstm_step_s16 / lstm_s16.
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

/* arm_nn_requantize_s64 of x in [-2^47, 2^47) (numerics.requantize_s64), saturated to int32. */
static int32_t requantize_s64(int64_t x, int32_t multiplier, int32_t shift)
{
    const int64_t high = (x * edgec_reduce_multiplier(multiplier)) >> (14 - shift);
    const int64_t result = (high + 1) >> 1;
    return (int32_t)EDGEC_MIN(EDGEC_MAX(result, INT32_MIN), INT32_MAX);
}

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#include <arm_mve.h>

/* acc[r] = sum_j x[j] * w_r[j] for the rows w_0 = w and w_1 = w + n (only w_0 when !pair): eight
 * int16 x against eight int8 weights widened on load, VMLALDAVA into int64 (exact); the tail
 * loaded under a VCTP predicate (zeros). */
static void dot_rows(const int16_t *x, const int8_t *w, int32_t n, int pair, int64_t acc[2])
{
    const int8_t *w1 = pair ? w + n : w;
    int64_t acc0 = 0, acc1 = 0;
    for (int32_t j = 0; j < n; j += 8) {
        const mve_pred16_t p = vctp16q((uint32_t)(n - j));
        const int16x8_t xv = vldrhq_z_s16(x + j, p);
        acc0 = vmlaldavaq_s16(acc0, xv, vldrbq_z_s16(w + j, p));
        acc1 = vmlaldavaq_s16(acc1, xv, vldrbq_z_s16(w1 + j, p));
    }
    acc[0] = acc0;
    acc[1] = acc1;
}

/* The operand the dot products read: src itself. */
static const int16_t *operand(int16_t *dst, const int16_t *src, int32_t n)
{
    (void)dst;
    (void)n;
    return src;
}
#elif defined(__ARM_FEATURE_DSP)
/* acc[r] = sum_j x[j] * w_r[j] for the rows w_0 = w and w_1 = w + n (only w_0 when !pair), x in
 * the DSP order (edgec_s16_dsp_reorder): SMLALD on int16 pairs, exact in int64. */
static void dot_rows(const int16_t *x, const int8_t *w, int32_t n, int pair, int64_t acc[2])
{
    if (pair) {
        edgec_s16_dsp_dot2(x, w, n, n, acc);
    } else {
        acc[0] = edgec_s16_dsp_dot(x, w, n);
    }
}

/* The operand the dot products read: `n` int16 of src copied to dst (word-aligned) in the DSP order. */
static const int16_t *operand(int16_t *dst, const int16_t *src, int32_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(int16_t));
    edgec_s16_dsp_reorder(dst, n);
    return dst;
}
#else
/* acc[r] = sum_j x[j] * w_r[j] for the rows w_0 = w and w_1 = w + n (only w_0 when !pair), exact
 * (|sum| < 2^39 for n <= 65535). */
static void dot_rows(const int16_t *x, const int8_t *w, int32_t n, int pair, int64_t acc[2])
{
    int64_t acc0 = 0, acc1 = 0;
    const int8_t *w1 = pair ? w + n : w;
    for (int32_t j = 0; j < n; j++) {
        acc0 += (int32_t)x[j] * (int32_t)w[j];
        acc1 += (int32_t)x[j] * (int32_t)w1[j];
    }
    acc[0] = acc0;
    acc[1] = acc1;
}

/* The operand the dot products read: src itself. */
static const int16_t *operand(int16_t *dst, const int16_t *src, int32_t n)
{
    (void)dst;
    (void)n;
    return src;
}
#endif

/* Gate `gate`'s pre-activation (Q3.12) of each of the hidden_size rows into pre[k], two rows at a
 * time; x and h as operand() gives them. */
static void gate_pre(const edgec_lstm_s16_desc *d, const int16_t *x, const int16_t *h, int32_t gate, int16_t *pre)
{
    const int32_t hs = d->hidden_size;
    for (int32_t k = 0; k < hs; k += 2) {
        const size_t row = (size_t)gate * (size_t)hs + (size_t)k;
        const int pair = k + 1 < hs;
        int64_t x_acc[2], h_acc[2];
        dot_rows(x, d->input_weights + row * (size_t)d->input_size, d->input_size, pair, x_acc);
        dot_rows(h, d->hidden_weights + row * (size_t)hs, hs, pair, h_acc);
        for (int32_t r = 0; r <= pair; r++) {
            const int64_t x_sum = edgec_add_bias_s64(x_acc[r], d->bias[row + (size_t)r]);
            const int16_t x_part = edgec_sat16(requantize_s64(x_sum, d->input_multiplier[gate], d->input_shift[gate]));
            const int32_t h_part = requantize_s64(h_acc[r], d->hidden_multiplier[gate], d->hidden_shift[gate]);
            pre[k + r] = edgec_sat16((int64_t)h_part + x_part);
        }
    }
}

/* One step of one batch row; scratch: the gates (4 * hidden_size int16), then room for x and h as
 * the dot products read them (word-aligned: EDGEC_LSTM_S16_SCRATCH_BYTES). */
static void lstm_step(const edgec_lstm_s16_desc *d, const int16_t *x, int16_t *h, int16_t *c, int16_t *gates)
{
    const int32_t hs = d->hidden_size;
    int16_t *x_room = gates + 4 * hs;
    const int16_t *xs = operand(x_room, x, d->input_size);
    const int16_t *hs_ = operand(x_room + 2 * ((d->input_size + 1) / 2), h, hs);
    for (int32_t gate = 0; gate < 4; gate++) {
        int16_t *out = gates + gate * hs;
        gate_pre(d, xs, hs_, gate, out);
        for (int32_t k = 0; k < hs; k++) {
            out[k] =
                edgec_activation_s16(out[k], 0, gate == 2 ? EDGEC_LSTM_TANH : EDGEC_LSTM_SIGMOID, d->sigmoid_table);
        }
    }
    /* h is read by every gate above: it is written only now */
    for (int32_t k = 0; k < hs; k++) {
        const int32_t i = gates[k], f = gates[hs + k], g = gates[2 * hs + k], o = gates[3 * hs + k];
        int32_t cell =
            edgec_sat16(edgec_requantize(f * (int32_t)c[k], d->forget_cell_multiplier, d->forget_cell_shift));
        cell = edgec_sat16((int64_t)edgec_requantize(i * g, d->input_cell_multiplier, d->input_cell_shift) + cell);
        c[k] = (int16_t)cell;
        const int32_t t = edgec_activation_s16(cell, d->cell_tanh_shift, EDGEC_LSTM_TANH, d->sigmoid_table);
        h[k] = edgec_sat16(edgec_requantize(o * t, d->output_multiplier, d->output_shift));
    }
}

static int shifts_s64_valid(const int32_t *multiplier, const int32_t *shift)
{
    return edgec_s16_output_valid(multiplier, shift, 4, INT16_MIN, INT16_MAX);
}

static int lstm_s16_valid(const edgec_lstm_s16_desc *d, const int16_t *input, const int16_t *output,
                          const int16_t *hidden, const int16_t *cell, const void *scratch)
{
    if (d == NULL || input == NULL || output == NULL || hidden == NULL || cell == NULL || scratch == NULL ||
        d->input_weights == NULL || d->hidden_weights == NULL || d->bias == NULL || d->sigmoid_table == NULL ||
        !edgec_word_aligned(scratch)) {
        return 0;
    }
    if (!edgec_recurrent_shape_valid(d->batches, d->time_steps, d->input_size, d->hidden_size)) {
        return 0;
    }
    return d->cell_tanh_shift >= -31 && d->cell_tanh_shift <= 14 &&
           shifts_s64_valid(d->input_multiplier, d->input_shift) &&
           shifts_s64_valid(d->hidden_multiplier, d->hidden_shift) && edgec_shift_valid(d->forget_cell_shift) &&
           edgec_shift_valid(d->input_cell_shift) && edgec_shift_valid(d->output_shift);
}

edgec_status edgec_lstm_s16(const edgec_lstm_s16_desc *desc, const int16_t *input, int16_t *output, int16_t *hidden,
                            int16_t *cell, void *scratch)
{
    if (!lstm_s16_valid(desc, input, output, hidden, cell, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_lstm_s16_desc *d = desc;
    const int32_t hs = d->hidden_size;
    const size_t state = (size_t)d->batches * (size_t)hs * sizeof(int16_t);
    if (d->reset_state) {
        memset(hidden, 0, state);
        memset(cell, 0, state);
    }
    for (int32_t t = 0; t < d->time_steps; t++) {
        for (int32_t b = 0; b < d->batches; b++) {
            const size_t row = d->time_major ? (size_t)t * (size_t)d->batches + (size_t)b
                                             : (size_t)b * (size_t)d->time_steps + (size_t)t;
            int16_t *h = hidden + (size_t)b * (size_t)hs;
            lstm_step(d, input + row * (size_t)d->input_size, h, cell + (size_t)b * (size_t)hs, (int16_t *)scratch);
            if (!d->last_step_only) {
                memcpy(output + row * (size_t)hs, h, (size_t)hs * sizeof(int16_t));
            } else if (t == d->time_steps - 1) {
                memcpy(output + (size_t)b * (size_t)hs, h, (size_t)hs * sizeof(int16_t));
            }
        }
    }
    return EDGEC_OK;
}
