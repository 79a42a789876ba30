/*
 * edgec_recurrent_s8.c -- int8 LSTM and GRU over a sequence (or one step of a stream).
 *
 * LSTM: TFLite Micro's integer UNIDIRECTIONAL_SEQUENCE_LSTM (8x8->16, no peephole, projection or
 * layer norm) as CMSIS-NN's arm_lstm_unidirectional_s8 computes it: per gate an int8 x int8 matmul
 * of the input and one of the hidden state, each requantized to int16 Q3.12 and added with
 * saturation; sigmoid/tanh by arm_nn_activation_s16's interpolated table (Q3.12 -> Q0.15); the cell
 * state int16 with a power-of-two scale; the hidden state int8 (the output's qparams).
 * GRU: edgec's definition with the same pieces (edgec.ops.recurrent.gru_step).
 * The golden kernels are edgec.ops.recurrent.lstm_step / gru_step / recurrent_s8.
 *
 * Dot products accumulate in uint32_t (wrapping like the golden's int32) so that no signed
 * overflow can happen whatever the bias; products of int16 gates fit int32 (|a * b| <= 2^30).
 * The dot products run two rows at a time: on SMLAD with the DSP extension (Cortex-M4/M7/M33), on
 * Helium's VMLADAVA (Cortex-M55).
 *
 * int4 weights (weight_bits 4, per gate block in [-7, 7]): the matrices stay packed and the dot
 * products read the nibbles in place (matmul_rows_s4), since unpacking a matrix would take its whole
 * int8 size in RAM (4 * H * (I + H) bytes) and a row once per step costs what reading it does.
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_s4.h"
#include "../support/edgec_support.h"

static int8_t sat8(int64_t x)
{
    return (int8_t)EDGEC_MIN(EDGEC_MAX(x, -128), 127);
}

/* acc + sum_j w[j] * x[j] over n terms, wrapping like int32 (uint32 arithmetic; SMLAD and
 * VMLADAVA accumulate modulo 2^32). */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#include <arm_mve.h>

/* Helium: 16 int8 products per VMLADAVA, the tail loaded under a VCTP predicate (zeros). */
static void dot2(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, uint32_t *acc0, uint32_t *acc1)
{
    int32_t sum0 = (int32_t)*acc0;
    int32_t sum1 = (int32_t)*acc1;
    for (int32_t j = 0; j < n; j += 16) {
        const mve_pred16_t p = vctp8q((uint32_t)(n - j));
        const int8x16_t xv = vldrbq_z_s8(x + j, p);
        sum0 = vmladavaq_s8(sum0, xv, vldrbq_z_s8(w0 + j, p));
        sum1 = vmladavaq_s8(sum1, xv, vldrbq_z_s8(w1 + j, p));
    }
    *acc0 = (uint32_t)sum0;
    *acc1 = (uint32_t)sum1;
}
#elif defined(__ARM_FEATURE_DSP)
/* Two rows against the same x: four int8 per word, widened by SXTB16 into int16 pairs, two SMLAD
 * per row and word; x is widened once for both rows. Unaligned words are read with memcpy (one
 * LDR: the M-profile cores with the DSP extension load unaligned words). */
static void dot2(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, uint32_t *acc0, uint32_t *acc1)
{
    int32_t sum0 = (int32_t)*acc0;
    int32_t sum1 = (int32_t)*acc1;
    int32_t j = 0;
    for (; j + 4 <= n; j += 4) {
        int32_t xv, a, b;
        memcpy(&xv, x + j, 4);
        memcpy(&a, w0 + j, 4);
        memcpy(&b, w1 + j, 4);
        const int32_t x_even = __sxtb16(xv), x_odd = edgec_sxtb16_ror8(xv);
        sum0 = __smlad(__sxtb16(a), x_even, sum0);
        sum0 = __smlad(edgec_sxtb16_ror8(a), x_odd, sum0);
        sum1 = __smlad(__sxtb16(b), x_even, sum1);
        sum1 = __smlad(edgec_sxtb16_ror8(b), x_odd, sum1);
    }
    uint32_t u0 = (uint32_t)sum0, u1 = (uint32_t)sum1;
    for (; j < n; j++) {
        u0 += (uint32_t)((int32_t)w0[j] * (int32_t)x[j]);
        u1 += (uint32_t)((int32_t)w1[j] * (int32_t)x[j]);
    }
    *acc0 = u0;
    *acc1 = u1;
}
#else
static void dot2(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, uint32_t *acc0, uint32_t *acc1)
{
    uint32_t u0 = *acc0, u1 = *acc1;
    for (int32_t j = 0; j < n; j++) {
        u0 += (uint32_t)((int32_t)w0[j] * (int32_t)x[j]);
        u1 += (uint32_t)((int32_t)w1[j] * (int32_t)x[j]);
    }
    *acc0 = u0;
    *acc1 = u1;
}
#endif

/* requantize(bias[r] + sum_j w[r][j] * x[j]) for each of `rows` rows into out[r] (int32). */
static void matmul_rows(const int8_t *x, const int8_t *w, const int32_t *bias, int32_t cols, int32_t rows,
                        int32_t multiplier, int32_t shift, int32_t *out)
{
    int32_t r = 0;
    for (; r + 2 <= rows; r += 2) {
        const int8_t *row = w + (size_t)r * (size_t)cols;
        uint32_t acc0 = (uint32_t)bias[r], acc1 = (uint32_t)bias[r + 1];
        dot2(x, row, row + cols, cols, &acc0, &acc1);
        out[r] = edgec_requantize((int32_t)acc0, multiplier, shift);
        out[r + 1] = edgec_requantize((int32_t)acc1, multiplier, shift);
    }
    if (r < rows) { /* the last, odd row: paired with itself */
        const int8_t *row = w + (size_t)r * (size_t)cols;
        uint32_t acc0 = (uint32_t)bias[r], acc1 = acc0;
        dot2(x, row, row, cols, &acc0, &acc1);
        out[r] = edgec_requantize((int32_t)acc0, multiplier, shift);
    }
}

/* ---- int4 weights (weight_bits 4): the packed rows read in place ----------------------------- */

#if defined(__ARM_FEATURE_DSP)
/* Inputs widened at a time: 128, 256 bytes of stack (the recurrent scratch is the gates'). */
#define S4_DSP_CHUNK_BLOCKS 16

/*
 * Rows w0 and w1 (packed, from a byte) against `blocks` widened blocks of 8 inputs: edgec_s4.h's
 * unpacking, a packed word's nibble k of halfword h (weight k + 4h) shifted left by 4 * (3 - k)
 * and masked with 0xF000F000 giving (4096 w_k, 4096 w_{k+4}), which one SMLAD multiplies by the
 * input pair (x_k, x_{k+4}): per block and row a load, 4 AND (the shift in the operand) and 4
 * SMLAD, the pairs loaded once for both rows. sums: 4096 times the dot products, exact in int32
 * (128 inputs: 128 * 8 * 128 * 4096 = 2^29).
 */
static void s4_dsp_dot2(const int32_t *pairs, const int8_t *w0, const int8_t *w1, int32_t blocks, int32_t sums[2])
{
    int32_t s0 = 0, s1 = 0;
    for (; blocks > 0; blocks--, pairs += 4, w0 += 4, w1 += 4) {
        uint32_t a, c;
        memcpy(&a, w0, 4);
        memcpy(&c, w1, 4);
        s0 = __smlad((int32_t)((a << 12) & 0xF000F000u), pairs[0], s0);
        s1 = __smlad((int32_t)((c << 12) & 0xF000F000u), pairs[0], s1);
        s0 = __smlad((int32_t)((a << 8) & 0xF000F000u), pairs[1], s0);
        s1 = __smlad((int32_t)((c << 8) & 0xF000F000u), pairs[1], s1);
        s0 = __smlad((int32_t)((a << 4) & 0xF000F000u), pairs[2], s0);
        s1 = __smlad((int32_t)((c << 4) & 0xF000F000u), pairs[2], s1);
        s0 = __smlad((int32_t)(a & 0xF000F000u), pairs[3], s0);
        s1 = __smlad((int32_t)(c & 0xF000F000u), pairs[3], s1);
    }
    sums[0] = s0;
    sums[1] = s1;
}

/*
 * acc[r] += row (first + r) . x over the first n inputs (a multiple of 8; cols even, so every row
 * starts on a byte), for the `rows` rows: x is widened (edgec_s4_dsp_widen_block, offset 0: the
 * input offset is in the bias) once per chunk of 128 for all rows, then the rows run two at a
 * time; each chunk's sum >> 12 is added, wrapping like the golden's int32.
 */
static void s4_dsp_rows(const int8_t *x, const int8_t *packed, int32_t first, int32_t cols, int32_t rows, int32_t n,
                        uint32_t *acc)
{
    int32_t pairs[4 * S4_DSP_CHUNK_BLOCKS];
    const int32_t row_bytes = cols / 2;
    for (int32_t from = 0; from < n; from += 8 * S4_DSP_CHUNK_BLOCKS) {
        const int32_t blocks = EDGEC_MIN(n - from, 8 * S4_DSP_CHUNK_BLOCKS) / 8;
        for (int32_t b = 0; b < blocks; b++) {
            edgec_s4_dsp_widen_block(x + from + 8 * b, 0u, pairs + 4 * b, 1);
        }
        const int8_t *row = packed + (size_t)first * (size_t)row_bytes + (size_t)(from / 2);
        for (int32_t r = 0; r < rows; r += 2, row += 2 * row_bytes) {
            int32_t sums[2];
            const int pair = r + 1 < rows; /* the last, odd row: paired with itself */
            s4_dsp_dot2(pairs, row, pair ? row + row_bytes : row, blocks, sums);
            acc[r] += (uint32_t)(sums[0] >> 12);
            if (pair) {
                acc[r + 1] += (uint32_t)(sums[1] >> 12);
            }
        }
    }
}
#endif

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* The longest row the Helium path takes: its deinterleaved x on the stack (256 bytes). */
#define S4_MVE_MAX_COLS 256

/*
 * acc[r] += row (first + r) . x for the `rows` rows of an even length cols <= S4_MVE_MAX_COLS:
 * x deinterleaved once (edgec_s4_mve_deinterleave), then four rows at a time by edgec_s4.h's
 * edgec_s4_mve_dot4 (per 32 weights a row: a load, VSHL, VAND and two VMLADAVA), whose sums are
 * 16 times the dot products: exact in int32 (16 * 256 * 8 * 128 = 2^22).
 */
static void s4_mve_rows(const int8_t *x, const int8_t *packed, int32_t first, int32_t cols, int32_t rows, uint32_t *acc)
{
    int8_t column[EDGEC_S4_MVE_COLUMN_BYTES(S4_MVE_MAX_COLS)];
    const int32_t row_bytes = cols / 2;
    edgec_s4_mve_deinterleave(x, cols, column);
    for (int32_t r = 0; r < rows; r += 4) {
        int32_t sums[4];
        vst1q_s32(sums,
                  edgec_s4_mve_dot4(column, packed + (size_t)(first + r) * (size_t)row_bytes, row_bytes, rows - r));
        for (int32_t i = 0; i < 4 && r + i < rows; i++) {
            acc[r + i] += (uint32_t)(sums[i] >> 4);
        }
    }
}
#endif

/* acc[r] += row (first + r) . x over the inputs the Helium or DSP path takes (returned: 0, or
 * all of them, or the whole blocks of 8): rows that start on a byte (an even cols). */
static int32_t s4_fast_rows(const int8_t *x, const int8_t *packed, int32_t first, int32_t cols, int32_t rows,
                            uint32_t *acc)
{
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    if (cols % 2 == 0 && cols <= S4_MVE_MAX_COLS) {
        s4_mve_rows(x, packed, first, cols, rows, acc);
        return cols;
    }
#endif
#if defined(__ARM_FEATURE_DSP)
    if (cols % 2 == 0) {
        s4_dsp_rows(x, packed, first, cols, rows, cols / 8 * 8, acc);
        return cols / 8 * 8;
    }
#endif
    (void)x;
    (void)packed;
    (void)first;
    (void)cols;
    (void)rows;
    (void)acc;
    return 0;
}

/* matmul_rows over int4 rows, the packed matrix read in place: requantize(bias[r] + sum_j
 * w[first + r][j] * x[j]) for the `rows` rows from row `first`; out holds the sums meanwhile.
 * Rows starting on a byte (an even cols) on Helium (rows up to 256) or SMLAD (whole blocks of
 * 8), the rest two weights per byte (edgec_s4_dot). */
static void matmul_rows_s4(const int8_t *x, const int8_t *packed, int32_t first, const int32_t *bias, int32_t cols,
                           int32_t rows, int32_t multiplier, int32_t shift, int32_t *out)
{
    uint32_t *acc = (uint32_t *)out;
    for (int32_t r = 0; r < rows; r++) {
        acc[r] = (uint32_t)bias[r];
    }
    const int32_t done = s4_fast_rows(x, packed, first, cols, rows, acc);
    for (int32_t r = 0; r < rows; r++) {
        const int32_t sum = (int32_t)edgec_s4_dot(packed, (first + r) * cols + done, x + done, cols - done, 0, acc[r]);
        out[r] = edgec_requantize(sum, multiplier, shift);
    }
}

/* One gate's matmul: int8 rows, or packed int4 rows (weight_bits 4). */
static void gate_matmul(const edgec_recurrent_desc *d, const int8_t *x, const int8_t *w, int32_t gate,
                        const int32_t *bias, int32_t cols, int32_t multiplier, int32_t shift, int32_t *out)
{
    const int32_t hs = d->hidden_size;
    if (d->weight_bits == 4) {
        matmul_rows_s4(x, w, gate * hs, bias + gate * hs, cols, hs, multiplier, shift, out);
    } else {
        matmul_rows(x, w + (size_t)gate * (size_t)hs * (size_t)cols, bias + gate * hs, cols, hs, multiplier, shift,
                    out);
    }
}

/* Gate `gate`'s input part, saturated to int16, in x_part; its recurrent part (requantized,
 * not saturated) in h_part; both hidden_size long. */
static void gate_parts(const edgec_recurrent_desc *d, const int8_t *x, const int8_t *h, int32_t gate, int32_t *x_part,
                       int32_t *h_part)
{
    const int32_t hs = d->hidden_size;
    gate_matmul(d, x, d->input_weights, gate, d->input_bias, d->input_size, d->input_multiplier[gate],
                d->input_shift[gate], x_part);
    for (int32_t k = 0; k < hs; k++) {
        x_part[k] = edgec_sat16(x_part[k]);
    }
    gate_matmul(d, h, d->hidden_weights, gate, d->hidden_bias, hs, d->hidden_multiplier[gate], d->hidden_shift[gate],
                h_part);
}

/* One LSTM step of one batch row; scratch: 2 * hidden_size int32 + 4 * hidden_size int16. */
static void lstm_step(const edgec_recurrent_desc *d, const int8_t *x, int8_t *h, int16_t *c, int32_t *parts,
                      int16_t *gates)
{
    const int32_t hs = d->hidden_size;
    for (int32_t gate = 0; gate < 4; gate++) {
        gate_parts(d, x, h, gate, parts, parts + hs);
        for (int32_t k = 0; k < hs; k++) {
            const int32_t pre = edgec_sat16((int64_t)parts[hs + k] + parts[k]);
            gates[gate * hs + k] =
                gate == 2 && d->tanh_linear
                    ? (int16_t)pre
                    : edgec_activation_s16(pre, 0, gate == 2 ? EDGEC_LSTM_TANH : EDGEC_LSTM_SIGMOID, d->sigmoid_table);
        }
    }
    for (int32_t k = 0; k < hs; k++) {
        const int32_t i = gates[k], f = gates[hs + k], g = gates[2 * hs + k], o = gates[3 * hs + k];
        int32_t cell =
            edgec_sat16(edgec_requantize(f * (int32_t)c[k], d->forget_cell_multiplier, d->forget_cell_shift));
        cell = edgec_sat16((int64_t)edgec_requantize(i * g, d->input_cell_multiplier, d->input_cell_shift) + cell);
        c[k] = (int16_t)cell;
        const int32_t t =
            d->tanh_linear ? cell : edgec_activation_s16(cell, d->cell_tanh_shift, EDGEC_LSTM_TANH, d->sigmoid_table);
        h[k] = sat8((int64_t)edgec_requantize(o * t, d->output_multiplier, d->output_shift) + d->output_offset);
    }
}

/* One GRU step of one batch row; scratch: 2 * hidden_size int32 + 4 * hidden_size int16. */
static void gru_step(const edgec_recurrent_desc *d, const int8_t *x, int8_t *h, int32_t *parts, int16_t *gates)
{
    const int32_t hs = d->hidden_size;
    for (int32_t gate = 0; gate < 2; gate++) { /* r, z */
        gate_parts(d, x, h, gate, parts, parts + hs);
        for (int32_t k = 0; k < hs; k++) {
            gates[gate * hs + k] = edgec_activation_s16(edgec_sat16((int64_t)parts[hs + k] + parts[k]), 0,
                                                        EDGEC_LSTM_SIGMOID, d->sigmoid_table);
        }
    }
    gate_parts(d, x, h, 2, parts, parts + hs); /* n: x part and h part kept apart */
    for (int32_t k = 0; k < hs; k++) {
        const int32_t r = gates[k];
        const int32_t hn = edgec_sat16(parts[hs + k]);
        const int32_t rh = edgec_sat16(edgec_requantize(r * hn, d->forget_cell_multiplier, d->forget_cell_shift));
        const int32_t pre = edgec_sat16((int64_t)parts[k] + rh);
        gates[2 * hs + k] =
            d->tanh_linear ? (int16_t)pre : edgec_activation_s16(pre, 0, EDGEC_LSTM_TANH, d->sigmoid_table);
    }
    for (int32_t k = 0; k < hs; k++) {
        const int32_t z = gates[hs + k], n = gates[2 * hs + k];
        const int32_t h_q15 = edgec_sat16(
            edgec_requantize((int32_t)h[k] - d->output_offset, d->hidden_q15_multiplier, d->hidden_q15_shift));
        const int32_t mixed = (32768 - z) * n + z * h_q15;
        h[k] = sat8((int64_t)edgec_requantize(mixed, d->output_multiplier, d->output_shift) + d->output_offset);
    }
}

static int recurrent_desc_valid(const edgec_recurrent_desc *d, int32_t cell, const int8_t *input, const int8_t *output,
                                const int8_t *hidden, const int16_t *cell_state, const void *scratch)
{
    if (d == NULL || input == NULL || output == NULL || hidden == NULL || scratch == NULL || d->input_weights == NULL ||
        d->hidden_weights == NULL || d->input_bias == NULL || d->hidden_bias == NULL || d->sigmoid_table == NULL ||
        d->cell != cell || (cell == EDGEC_RECURRENT_LSTM && cell_state == NULL)) {
        return 0;
    }
    if (!edgec_recurrent_shape_valid(d->batches, d->time_steps, d->input_size, d->hidden_size)) {
        return 0;
    }
    if (d->output_offset < -128 || d->output_offset > 127 || d->cell_tanh_shift < -31 || d->cell_tanh_shift > 14 ||
        (d->weight_bits != 8 && d->weight_bits != 4)) {
        return 0;
    }
    if (!edgec_shifts_valid(d->input_shift, cell) || !edgec_shifts_valid(d->hidden_shift, cell) ||
        !edgec_shift_valid(d->forget_cell_shift) || !edgec_shift_valid(d->input_cell_shift) ||
        !edgec_shift_valid(d->output_shift) || !edgec_shift_valid(d->hidden_q15_shift)) {
        return 0;
    }
    return 1;
}

static edgec_status recurrent_run(const edgec_recurrent_desc *d, int32_t cell, const int8_t *input, int8_t *output,
                                  int8_t *hidden, int16_t *cell_state, void *scratch)
{
    if (!recurrent_desc_valid(d, cell, input, output, hidden, cell_state, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t hs = d->hidden_size;
    int32_t *parts = (int32_t *)scratch;
    int16_t *gates = (int16_t *)(parts + 2 * hs);
    if (d->reset_state) {
        memset(hidden, d->output_offset, (size_t)d->batches * (size_t)hs);
        if (cell_state != NULL) {
            memset(cell_state, 0, (size_t)d->batches * (size_t)hs * sizeof(int16_t));
        }
    }
    for (int32_t t = 0; t < d->time_steps; t++) {
        for (int32_t b = 0; b < d->batches; b++) {
            const size_t row = d->time_major ? (size_t)t * (size_t)d->batches + (size_t)b
                                             : (size_t)b * (size_t)d->time_steps + (size_t)t;
            int8_t *h = hidden + (size_t)b * (size_t)hs;
            if (cell == EDGEC_RECURRENT_LSTM) {
                lstm_step(d, input + row * (size_t)d->input_size, h, cell_state + (size_t)b * (size_t)hs, parts, gates);
            } else {
                gru_step(d, input + row * (size_t)d->input_size, h, parts, gates);
            }
            if (!d->last_step_only) {
                memcpy(output + row * (size_t)hs, h, (size_t)hs);
            } else if (t == d->time_steps - 1) {
                memcpy(output + (size_t)b * (size_t)hs, h, (size_t)hs);
            }
        }
    }
    return EDGEC_OK;
}

edgec_status edgec_lstm_s8(const edgec_recurrent_desc *desc, const int8_t *input, int8_t *output, int8_t *hidden,
                           int16_t *cell, void *scratch)
{
    return recurrent_run(desc, EDGEC_RECURRENT_LSTM, input, output, hidden, cell, scratch);
}

edgec_status edgec_gru_s8(const edgec_recurrent_desc *desc, const int8_t *input, int8_t *output, int8_t *hidden,
                          void *scratch)
{
    return recurrent_run(desc, EDGEC_RECURRENT_GRU, input, output, hidden, NULL, scratch);
}
