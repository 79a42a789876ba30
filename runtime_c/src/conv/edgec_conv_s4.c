/*
 * edgec_conv_s4.c -- convolution (NHWC, any kernel, stride, padding, dilation, groups) with int4
 * weights (packed two per byte, low nibble first) and int8 activations: CMSIS-NN
 * arm_convolve_s4's packing and arithmetic (Source/ConvolutionFunctions/arm_convolve_s4.c) with
 * per-channel requantization; golden: edgec.ops.int4.conv_s4. The portable kernel reads each tap's
 * run of input_c / groups weights straight from the packed filter (no im2col, no scratch); the DSP
 * and Helium ones gather each output pixel's receptive field of a group (its column) into scratch
 * and run edgec_s4.h's rows over it, as the fully connected kernels do; their _unpacked forms (a
 * small filter: stems, short pointwise layers, a 3x3 of few channels) unpack the filter into an
 * int8 packed kernel's layout and run it.
 */
#include "../support/edgec_s4.h"

static int conv_s4_valid(const edgec_conv_s4_desc *d, const int8_t *input, const int8_t *output)
{
    if (!d || !input || !output || !d->filter || !d->multiplier || !d->shift) {
        return 0;
    }
    if (d->batches < 1 || d->input_h < 1 || d->input_w < 1 || d->input_c < 1 || d->output_h < 1 || d->output_w < 1 ||
        d->output_c < 1 || d->kernel_h < 1 || d->kernel_w < 1 || d->stride_h < 1 || d->stride_w < 1 ||
        d->dilation_h < 1 || d->dilation_w < 1 || d->pad_top < 0 || d->pad_left < 0 || d->groups < 1 ||
        d->input_c % d->groups != 0 || d->output_c % d->groups != 0) {
        return 0;
    }
    if ((int64_t)d->batches * d->input_h * d->input_w * d->input_c > INT32_MAX ||
        (int64_t)d->batches * d->output_h * d->output_w * d->output_c > INT32_MAX ||
        (int64_t)d->output_c * d->kernel_h * d->kernel_w * (d->input_c / d->groups) > INT32_MAX) {
        return 0;
    }
    return edgec_conv_axis_valid(d->input_h, d->output_h, d->kernel_h, d->stride_h, d->pad_top, d->dilation_h) &&
           edgec_conv_axis_valid(d->input_w, d->output_w, d->kernel_w, d->stride_w, d->pad_left, d->dilation_w) &&
           edgec_s4_output_valid(d->input_offset, d->output_offset, d->act_min, d->act_max, d->shift, d->output_c);
}

edgec_status edgec_conv_s4(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output)
{
    if (!conv_s4_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_s4_desc d = *desc;
    const edgec_output_stage stage = edgec_output_stage_make(d.output_offset, d.act_min, d.act_max);
    const int32_t cin_g = d.input_c / d.groups;
    const int32_t cout_g = d.output_c / d.groups;
    for (int32_t n = 0; n < d.batches; n++) {
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                int8_t *out = output + ((n * d.output_h + oy) * d.output_w + ox) * d.output_c;
                for (int32_t o = 0; o < d.output_c; o++) {
                    const int32_t g = o / cout_g;
                    uint32_t acc = d.bias ? (uint32_t)d.bias[o] : 0u;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int32_t iy = ty.base + ky * d.dilation_h;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            const int32_t ix = tx.base + kx * d.dilation_w;
                            const int8_t *x = input + ((n * d.input_h + iy) * d.input_w + ix) * d.input_c + g * cin_g;
                            acc = edgec_s4_dot(d.filter, ((o * d.kernel_h + ky) * d.kernel_w + kx) * cin_g, x, cin_g,
                                               d.input_offset, acc);
                        }
                    }
                    out[o] = edgec_requantize_s8((int32_t)acc, d.multiplier[o], d.shift[o], stage);
                }
            }
        }
    }
    return EDGEC_OK;
}

#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
/* n bytes from src to dst, a word at a time while 4 remain (the runs of a receptive field are short:
 * a memcpy call would cost more than the copy). */
static inline int8_t *conv_s4_copy(int8_t *dst, const int8_t *src, int32_t n)
{
    for (; n >= 4; n -= 4, dst += 4, src += 4) {
        memcpy(dst, src, 4);
    }
    for (; n > 0; n--) {
        *dst++ = *src++;
    }
    return dst;
}

/* n bytes of value v at dst, so. */
static inline int8_t *conv_s4_fill(int8_t *dst, int8_t v, int32_t n)
{
    const uint32_t word = (uint8_t)v * 0x01010101u;
    for (; n >= 4; n -= 4, dst += 4) {
        memcpy(dst, &word, 4);
    }
    for (; n > 0; n--) {
        *dst++ = v;
    }
    return dst;
}

/* The column of output pixel (n, oy, ox), group g: the K = kernel_h * kernel_w * input_c / groups
 * inputs its channels read, in the filter's order; a tap outside the input reads the input zero
 * point (-input_offset: x + input_offset = 0). A 1x1 window without padding of an ungrouped layer
 * is the input pixel itself (no copy). */
static const int8_t *conv_s4_column(const edgec_conv_s4_desc *d, const int8_t *input, int32_t n, int32_t oy, int32_t ox,
                                    int32_t g, int8_t *column)
{
    const int32_t cin_g = d->input_c / d->groups;
    const int8_t pad = (int8_t)(-d->input_offset);
    const edgec_tap_range ty = edgec_conv_taps(oy, d->stride_h, d->pad_top, d->dilation_h, d->kernel_h, d->input_h);
    const edgec_tap_range tx = edgec_conv_taps(ox, d->stride_w, d->pad_left, d->dilation_w, d->kernel_w, d->input_w);
    const int8_t *image = input + (int64_t)n * d->input_h * d->input_w * d->input_c + g * cin_g;
    if (d->kernel_h == 1 && d->kernel_w == 1 && d->groups == 1 && ty.last > ty.first && tx.last > tx.first) {
        return image + (ty.base * d->input_w + tx.base) * d->input_c;
    }
    /* Rows of taps outside the input are one fill each side; a row inside is its left padding, its
     * taps (one run of kernel_w * input_c bytes when adjacent and ungrouped), its right padding. */
    const int contiguous = d->dilation_w == 1 && d->groups == 1;
    const int32_t row = d->kernel_w * cin_g;
    const int32_t left = tx.first * cin_g;
    const int32_t width = (tx.last - tx.first) * cin_g;
    const int32_t right = row - left - width;
    const int32_t step = d->dilation_h * d->input_w * d->input_c;
    /* the row's first tap inside, from image (an offset: no pointer is formed outside the input) */
    int32_t first =
        ((ty.base + ty.first * d->dilation_h) * d->input_w + tx.base + tx.first * d->dilation_w) * d->input_c;
    int8_t *at = conv_s4_fill(column, pad, ty.first * row);
    for (int32_t ky = ty.first; ky < ty.last; ky++, first += step) {
        at = conv_s4_fill(at, pad, left);
        if (contiguous) {
            at = conv_s4_copy(at, image + first, width);
        } else {
            for (int32_t kx = 0; kx < tx.last - tx.first; kx++) {
                at = conv_s4_copy(at, image + first + kx * d->dilation_w * d->input_c, cin_g);
            }
        }
        at = conv_s4_fill(at, pad, right);
    }
    conv_s4_fill(at, pad, (d->kernel_h - EDGEC_MAX(ty.last, ty.first)) * row);
    return column;
}

/* conv_s4_column of output pixel p (batch, row and column from its index). */
static const int8_t *conv_s4_pixel_column(const edgec_conv_s4_desc *d, const int8_t *input, int32_t p, int32_t g,
                                          int8_t *column)
{
    return conv_s4_column(d, input, p / d->output_w / d->output_h, p / d->output_w % d->output_h, p % d->output_w, g,
                          column);
}

/* Weights per output channel: K. */
static int32_t conv_s4_row_length(const edgec_conv_s4_desc *d)
{
    return d->kernel_h * d->kernel_w * (d->input_c / d->groups);
}

/*
 * The int4 filter ([rows][K], packed) as an int8 packed kernel reads it
 * (edgec.ops.kernel_layout.interleave_rows): each row's K weights in runs of `run` (a window
 * row), each run padded with zeros to `run_step` taps (run = run_step = K: unpadded), then to
 * row_len taps (a multiple of `group`); rows zero-padded to a multiple of `block`; per block of
 * `block` rows and group of `group` taps, each row's group. `wide`: int16 taps, each group of 4 as
 * (w0, w2, w1, w3) (edgec_conv_s8_dsp_wide's widen_taps), else int8. Zeroed, then each weight
 * stored where it goes. Always inlined: block and group are constants at each call (shifts).
 */
static inline __attribute__((always_inline)) void conv_s4_unpack_rows(const int8_t *filter, int32_t rows, int32_t k,
                                                                      int32_t run, int32_t run_step, int32_t row_len,
                                                                      int32_t block, int32_t group, int wide, void *out)
{
    const int32_t padded_rows = (rows + block - 1) / block * block;
    memset(out, 0, (size_t)padded_rows * (size_t)row_len * (wide ? 2u : 1u));
    int32_t n = 0; /* the packed stream's element */
    for (int32_t o = 0; o < rows; o++) {
        const uint32_t row_at = (uint32_t)(o / block * block * row_len + o % block * group);
        for (int32_t t = 0, pos = 0; t < k; t += run, pos += run_step) {
            const int32_t count = EDGEC_MIN(run, k - t);
            for (int32_t i = 0; i < count; i++) {
                const uint32_t p = (uint32_t)(pos + i);
                uint32_t at = row_at + p / (uint32_t)group * (uint32_t)(group * block) + p % (uint32_t)group;
                const int8_t w = (int8_t)edgec_s4_at(filter, n++);
                if (wide) { /* taps 1 and 2 of a group of 4 trade places */
                    at = (at & ~3u) | (at & 1u) << 1 | (at >> 1 & 1u);
                    ((int16_t *)out)[at] = w;
                } else {
                    ((int8_t *)out)[at] = w;
                }
            }
        }
    }
}

/* 1 when an int8 packed kernel takes the layer (ungrouped, a bias: the folded one) and its filter,
 * unpacked (row_len taps a row, the rows padded to a multiple of `block`), and scratch stay well
 * within int32 bytes. */
static int conv_s4_unpacked_fits(const edgec_conv_s4_desc *d, int32_t row_len, int32_t block)
{
    const int64_t rows = (d->output_c + (int64_t)block - 1) / block * block;
    return d->groups == 1 && d->bias != NULL && (rows + 8) * 2 * row_len <= INT32_MAX;
}
#endif

#if defined(__ARM_FEATURE_DSP)
/* Four int4 weights (the nibbles of n, the first lowest) as four int8 bytes, the first lowest:
 * the two bytes moved to halfwords, their nibbles to bytes, then each byte sign-extended at once
 * ((v ^ 8) + 0x78, then ^ 0x80, is v - 16 for v >= 8 and v below; no carry crosses a byte). */
static inline uint32_t conv_s4_bytes4(uint32_t n)
{
    const uint32_t halves = (n | n << 8) & 0x00FF00FFu;
    const uint32_t spread = (halves | halves << 4) & 0x0F0F0F0Fu;
    return ((spread ^ 0x08080808u) + 0x78787878u) ^ 0x80808080u;
}

/* Four weights (the nibbles of n) stored at `at` as conv_s4_dsp_unpack_even lays them. */
static inline void conv_s4_dsp_store4(uint8_t *at, uint32_t n, int wide)
{
    const uint32_t w = conv_s4_bytes4(n);
    if (wide) { /* each word stored on its own: an array would go through the stack */
        const int32_t even = __sxtb16((int32_t)w);
        const int32_t odd = edgec_sxtb16_ror8((int32_t)w);
        memcpy(at, &even, sizeof even);
        memcpy(at + 4, &odd, sizeof odd);
    } else {
        memcpy(at, &w, sizeof w);
    }
}

/*
 * conv_s4_unpack_rows for an even K without window padding (run = run_step = K), into
 * edgec_conv_s8_dsp's layout (rows in pairs, groups of 4 taps; `wide`: edgec_conv_s8_dsp_wide's
 * int16 taps, each group as SXTB16 makes it, (w0, w2) then (w1, w3)), four weights a step from two
 * packed bytes (conv_s4_bytes4): row o's are bytes o * K / 2 on. Every tap of a row is written
 * (0 past K); a padding row (an odd count) is zeroed first. Always inlined: `wide` is a constant
 * at each call.
 */
static inline __attribute__((always_inline)) void conv_s4_dsp_unpack_even(const int8_t *filter, int32_t rows, int32_t k,
                                                                          int32_t row_len, int wide, void *out)
{
    const int32_t tap = wide ? 2 : 1;
    if (rows % 2 != 0) { /* the last pair: its second row's taps are 0 */
        memset((int8_t *)out + (rows - 1) * row_len * tap, 0, (size_t)(2 * row_len * tap));
    }
    const uint8_t *src = (const uint8_t *)filter; /* row o's bytes follow row o - 1's */
    for (int32_t o = 0; o < rows; o++) {
        uint8_t *at = (uint8_t *)out + (o / 2 * 2 * row_len + o % 2 * 4) * tap;
        int32_t t = 0;
        for (; t + 4 <= k; t += 4, src += 2, at += 8 * tap) {
            conv_s4_dsp_store4(at, (uint32_t)src[0] | (uint32_t)src[1] << 8, wide);
        }
        if (t < k) { /* K % 4 = 2: a last byte of two weights, then two 0 taps */
            conv_s4_dsp_store4(at, src[0], wide);
            src++;
        }
    }
}

/*
 * `count` rows o0, o0 + 2, ... of an odd-K layer (conv_s4_dsp_odd) into out[o], row o0's bytes at
 * `row`, each next one K bytes on, against `widened`: `blocks` whole blocks of the column with a 0
 * appended (even rows) or prepended (odd), then 0s (0 once the offset is added). A row is read
 * 4 * blocks bytes: past its own nibbles lie the next rows', met by those 0s. Three rows a pass
 * (edgec_s4_dsp_dot3 or _chunks with row step K), a last one or two the run's last three (the
 * rows before recomputed) or, in a run of fewer than three, one row read three times.
 */
static void conv_s4_dsp_odd_run(const edgec_s4_rows *a, const int8_t *row, int32_t o0, int32_t count,
                                const int16_t *widened, int32_t blocks, int short_requant, int32_t round_base,
                                int8_t *out)
{
    const int32_t k = a->count;
    for (int32_t i = 0; i < count;) {
        const int32_t valid = count >= 3 ? EDGEC_MIN(3, count - i) : 1;
        const int32_t first = count >= 3 ? 3 - valid : 0; /* sums[first] is row i */
        const int8_t *at = row + (i - first) * k;
        const int32_t step = count >= 3 ? k : 0;
        uint32_t acc[3];
        if (blocks <= EDGEC_S4_DSP_CHUNK / 8) {
            int32_t sums[3];
            edgec_s4_dsp_dot3(widened, at, step, widened + 8 * blocks, sums);
            acc[0] = (uint32_t)(sums[0] >> 12);
            acc[1] = (uint32_t)(sums[1] >> 12);
            acc[2] = (uint32_t)(sums[2] >> 12);
        } else {
            edgec_s4_dsp_chunks(widened, at, step, blocks, acc);
        }
        for (int32_t r = 0; r < valid; r++, i++) {
            const int32_t o = o0 + 2 * i;
            out[o] = edgec_s4_dsp_output(a, o, (a->bias ? (uint32_t)a->bias[o] : 0u) + acc[first + r], short_requant,
                                         round_base);
        }
    }
}

/* What conv_s4_dsp_odd's rows share: the first row read from a copy of the filter's end (a
 * multiple of 4 at or before the first row whose 4 * blocks bytes would pass the filter's end:
 * each parity's rows before it an even count), the copy's first byte in the filter (`from`), the
 * copy (0s after the filter's end). */
typedef struct {
    int32_t first;
    int32_t from;
    const int8_t *copy;
} conv_s4_dsp_odd_end;

/* The rows of one parity: those before end->first from the filter, the rest from its copy. */
static void conv_s4_dsp_odd_rows(const edgec_s4_rows *a, const conv_s4_dsp_odd_end *end, int32_t parity,
                                 const int16_t *widened, int32_t blocks, int32_t rows, int short_requant,
                                 int32_t round_base, int8_t *out)
{
    const int32_t k = a->count;
    const int32_t inside = EDGEC_MAX(end->first - parity + 1, 0) / 2;
    conv_s4_dsp_odd_run(a, a->filter + parity * k / 2, parity, inside, widened, blocks, short_requant, round_base, out);
    const int32_t o = parity + 2 * inside;
    if (o < rows) {
        conv_s4_dsp_odd_run(a, end->copy + (o * k / 2 - end->from), o, (rows - o + 1) / 2, widened, blocks,
                            short_requant, round_base, out);
    }
}

#if EDGEC_UNALIGNED_ASM
/* `count` rows o0, o0 + 2, ... (row o0's bytes at `row`, K apart) against two pixels' columns
 * (xa, xb raw; `widened` both widened, edgec_s4_dsp_widen2): two rows a pass by
 * edgec_s4_dsp_pairs_alternate, an odd last one by the portable loop. */
static void conv_s4_dsp_odd_run2(const edgec_s4_rows *a, const int8_t *row, int32_t o0, int32_t count,
                                 const int16_t *widened, int32_t blocks, int32_t round_base, const int8_t *xa,
                                 const int8_t *xb, int8_t *out_a, int8_t *out_b)
{
    if (count >= 2) {
        edgec_s4_rows part = *a;
        part.filter = row;
        part.bias = a->bias + o0;
        part.multiplier = a->multiplier + o0;
        part.shift = a->shift + o0;
        edgec_s4_dsp_run run = edgec_s4_dsp_run_make(&part, widened, widened + 16 * blocks, round_base, out_a + o0,
                                                     count / 2 * 4, (int32_t)(out_b - out_a));
        run.row_bytes = a->count;
        edgec_s4_dsp_pairs_alternate(&run);
    }
    if (count % 2 != 0) {
        const int32_t o = o0 + 2 * (count - 1);
        const uint32_t bias = (uint32_t)a->bias[o];
        out_a[o] = edgec_s4_dsp_output(a, o, edgec_s4_dot(a->filter, o * a->count, xa, a->count, a->input_offset, bias),
                                       1, round_base);
        out_b[o] = edgec_s4_dsp_output(a, o, edgec_s4_dot(a->filter, o * a->count, xb, a->count, a->input_offset, bias),
                                       1, round_base);
    }
}

/* conv_s4_dsp_odd_rows for two pixels (edgec_s4_dsp_pairs_alternate's conditions). */
static void conv_s4_dsp_odd_rows2(const edgec_s4_rows *a, const conv_s4_dsp_odd_end *end, int32_t parity,
                                  const int16_t *widened, int32_t blocks, int32_t rows, int32_t round_base,
                                  const int8_t *xa, const int8_t *xb, int8_t *out_a, int8_t *out_b)
{
    const int32_t k = a->count;
    const int32_t inside = EDGEC_MAX(end->first - parity + 1, 0) / 2;
    conv_s4_dsp_odd_run2(a, a->filter + parity * k / 2, parity, inside, widened, blocks, round_base, xa, xb, out_a,
                         out_b);
    const int32_t o = parity + 2 * inside;
    if (o < rows) {
        conv_s4_dsp_odd_run2(a, end->copy + (o * k / 2 - end->from), o, (rows - o + 1) / 2, widened, blocks, round_base,
                             xa, xb, out_a, out_b);
    }
}
#endif

/* Pixel p's column at column + 1 (K bytes; the bytes around it are set by the caller). A window
 * inside the input with dilation_w 1 is kernel_h runs of kernel_w * input_c bytes, copied as such
 * (conv_s4_column's fills and per-row ranges cost as much again on an RGB stem). */
static void conv_s4_dsp_odd_column(const edgec_conv_s4_desc *d, const int8_t *input, int32_t p, int32_t k,
                                   int8_t *column)
{
    const int32_t rest = p / d->output_w; /* n * output_h + oy */
    const int32_t n = rest / d->output_h;
    const int32_t ox = p - rest * d->output_w;
    const int32_t oy = rest - n * d->output_h;
    const int32_t iy = oy * d->stride_h - d->pad_top;
    const int32_t ix = ox * d->stride_w - d->pad_left;
    if (d->dilation_w == 1 && iy >= 0 && ix >= 0 && iy + (d->kernel_h - 1) * d->dilation_h < d->input_h &&
        ix + d->kernel_w <= d->input_w) {
        const int32_t row = d->kernel_w * d->input_c;
        const int32_t step = d->dilation_h * d->input_w * d->input_c;
        const int8_t *src = input + ((int64_t)(n * d->input_h + iy) * d->input_w + ix) * d->input_c;
        for (int32_t ky = 0; ky < d->kernel_h; ky++) {
            conv_s4_copy(column + 1 + ky * row, src + ky * step, row);
        }
        return;
    }
    const int8_t *x = conv_s4_pixel_column(d, input, p, 0, column + 1);
    if (x != column + 1) { /* a 1x1 window inside the input: the pixel itself */
        memcpy(column + 1, x, (size_t)k);
    }
}

/*
 * The DSP path for an odd K (ungrouped), as Helium's conv_s4_mve_odd: row o's first weight is
 * nibble o * K, and it is read from the byte holding it, (K + 1) / 2 bytes and on, so an even
 * row's weight K + 1 is the next row's first, an odd row's weight 0 the previous row's last. Per
 * pixel the column is gathered at column + 1 between input zero points (x + input_offset = 0): at
 * column[0] and from column[K + 1] to the end of the last whole block, so the even rows run
 * against the widened column + 1 (a 0 appended), the odd rows against the widened column (a 0
 * prepended), and each sum is the row's own K products. The last rows, whose words would pass the
 * filter's end, read a copy of it padded with 0s (made once a call: from up to 3 rows before the
 * first such row, at most 4 * B + 2 * K bytes, read up to 8 * B + 2 * K). Under
 * edgec_s4_dsp_rows2_fit's conditions (K + 1 up to 256), two pixels a pass
 * (edgec_s4_dsp_pairs_alternate), a last odd one paired with itself; else one (dot3). Scratch: two
 * pixels' columns widened twice (64 * B bytes), the copy (8 * B + 2 * K + 4), the two gathered
 * columns (8 * B + 4 each): 88 * B + 2 * K + 12 bytes, B = (K + 8) / 8 blocks.
 */
static void conv_s4_dsp_odd(const edgec_conv_s4_desc *d, const int8_t *input, int8_t *output, int16_t *scratch)
{
    const int32_t k = conv_s4_row_length(d);
    const int32_t blocks = (k + 8) / 8;
    int16_t *appended = scratch;
    int16_t *prepended = scratch + 16 * blocks;
    int8_t *copy = (int8_t *)(prepended + 16 * blocks);
    int8_t *column_a = copy + 8 * blocks + 2 * k + 4;
    int8_t *column_b = column_a + 8 * blocks + 4;
    const int32_t filter_bytes = (d->output_c * k + 1) / 2;
    conv_s4_dsp_odd_end end = { d->output_c, 0, copy };
    while (end.first > 0 && (end.first - 1) * k / 2 + 4 * blocks > filter_bytes) {
        end.first--;
    }
    end.first = end.first < d->output_c ? end.first / 4 * 4 : end.first;
    end.from = end.first * k / 2;
    memset(copy, 0, (size_t)(8 * blocks + 2 * k + 4));
    if (end.first < d->output_c) {
        memcpy(copy, d->filter + end.from, (size_t)(filter_bytes - end.from));
    }
    const int8_t pad = (int8_t)(-d->input_offset);
    column_a[0] = column_b[0] = pad;
    memset(column_a + 1 + k, pad, (size_t)(8 * blocks - k)); /* the gather writes K bytes only */
    memset(column_b + 1 + k, pad, (size_t)(8 * blocks - k));
    const int short_requant = edgec_dsp_requant_all_wide(d->multiplier, d->shift, d->output_c);
    const int32_t round_base = edgec_dsp_round_base(d->output_offset);
    const edgec_s4_rows rows = { d->filter,    k,
                                 column_a + 1, d->input_offset,
                                 d->bias,      d->multiplier,
                                 d->shift,     edgec_output_stage_make(d->output_offset, d->act_min, d->act_max) };
    const int32_t pixels = d->batches * d->output_h * d->output_w;
#if EDGEC_UNALIGNED_ASM
    if (short_requant && d->bias && blocks <= EDGEC_S4_DSP_CHUNK / 8) {
        for (int32_t p = 0; p < pixels; p += 2) {
            const int32_t q = EDGEC_MIN(p + 1, pixels - 1);
            conv_s4_dsp_odd_column(d, input, p, k, column_a);
            conv_s4_dsp_odd_column(d, input, q, k, column_b);
            edgec_s4_dsp_widen2(column_a + 1, column_b + 1, blocks, d->input_offset, appended);
            edgec_s4_dsp_widen2(column_a, column_b, blocks, d->input_offset, prepended);
            int8_t *out_a = output + p * d->output_c;
            int8_t *out_b = output + q * d->output_c;
            conv_s4_dsp_odd_rows2(&rows, &end, 0, appended, blocks, d->output_c, round_base, column_a + 1, column_b + 1,
                                  out_a, out_b);
            conv_s4_dsp_odd_rows2(&rows, &end, 1, prepended, blocks, d->output_c, round_base, column_a + 1,
                                  column_b + 1, out_a, out_b);
        }
        return;
    }
#endif
    for (int32_t p = 0; p < pixels; p++) {
        conv_s4_dsp_odd_column(d, input, p, k, column_a);
        edgec_s4_dsp_widen(column_a + 1, blocks, d->input_offset, appended);
        edgec_s4_dsp_widen(column_a, blocks, d->input_offset, prepended);
        int8_t *out = output + p * d->output_c;
        conv_s4_dsp_odd_rows(&rows, &end, 0, appended, blocks, d->output_c, short_requant, round_base, out);
        conv_s4_dsp_odd_rows(&rows, &end, 1, prepended, blocks, d->output_c, short_requant, round_base, out);
    }
}

/*
 * The DSP path: per output pixel and group, the column gathered into scratch (int8, K bytes), its
 * whole blocks of 8 widened, then edgec_s4_dsp_rows over the group's output channels. An ungrouped
 * layer whose K is a multiple of 8 up to 256 (edgec_s4_dsp_rows2_fit) takes two pixels at a time,
 * each weight word unpacked once for both. For an even K of at least 8, or an odd K of an
 * ungrouped layer (conv_s4_dsp_odd; else EDGEC_ARG_ERROR); K beyond
 * EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT runs the portable kernel. Scratch: the widened blocks of
 * two columns, then the two gathered columns.
 */
edgec_status edgec_conv_s4_dsp(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output, int16_t *scratch)
{
    if (!conv_s4_valid(desc, input, output) || !scratch || !edgec_word_aligned(scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t k = conv_s4_row_length(desc);
    if (k % 2 != 0 ? desc->groups != 1 : k < 8) {
        return EDGEC_ARG_ERROR;
    }
    if (k > EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT) {
        return edgec_conv_s4(desc, input, output);
    }
    if (k % 2 != 0) {
        conv_s4_dsp_odd(desc, input, output, scratch);
        return EDGEC_OK;
    }
    const edgec_conv_s4_desc d = *desc;
    const int32_t cout_g = d.output_c / d.groups;
    const int short_requant = edgec_dsp_requant_all_wide(d.multiplier, d.shift, d.output_c);
    const int32_t round_base = edgec_dsp_round_base(d.output_offset);
    int16_t *widened = scratch;
    int8_t *column_a = (int8_t *)(scratch + 2 * (k / 8 * 8));
    int8_t *column_b = column_a + k;
    edgec_s4_rows rows = { d.filter, k,
                           NULL,     d.input_offset,
                           d.bias,   d.multiplier,
                           d.shift,  edgec_output_stage_make(d.output_offset, d.act_min, d.act_max) };
    const int two = d.groups == 1 && edgec_s4_dsp_rows2_fit(&rows, d.output_c, short_requant);
    const int32_t pixels = d.batches * d.output_h * d.output_w;
    for (int32_t p = 0; p < pixels;) {
        int8_t *out = output + p * d.output_c;
        if (two && p + 1 < pixels) {
            const int8_t *xa = conv_s4_pixel_column(&d, input, p, 0, column_a);
            const int8_t *xb = conv_s4_pixel_column(&d, input, p + 1, 0, column_b);
            edgec_s4_dsp_rows2(&rows, xa, xb, widened, d.output_c, round_base, out, out + d.output_c);
            p += 2;
            continue;
        }
        for (int32_t g = 0; g < d.groups; g++) {
            rows.x = conv_s4_pixel_column(&d, input, p, g, column_a);
            rows.filter = d.filter + g * cout_g * (k / 2);
            rows.bias = d.bias ? d.bias + g * cout_g : NULL;
            rows.multiplier = d.multiplier + g * cout_g;
            rows.shift = d.shift + g * cout_g;
            edgec_s4_dsp_widen(rows.x, k / 8, d.input_offset, widened);
            edgec_s4_dsp_rows(&rows, widened, cout_g, short_requant, round_base, out + g * cout_g);
        }
        p++;
    }
    return EDGEC_OK;
}
/*
 * The filter unpacked once per call into scratch as edgec_conv_s8_dsp_wide's (int16 taps), then
 * that kernel runs the layer: its arithmetic is edgec_conv_s4's (the int4 values are int8 values).
 * `bias`: its channel table. Scratch: the unpacked filter, then the int8 kernel's.
 */
/* The DSP unpacked kernels' common part: the arguments checked, the filter unpacked into scratch
 * as int16 taps (`wide`) or int8 ones, K padded to a multiple of 4 (inlined: each caller's
 * unpacking specialised for its tap width). */
static inline __attribute__((always_inline)) edgec_status
conv_s4_dsp_unpack(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch, int wide)
{
    if (!conv_s4_valid(desc, input, output) || !scratch || !edgec_word_aligned(scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t k = conv_s4_row_length(desc);
    const int32_t k4 = (k + 3) / 4 * 4;
    if (!conv_s4_unpacked_fits(desc, k4, 2)) {
        return EDGEC_ARG_ERROR;
    }
    if (k % 2 == 0) {
        conv_s4_dsp_unpack_even(desc->filter, desc->output_c, k, k4, wide, scratch);
    } else {
        conv_s4_unpack_rows(desc->filter, desc->output_c, k, k, k, k4, 2, 4, wide, scratch);
    }
    return EDGEC_OK;
}

edgec_status edgec_conv_s4_dsp_unpacked(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output,
                                        int8_t *scratch)
{
    const edgec_status status = conv_s4_dsp_unpack(desc, input, output, scratch, 1);
    if (status != EDGEC_OK) {
        return status;
    }
    const edgec_conv_s4_desc d = *desc;
    const int32_t k = conv_s4_row_length(desc);
    const int16_t *wide = (const int16_t *)(const void *)scratch;
    const edgec_conv_dsp_wide_desc unpacked = { d.batches,  d.input_h,      d.input_w,       d.input_c,    d.output_h,
                                                d.output_w, d.output_c,     d.kernel_h,      d.kernel_w,   d.stride_h,
                                                d.stride_w, d.pad_top,      d.pad_left,      d.dilation_h, d.dilation_w,
                                                1,          d.input_offset, d.output_offset, d.act_min,    d.act_max,
                                                wide,       d.bias,         d.multiplier,    d.shift };
    return edgec_conv_s8_dsp_wide(&unpacked, input, output,
                                  scratch + EDGEC_CONV_S4_DSP_UNPACKED_FILTER_BYTES(k, d.output_c));
}

/*
 * edgec_conv_s4_dsp_unpacked with int8 taps: the filter unpacked once per call into scratch as
 * edgec_conv_s8_dsp's (half the bytes of the int16 taps: for a filter too large unpacked to
 * int16), then that kernel runs the layer. `bias`: its folded bias (zero-padded to whole row
 * pairs). Scratch: the unpacked filter, then the int8 kernel's.
 */
edgec_status edgec_conv_s4_dsp_unpacked_narrow(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output,
                                               int8_t *scratch)
{
    const edgec_status status = conv_s4_dsp_unpack(desc, input, output, scratch, 0);
    if (status != EDGEC_OK) {
        return status;
    }
    const edgec_conv_s4_desc d = *desc;
    const int32_t k = conv_s4_row_length(desc);
    const edgec_conv_desc unpacked = { d.batches,  d.input_h,      d.input_w,       d.input_c,    d.output_h,
                                       d.output_w, d.output_c,     d.kernel_h,      d.kernel_w,   d.stride_h,
                                       d.stride_w, d.pad_top,      d.pad_left,      d.dilation_h, d.dilation_w,
                                       1,          d.input_offset, d.output_offset, d.act_min,    d.act_max,
                                       scratch,    d.bias,         d.multiplier,    d.shift };
    return edgec_conv_s8_dsp(&unpacked, input, output, scratch + EDGEC_CONV_S4_DSP_NARROW_FILTER_BYTES(k, d.output_c));
}
#endif /* __ARM_FEATURE_DSP */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/*
 * `rows` runs of n bytes, src_step apart in the input, to dst_step apart: a run of up to 16 bytes
 * is one predicated load and store (VCTP), longer ones 16 bytes a vector. No byte past a run is
 * read or written.
 */
static inline void conv_s4_mve_runs(int8_t *dst, int32_t dst_step, const int8_t *src, int32_t src_step, int32_t rows,
                                    int32_t n)
{
    if (n <= 16) {
        const mve_pred16_t p = vctp8q((uint32_t)n);
        for (int32_t r = 0; r < rows; r++) {
            vstrbq_p_s8(dst + r * dst_step, vldrbq_z_s8(src + r * src_step, p), p);
        }
        return;
    }
    for (int32_t r = 0; r < rows; r++) {
        for (int32_t i = 0; i < n; i += 16) {
            const mve_pred16_t p = vctp8q((uint32_t)(n - i));
            vstrbq_p_s8(dst + r * dst_step + i, vldrbq_z_s8(src + r * src_step + i, p), p);
        }
    }
}

/*
 * conv_s4_column of an ungrouped layer with dilation_w 1, where each kernel row's taps inside the
 * input are one run of the input row, into a column of EDGEC_S4_MVE_COLUMN_BYTES(K) bytes: when
 * the window crosses a border, the whole column is first filled with the input zero point (16
 * bytes a store, whatever the padding's shape; the bytes past K meet only zero weights), then the
 * rows inside have their runs copied (conv_s4_mve_runs). A 1x1 window inside the input is the
 * input pixel itself (no copy).
 */
static const int8_t *conv_s4_mve_column(const edgec_conv_s4_desc *d, const int8_t *input, int32_t p, int8_t *column)
{
    const int32_t rest = p / d->output_w; /* n * output_h + oy */
    const int32_t n = rest / d->output_h;
    const int32_t ox = p - rest * d->output_w;
    const int32_t oy = rest - n * d->output_h;
    const edgec_tap_range ty = edgec_conv_taps(oy, d->stride_h, d->pad_top, d->dilation_h, d->kernel_h, d->input_h);
    const edgec_tap_range tx = edgec_conv_taps(ox, d->stride_w, d->pad_left, 1, d->kernel_w, d->input_w);
    const int32_t c = d->input_c;
    const int32_t row = d->kernel_w * c;
    const int32_t rows = ty.last - ty.first;
    const int32_t width = (tx.last - tx.first) * c;
    if (rows < d->kernel_h || width < row) {
        const int32_t k = d->kernel_h * row;
        const int8x16_t pad = vdupq_n_s8((int8_t)(-d->input_offset));
        for (int32_t i = 0; i < k; i += 16) {
            vstrbq_s8(column + i, pad);
        }
        if (rows == 0 || width == 0) { /* no tap inside (the range may lie past the kernel) */
            return column;
        }
    }
    const int8_t *image = input + (int64_t)n * d->input_h * d->input_w * c;
    /* the first row's first tap inside */
    const int8_t *first = image + ((ty.base + ty.first * d->dilation_h) * d->input_w + tx.base + tx.first) * c;
    if (d->kernel_h == 1 && d->kernel_w == 1) {
        return first;
    }
    conv_s4_mve_runs(column + ty.first * row + tx.first * c, row, first, d->dilation_h * d->input_w * c, rows, width);
    return column;
}

/* Pixels p and p + 1's columns of an ungrouped layer (conv_s4_mve_column's, or conv_s4_column's
 * for dilation_w > 1), gathered into column_a and the column after it (EDGEC_S4_MVE_COLUMN_BYTES(K)
 * bytes each), then interleaved for edgec_s4_mve_rows2. Out of line: the 1x1 layers' pair loop
 * keeps its registers. */
static EDGEC_NOINLINE void conv_s4_mve_columns2(const edgec_conv_s4_desc *d, const int8_t *input, int32_t p,
                                                int8_t *column_a, int8_t *deinterleaved)
{
    const int32_t k = conv_s4_row_length(d);
    int8_t *column_b = column_a + EDGEC_S4_MVE_COLUMN_BYTES(k);
    const int8_t *xa;
    const int8_t *xb;
    if (d->dilation_w == 1) {
        xa = conv_s4_mve_column(d, input, p, column_a);
        xb = conv_s4_mve_column(d, input, p + 1, column_b);
    } else {
        xa = conv_s4_pixel_column(d, input, p, 0, column_a);
        xb = conv_s4_pixel_column(d, input, p + 1, 0, column_b);
    }
    edgec_s4_mve_deinterleave2(xa, xb, k, xa == column_a && xb == column_b, deinterleaved);
}

/* Pixel p's column of an odd-K (ungrouped) layer at column + 1, between a 0 at column[0] (set once
 * by the caller) and one at column[K + 1] (set here: a gather's fill may reach it). */
static void conv_s4_mve_odd_column(const edgec_conv_s4_desc *d, const int8_t *input, int32_t p, int32_t k,
                                   int8_t *column)
{
    const int8_t *x = d->dilation_w == 1 ? conv_s4_mve_column(d, input, p, column + 1)
                                         : conv_s4_pixel_column(d, input, p, 0, column + 1);
    if (x != column + 1) { /* a 1x1 window inside the input: the pixel itself */
        memcpy(column + 1, x, (size_t)k);
    }
    column[k + 1] = 0;
}

/* One parity's rows of an odd-K layer (edgec_s4_mve_rows2_set's alternate form), out of line: one
 * copy for both parities. */
static EDGEC_NOINLINE void conv_s4_mve_odd_rows(const edgec_s4_rows *a, int32_t k, const int8_t *columns, int32_t rows,
                                                int8_t *out_a, int8_t *out_b)
{
    const edgec_s4_mve_row_set set = { (k + 1) / 2, k, 1 };
    edgec_s4_mve_rows2_set(a, set, columns, rows, 0, out_a, out_b);
}

/*
 * The Helium path for an odd K (ungrouped). Row r's first weight is nibble r * K of the packed
 * stream: a low nibble for even r, a high one for odd r. Each row is read from the byte holding
 * its first nibble, (K + 1) / 2 bytes, so it has K + 1 weights: an even row's last is the next
 * row's first, an odd row's first the previous row's last. That extra weight meets a raw 0: the
 * even rows run against the column with a 0 appended, the odd rows against it with a 0 prepended,
 * so each sum is the row's own K products, and the folded bias (over the row's own K weights) is
 * unchanged. Either parity's rows are K bytes apart (edgec_s4_mve_rows2_set), their outputs every
 * other one. Two pixels a pass, a last odd one paired with itself (its bytes stored twice).
 * Scratch: the two pixels' appended columns deinterleaved, their prepended ones, then the two
 * gathered columns (0, K inputs, 0), each EDGEC_S4_MVE_COLUMN_BYTES(K + 1) + 16 bytes (whole
 * blocks are read from byte 1): 6 * EDGEC_S4_MVE_COLUMN_BYTES(K + 1) + 32 bytes.
 */
static void conv_s4_mve_odd(const edgec_conv_s4_desc *d, const int8_t *input, int8_t *output, int8_t *scratch)
{
    const int32_t k = conv_s4_row_length(d);
    const int32_t padded = EDGEC_S4_MVE_COLUMN_BYTES(k + 1);
    int8_t *appended = scratch;
    int8_t *prepended = scratch + 2 * padded;
    int8_t *column_a = scratch + 4 * padded;
    int8_t *column_b = column_a + padded + 16;
    memset(column_a, 0, (size_t)(2 * (padded + 16))); /* the leading 0s; defined bytes past K + 1 */
    const edgec_output_stage stage = edgec_output_stage_make(d->output_offset, d->act_min, d->act_max);
    const edgec_s4_rows even = { d->filter, k + 1, NULL, 0, d->bias, d->multiplier, d->shift, stage };
    const edgec_s4_rows odd = { d->filter + (k - 1) / 2, k + 1,        NULL, 0, d->bias + 1,
                                d->multiplier + 1,       d->shift + 1, stage };
    const int32_t pixels = d->batches * d->output_h * d->output_w;
    for (int32_t p = 0; p < pixels; p += 2) {
        const int32_t q = EDGEC_MIN(p + 1, pixels - 1);
        conv_s4_mve_odd_column(d, input, p, k, column_a);
        conv_s4_mve_odd_column(d, input, q, k, column_b);
        edgec_s4_mve_deinterleave2(column_a + 1, column_b + 1, k + 1, 1, appended);
        edgec_s4_mve_deinterleave2(column_a, column_b, k + 1, 1, prepended);
        int8_t *out_a = output + p * d->output_c;
        int8_t *out_b = output + q * d->output_c;
        conv_s4_mve_odd_rows(&even, k, appended, (d->output_c + 1) / 2, out_a, out_b);
        if (d->output_c > 1) {
            conv_s4_mve_odd_rows(&odd, k, prepended, d->output_c / 2, out_a + 1, out_b + 1);
        }
    }
}

/*
 * The Helium path: `bias` (required) holds the input offset folded in over the whole window
 * (edgec.ops.int4.mve_folded_bias; a tap outside the input reads the input zero point, so it adds
 * nothing); per output pixel and group, the column gathered into scratch, deinterleaved after it,
 * then edgec_s4_mve_rows over the group's output channels; an ungrouped layer two pixels at a time
 * (edgec_s4_mve_rows2). Scratch: two pixels' deinterleaved columns, then their gathered columns,
 * each EDGEC_S4_MVE_COLUMN_BYTES(K). An odd K of an ungrouped layer: conv_s4_mve_odd. For K up to
 * EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT (else, or an odd K of a grouped layer, EDGEC_ARG_ERROR).
 */
edgec_status edgec_conv_s4_mve(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch)
{
    if (!conv_s4_valid(desc, input, output) || !scratch || !desc->bias) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t k = conv_s4_row_length(desc);
    if ((k % 2 != 0 && desc->groups != 1) || k > EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT) {
        return EDGEC_ARG_ERROR;
    }
    if (k % 2 != 0) {
        conv_s4_mve_odd(desc, input, output, scratch);
        return EDGEC_OK;
    }
    const edgec_conv_s4_desc d = *desc;
    const int32_t cout_g = d.output_c / d.groups;
    const int32_t padded_k = EDGEC_S4_MVE_COLUMN_BYTES(k);
    int8_t *deinterleaved = scratch; /* one column's blocks, or two columns' (interleaved) */
    int8_t *column_a = scratch + 2 * padded_k;
    int8_t *column_b = column_a + padded_k;
    if (padded_k > k) { /* defined bytes for the whole last block */
        memset(column_a + k, 0, (size_t)(padded_k - k));
        memset(column_b + k, 0, (size_t)(padded_k - k));
    }
    /* a 1x1 stride-1 unpadded layer's column is the input pixel itself */
    const int pointwise = d.kernel_h == 1 && d.kernel_w == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_top == 0 &&
                          d.pad_left == 0 && d.output_h == d.input_h && d.output_w == d.input_w && d.groups == 1;
    edgec_s4_rows rows = { d.filter, k,
                           NULL,     0,
                           d.bias,   d.multiplier,
                           d.shift,  edgec_output_stage_make(d.output_offset, d.act_min, d.act_max) };
    const int right = edgec_s4_mve_right_shifts(d.shift, d.output_c);
    const int32_t pixels = d.batches * d.output_h * d.output_w;
    for (int32_t p = 0; p < pixels;) {
        int8_t *out = output + p * d.output_c;
        if (d.groups == 1 && p + 1 < pixels) { /* two pixels: each weight block unpacked once for both */
            if (pointwise) {
                edgec_s4_mve_deinterleave2(input + p * k, input + (p + 1) * k, k, 0, deinterleaved);
            } else {
                conv_s4_mve_columns2(&d, input, p, column_a, deinterleaved);
            }
            edgec_s4_mve_rows2(&rows, deinterleaved, d.output_c, right, out, out + d.output_c);
            p += 2;
            continue;
        }
        for (int32_t g = 0; g < d.groups; g++) {
            const int8_t *x = conv_s4_pixel_column(&d, input, p, g, column_a);
            rows.filter = d.filter + g * cout_g * (k / 2);
            rows.bias = d.bias + g * cout_g;
            rows.multiplier = d.multiplier + g * cout_g;
            rows.shift = d.shift + g * cout_g;
            edgec_s4_mve_deinterleave(x, k, deinterleaved);
            edgec_s4_mve_rows(&rows, deinterleaved, cout_g, out + g * cout_g);
        }
        p++;
    }
    return EDGEC_OK;
}
/*
 * conv_s4_unpack_rows for an even K without window padding, into edgec_conv_s8_mve's layout
 * (rows in fours, groups of 16 taps, row_len taps a row): a group is 8 packed bytes, loaded into
 * 16-bit lanes (a row's last group predicated: 0 past its bytes), each lane's low nibble
 * sign-extended to the even bytes and its high one to the odd (VMOVNB, VMOVNT), one store. The
 * rows padding the last four are zeroed first.
 */
static void conv_s4_mve_unpack_even(const int8_t *filter, int32_t rows, int32_t k, int32_t row_len, int8_t *out)
{
    if (rows % 4 != 0) {
        const int32_t last = rows / 4 * 4;
        memset(out + last * row_len, 0, (size_t)(4 * row_len));
    }
    for (int32_t o = 0; o < rows; o++) {
        const uint8_t *src = (const uint8_t *)filter + o * (k / 2);
        int8_t *at = out + o / 4 * 4 * row_len + o % 4 * 16;
        for (int32_t t = 0; t < row_len; t += 16, at += 64) {
            const mve_pred16_t bytes = vctp16q((uint32_t)EDGEC_MAX(k - t, 0) / 2u);
            const int16x8_t v = vreinterpretq_s16_u16(vldrbq_z_u16(src + t / 2, bytes));
            const int8x16_t low = vmovnbq_s16(vdupq_n_s8(0), vshrq_n_s16(vshlq_n_s16(v, 12), 12));
            vstrbq_s8(at, vmovntq_s16(low, vshrq_n_s16(vshlq_n_s16(v, 8), 12)));
        }
    }
}

/*
 * The filter unpacked once per call into scratch as edgec_conv_s8_mve's (its rows padded per
 * window row to 16 taps where that kernel's mve_padded_runs holds), then edgec_conv_s8_mve_with
 * runs the layer with the routines named (edgec.ops.conv.mve_routines of the layer): its
 * arithmetic is edgec_conv_s4's. `bias`: its folded bias. Scratch: the unpacked filter, then the
 * int8 kernel's.
 */
edgec_status edgec_conv_s4_mve_unpacked(const edgec_conv_s4_desc *desc, const edgec_conv_mve_routine *blocks,
                                        const edgec_conv_mve_routine *direct, const int8_t *input, int8_t *output,
                                        int8_t *scratch)
{
    if (!conv_s4_valid(desc, input, output) || !scratch || !edgec_word_aligned(scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t k = conv_s4_row_length(desc);
    const int32_t run = desc->kernel_w * desc->input_c;
    const int padded = desc->kernel_h == 3 && run >= 8 && run < 16 && desc->output_c % 4 == 0;
    const int32_t taps = padded ? 48 : k;
    if (!conv_s4_unpacked_fits(desc, (taps + 15) / 16 * 16, 4)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_s4_desc d = *desc;
    if (k % 2 == 0 && !padded) {
        conv_s4_mve_unpack_even(d.filter, d.output_c, k, (taps + 15) / 16 * 16, scratch);
    } else {
        conv_s4_unpack_rows(d.filter, d.output_c, k, padded ? run : k, padded ? 16 : k, (taps + 15) / 16 * 16, 4, 16, 0,
                            scratch);
    }
    const edgec_conv_desc unpacked = { d.batches,  d.input_h,      d.input_w,       d.input_c,    d.output_h,
                                       d.output_w, d.output_c,     d.kernel_h,      d.kernel_w,   d.stride_h,
                                       d.stride_w, d.pad_top,      d.pad_left,      d.dilation_h, d.dilation_w,
                                       1,          d.input_offset, d.output_offset, d.act_min,    d.act_max,
                                       scratch,    d.bias,         d.multiplier,    d.shift };
    return edgec_conv_s8_mve_with(&unpacked, blocks, direct, input, output,
                                  scratch + EDGEC_CONV_S4_MVE_UNPACKED_FILTER_BYTES(taps, d.output_c));
}
#endif /* __ARM_FEATURE_MVE */
