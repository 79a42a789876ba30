/*
 * edgec_nn.h -- the one public header of edgec's int8 neural-network kernels.
 *
 * Conventions (the same as Arm CMSIS-NN's s8 kernels, and bit-exact with edgec.sim; the exact
 * arithmetic of every kernel is in docs/numerics.md):
 *  - Activations are int8, NHWC, per-tensor asymmetric: real = scale * (q - zero_point).
 *  - "input_offset" is the NEGATED input zero point; "output_offset" is the output zero point.
 *  - Weights are int8 symmetric (zero point 0). Conv filters are OHWI
 *    [C_out][KH][KW][C_in/groups]; depthwise filters are [KH][KW][C_in*ch_mult] with output
 *    channel ic*ch_mult + m; fully connected filters are [C_out][C_in].
 *  - Bias is int32 (may be NULL for "no bias").
 *  - Accumulators are 32 bits and wrap modulo 2^32 (summed in uint32_t, or by SMLAD/VMLADAVA),
 *    exactly as the golden kernels' int32 wrap: no input or bias is undefined behaviour. A wrapped
 *    sum is not the layer's true value, so edgec refuses at compile time any conv, depthwise or
 *    fully connected layer where |bias| + sum |w| * max|x - zero_point| (at most K * 32640 for K
 *    taps per output) can exceed 2^31 - 1: in generated models the wrap never happens.
 *  - Zero points are int8 (input_offset in [-127, 128], output_offset in [-128, 127]) and shifts
 *    in [-31, 31]; kernels return EDGEC_ARG_ERROR otherwise, and for dimensions whose element
 *    count or window index arithmetic would not fit int32.
 *  - Requantization is arm_nn_requantize in double-rounding mode: (multiplier, shift) come from
 *    TFLite's QuantizeMultiplier; positive shift means left shift.
 *  - Fused activations are only the clamp bounds act_min..act_max.
 *  - Padding: pad_top/pad_left are explicit; bottom/right padding is implied by the output size
 *    (taps that fall outside the input contribute nothing), so asymmetric padding is free.
 *  - No kernel allocates memory. A kernel that needs scratch says so in its comment; the
 *    portable C paths need none. Input and output buffers must not overlap unless a kernel's
 *    comment says in-place is allowed.
 */
#ifndef EDGEC_NN_H
#define EDGEC_NN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    EDGEC_OK = 0,
    EDGEC_ARG_ERROR = -1
} edgec_status;

/* Tensor dimensions in NHWC order. */
typedef struct {
    int32_t n;
    int32_t h;
    int32_t w;
    int32_t c;
} edgec_dims;

/* Per-output-channel requantization: arrays of C_out entries (in flash). */
typedef struct {
    const int32_t *multiplier;
    const int32_t *shift;
} edgec_per_channel_quant;

typedef struct {
    int32_t input_offset;  /* -input_zero_point, in [-127, 128] */
    int32_t output_offset; /* output_zero_point, in [-128, 127] */
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t groups;        /* conv: C_in and C_out are divisible by groups */
    int32_t ch_mult;       /* depthwise: C_out = C_in * ch_mult */
    int32_t act_min;
    int32_t act_max;
} edgec_conv_params;

typedef struct {
    int32_t input_offset;  /* -input_zero_point */
    int32_t output_offset; /* output_zero_point */
    int32_t per_channel;   /* 0: quant arrays hold one entry for all outputs */
    int32_t act_min;
    int32_t act_max;
} edgec_fc_params;

typedef struct {
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t filter_h;
    int32_t filter_w;
    int32_t act_min;
    int32_t act_max;
} edgec_pool_params;

typedef struct {
    int32_t input1_offset;     /* -zero_point of input 1 */
    int32_t input1_multiplier;
    int32_t input1_shift;
    int32_t input2_offset;     /* -zero_point of input 2 */
    int32_t input2_multiplier;
    int32_t input2_shift;
    int32_t left_shift;        /* 20 */
    int32_t output_offset;
    int32_t output_multiplier;
    int32_t output_shift;
    int32_t act_min;
    int32_t act_max;
} edgec_add_params;

typedef struct {
    int32_t input_multiplier; /* from QuantizeMultiplierGreaterThanOne(beta*s_in*2^(31-5)) */
    int32_t input_left_shift;
    int32_t diff_min;         /* differences below this give exp = 0 */
} edgec_softmax_params;

/*
 * Generic 2-D convolution, any kernel size, stride, dilation, padding and groups.
 *   acc = bias[c] + sum w[c,ky,kx,ic] * (x + input_offset); y = clamp(requant(acc) + output_offset)
 * input_dims: [N,H,W,C_in]; filter_dims: [C_out, KH, KW, C_in/groups] (n=C_out, h=KH, w=KW,
 * c=C_in/groups); output_dims: [N,H_out,W_out,C_out]. Scratch: none (may be NULL).
 * Any output size is accepted: taps outside the input contribute 0 (implied bottom/right pad).
 * The accumulator wraps modulo 2^32 (see the conventions above).
 * In place: the output may overlap the input when it starts d >= 0 bytes before it and every
 * output pixel q (raster order, batch first) ends at or below the first byte of its own receptive
 * field: (q+1)*C_out <= d + first(q)*C_in, first(q) being the pixel index of the field's top-left
 * tap clipped to the image. Pixels are computed in order, each field read before anything past
 * its pixel is written, so only bytes no later pixel reads are overwritten. (3x3, pad 1, stride 1:
 * d = (W+2)*C suffices.) The _dsp/_mve paths below copy each block of fields into scratch before
 * writing its pixels, so for them q*C_out <= d + first(q)*C_in is enough (1x1, C_out <= C_in: d=0).
 * EDGEC_ARG_ERROR: NULL pointer (bias excepted), non-positive dims, stride/dilation/groups < 1,
 * negative padding, groups not dividing C_in/C_out or not matching filter_dims, act bounds
 * outside int8 or crossed, zero points outside int8, a shift outside [-31, 31], or a geometry
 * whose index arithmetic ((H_out-1)*stride + (KH-1)*dilation + 1, H + pad + stride + dilation,
 * likewise for W) or element counts exceed int32.
 */
edgec_status edgec_conv_s8(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                           const edgec_dims *input_dims, const int8_t *input,
                           const edgec_dims *filter_dims, const int8_t *filter,
                           const int32_t *bias, const edgec_dims *output_dims, int8_t *output,
                           int8_t *scratch);

/*
 * edgec_conv_s8 on Arm cores with the DSP extension (Cortex-M4/M7/M33/M55) or Helium (Cortex-M55),
 * from constants edgec lays out at compile time (edgec.ops.kernel_layout). The arithmetic and the
 * other arguments are edgec_conv_s8's, except:
 *  - groups must be 1 (grouped convolutions use edgec_conv_s8), -input_offset must be int8 and
 *    K = KH*KW*C_in at most EDGEC_CONV_S8_PACKED_MAX_K;
 *  - packed_filter: each output channel's K = KH*KW*C_in OHWI weights, zero-padded to a multiple
 *    of G bytes, in blocks of R channels (C_out zero-padded to a multiple of R) whose rows
 *    interleave every G bytes: block, then group of G taps, then channel. DSP: R = 2, G = 4;
 *    MVE: R = 4, G = 16. Word-aligned;
 *  - folded_bias (required): bias[c] + input_offset * sum_k w[c][k], wrapped to int32, so the
 *    inner loops need no input offset, then zeros up to a multiple of R entries. Word-aligned;
 *  - scratch (required, word-aligned): EDGEC_CONV_S8_DSP_SCRATCH_BYTES(K, C_in) or
 *    EDGEC_CONV_S8_MVE_SCRATCH_BYTES(K) bytes, for im2col.
 * Declared only where the build's -mcpu has the extension, so calling them elsewhere does not
 * compile.
 */
#define EDGEC_CONV_S8_PACKED_MAX_K (1 << 26)
#if defined(__ARM_FEATURE_DSP)
#define EDGEC_CONV_S8_DSP_SCRATCH_BYTES(k, c_in) (((c_in) % 4 == 0 ? 16 : 20) * (((k) + 3) / 4))
edgec_status edgec_conv_s8_dsp(const edgec_conv_params *params,
                               const edgec_per_channel_quant *quant,
                               const edgec_dims *input_dims, const int8_t *input,
                               const edgec_dims *filter_dims, const int8_t *packed_filter,
                               const int32_t *folded_bias, const edgec_dims *output_dims,
                               int8_t *output, int8_t *scratch);
/*
 * edgec_conv_s8_dsp with constants laid out for speed (edgec build --opt speed), the other
 * arguments as there:
 *  - wide_filter: packed_filter with each group of 4 taps (w0, w1, w2, w3) of a channel as the
 *    int16 values (w0, w2, w1, w3) -- the pairs SXTB16 would make -- so the inner loop loads
 *    instead of widening: twice the filter's flash for a fifth fewer instructions per MAC;
 *  - channel_table (instead of folded_bias): per channel pair (c, c + 1), 8 words: folded bias c,
 *    c + 1, multiplier c, c + 1, round_high c, c + 1, r - 1 for c, c + 1, where a channel's
 *    r = -shift and round_high = (1 + 2 * output_offset) * 2^(r-2) (edgec_dsp_requant; zeros for
 *    a channel that does not admit the short requantization), the last pair zero-padded.
 * Both word-aligned.
 */
edgec_status edgec_conv_s8_dsp_wide(const edgec_conv_params *params,
                                    const edgec_per_channel_quant *quant,
                                    const edgec_dims *input_dims, const int8_t *input,
                                    const edgec_dims *filter_dims, const int16_t *wide_filter,
                                    const int32_t *channel_table, const edgec_dims *output_dims,
                                    int8_t *output, int8_t *scratch);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define EDGEC_CONV_S8_MVE_SCRATCH_BYTES(k) (32 * (((k) + 15) / 16))
edgec_status edgec_conv_s8_mve(const edgec_conv_params *params,
                               const edgec_per_channel_quant *quant,
                               const edgec_dims *input_dims, const int8_t *input,
                               const edgec_dims *filter_dims, const int8_t *packed_filter,
                               const int32_t *folded_bias, const edgec_dims *output_dims,
                               int8_t *output, int8_t *scratch);
#endif

/*
 * 1x1 convolution fast path of the portable build (on Arm cores with the DSP extension or
 * Helium, edgec_conv_s8_dsp/_mve are faster for 1x1 layers too, and edgec uses them).
 * Constraints: KH = KW = 1, groups = 1, no padding, dilation 1; any stride. Same arithmetic and arguments as edgec_conv_s8. Scratch: none. Not in place (see
 * the next function).
 * EDGEC_ARG_ERROR also when these constraints do not hold or an output pixel would read past
 * the input ((H_out-1)*stride_h >= H or (W_out-1)*stride_w >= W).
 */
edgec_status edgec_conv_1x1_s8(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                               const edgec_dims *input_dims, const int8_t *input,
                               const edgec_dims *filter_dims, const int8_t *filter,
                               const int32_t *bias, const edgec_dims *output_dims, int8_t *output,
                               int8_t *scratch);

/*
 * edgec_conv_1x1_s8 with the output allowed to overlap the input. Scratch (required): C_out
 * bytes, apart from both. Output pixel q (NHWC order, C_out bytes) is computed from input pixel
 * r(q) into scratch and stored after that pixel is read in full; r increases with q. So, with the
 * input starting d bytes after the output (d may be negative), the result is exact when the two
 * do not overlap or when d >= q*C_out - r(q)*C_in for every output pixel q >= 1: e.g. d = 0
 * (head-aligned) when C_out <= C_in, or d = P*(C_out - C_in) (tail-aligned: they end together)
 * at stride 1 with P pixels. edgec's planner (edgec.ops.conv.Conv2d.in_place) picks such a d.
 */
edgec_status edgec_conv_1x1_s8_in_place(const edgec_conv_params *params,
                                        const edgec_per_channel_quant *quant,
                                        const edgec_dims *input_dims, const int8_t *input,
                                        const edgec_dims *filter_dims, const int8_t *filter,
                                        const int32_t *bias, const edgec_dims *output_dims,
                                        int8_t *output, int8_t *scratch);

/*
 * Depthwise convolution with channel multiplier params->ch_mult (groups is ignored).
 * filter_dims: n=1, h=KH, w=KW, c=C_in*ch_mult; output channel ic*ch_mult + m.
 * Any stride, dilation and padding. Scratch: none. Not in place (see the next function).
 * The accumulator wraps modulo 2^32. EDGEC_ARG_ERROR as edgec_conv_s8, or
 * when ch_mult < 1, filter_dims->n != 1 or C_out != C_in*ch_mult.
 */
edgec_status edgec_depthwise_conv_s8(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                     const edgec_dims *input_dims, const int8_t *input,
                                     const edgec_dims *filter_dims, const int8_t *filter,
                                     const int32_t *bias, const edgec_dims *output_dims, int8_t *output,
                                     int8_t *scratch);

/*
 * edgec_depthwise_conv_s8 with ch_mult 1 and the output allowed to overlap the input: exact
 * when the two do not overlap or start a multiple of C bytes apart (either way round), e.g.
 * head-aligned or tail-aligned (ending together). Element (p, c) of either tensor sits at
 * p*C + c, so output channel c can only land on input channel c: the channels are computed
 * EDGEC_DEPTHWISE_IN_PLACE_CHANNELS at a time for all N*H_out*W_out pixels into scratch
 * (required, apart from both: EDGEC_DEPTHWISE_IN_PLACE_SCRATCH_BYTES(N*H_out*W_out, C) bytes)
 * before they are stored. EDGEC_ARG_ERROR as edgec_depthwise_conv_s8, or when ch_mult != 1 or
 * scratch is NULL.
 */
#define EDGEC_DEPTHWISE_IN_PLACE_CHANNELS 4
#define EDGEC_DEPTHWISE_IN_PLACE_SCRATCH_BYTES(pixels, c) \
    ((pixels) * ((c) < EDGEC_DEPTHWISE_IN_PLACE_CHANNELS ? (c) : EDGEC_DEPTHWISE_IN_PLACE_CHANNELS))
edgec_status edgec_depthwise_conv_s8_in_place(const edgec_conv_params *params,
                                              const edgec_per_channel_quant *quant,
                                              const edgec_dims *input_dims, const int8_t *input,
                                              const edgec_dims *filter_dims, const int8_t *filter,
                                              const int32_t *bias, const edgec_dims *output_dims,
                                              int8_t *output, int8_t *scratch);

/*
 * edgec_depthwise_conv_s8 for ch_mult 1 from constants edgec lays out at compile time
 * (edgec.ops.depthwise.packed_depthwise_filter): 4 channels at a time over a cache of the input
 * rows, padded with the zero point, so border pixels cost what inside ones do. Uses the DSP
 * extension or Helium where the build's -mcpu has them, else portable C. The arithmetic and the
 * other arguments are edgec_depthwise_conv_s8's, except:
 *  - packed_filter: per group of 4 channels (C zero-padded to a multiple of 4), its KH*KW taps of
 *    4 bytes each in [KH][KW] order. Word-aligned;
 *  - folded_bias (required): bias[c] + input_offset * the sum of channel c's taps, wrapped to
 *    int32, then zeros up to a multiple of 4 entries. Word-aligned;
 *  - KH <= EDGEC_DEPTHWISE_PACKED_MAX_K;
 *  - scratch (required, word-aligned, apart from input and output):
 *    EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES(KH, EDGEC_DEPTHWISE_PACKED_ROW_PIXELS(W_out, stride_w,
 *    KW, dilation_w)) bytes: KH cached rows of that many pixels.
 * The output may overlap the input when the input starts k*C bytes after it (k may be negative)
 * and storing each output row leaves the first input pixel read after it alone: the kernel
 * stores row oy (4 channels at a time) only after caching every input row it reads, and reads
 * those channels of input row i = oy*stride_h + KH - pad_top next (undilated with stride_h < KH;
 * else i = (oy+1)*stride_h - pad_top), or the next batch's first row when i >= H_in or oy is the
 * last row. So k*C >= (oy+1)*W_out*C - (first pixel of i)*C for every row but the very last
 * (edgec.ops.depthwise.DepthwiseConv2d._unstaged).
 * _in_place: the output may overlap the input as edgec_depthwise_conv_s8_in_place's may; its
 * scratch is those bytes followed by EDGEC_DEPTHWISE_IN_PLACE_SCRATCH_BYTES(N*H_out*W_out, C).
 */
#define EDGEC_DEPTHWISE_PACKED_MAX_K 16
#if defined(__ARM_FEATURE_DSP) && !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
#define EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES 8 /* 4 channels widened to int16 */
#else
#define EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES 4
#endif
#define EDGEC_DEPTHWISE_PACKED_ROW_PIXELS(out_w, stride_w, k_w, dilation_w) \
    (((out_w) - 1) * (stride_w) + ((k_w) - 1) * (dilation_w) + 1)
#define EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES(k_h, row_pixels) \
    ((k_h) * (row_pixels) * EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES)
edgec_status edgec_depthwise_conv_s8_packed(const edgec_conv_params *params,
                                            const edgec_per_channel_quant *quant,
                                            const edgec_dims *input_dims, const int8_t *input,
                                            const edgec_dims *filter_dims, const int8_t *packed_filter,
                                            const int32_t *folded_bias, const edgec_dims *output_dims,
                                            int8_t *output, int8_t *scratch);
edgec_status edgec_depthwise_conv_s8_packed_in_place(const edgec_conv_params *params,
                                                     const edgec_per_channel_quant *quant,
                                                     const edgec_dims *input_dims, const int8_t *input,
                                                     const edgec_dims *filter_dims,
                                                     const int8_t *packed_filter,
                                                     const int32_t *folded_bias,
                                                     const edgec_dims *output_dims, int8_t *output,
                                                     int8_t *scratch);

/*
 * Fully connected: for each of `batches` rows of `input_size` int8 values,
 *   acc[o] = bias[o] + sum_j w[o][j] * (x[j] + input_offset), modulo 2^32.
 * quant arrays hold output_size entries if params->per_channel, else one. Scratch: none.
 * EDGEC_ARG_ERROR: NULL pointer (bias excepted), a size < 1, batches*input_size,
 * batches*output_size or output_size*input_size past int32, zero points outside int8, a shift
 * outside [-31, 31], act bounds outside int8 or crossed.
 */
edgec_status edgec_fully_connected_s8(const edgec_fc_params *params, const edgec_per_channel_quant *quant,
                                      int32_t batches, int32_t input_size, const int8_t *input,
                                      int32_t output_size, const int8_t *filter, const int32_t *bias,
                                      int8_t *output);

/*
 * edgec_fully_connected_s8 on Arm cores with the DSP extension (Cortex-M4/M7/M33/M55) or Helium
 * (Cortex-M55), from constants edgec lays out at compile time (edgec.ops.kernel_layout). The
 * arithmetic and the other arguments are edgec_fully_connected_s8's, except:
 *  - packed_filter: each output's input_size weights, zero-padded to a multiple of G bytes, in
 *    blocks of 4 outputs (output_size zero-padded to a multiple of 4) whose rows interleave every
 *    G bytes: block, then group of G inputs, then output. DSP: G = 4; MVE: G = 16. Word-aligned;
 *  - folded_bias (required): bias[o] + input_offset * sum_j w[o][j], wrapped to int32.
 * Scratch: none. Declared only where the build's -mcpu has the extension.
 */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_fully_connected_s8_dsp(const edgec_fc_params *params,
                                          const edgec_per_channel_quant *quant, int32_t batches,
                                          int32_t input_size, const int8_t *input,
                                          int32_t output_size, const int8_t *packed_filter,
                                          const int32_t *folded_bias, int8_t *output);
/* edgec_fully_connected_s8_dsp with its filter widened like edgec_conv_s8_dsp_wide's (edgec build
 * --opt speed): each group of 4 taps (w0, w1, w2, w3) as the int16 values (w0, w2, w1, w3). */
edgec_status edgec_fully_connected_s8_dsp_wide(const edgec_fc_params *params,
                                               const edgec_per_channel_quant *quant, int32_t batches,
                                               int32_t input_size, const int8_t *input,
                                               int32_t output_size, const int16_t *wide_filter,
                                               const int32_t *folded_bias, int8_t *output);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_fully_connected_s8_mve(const edgec_fc_params *params,
                                          const edgec_per_channel_quant *quant, int32_t batches,
                                          int32_t input_size, const int8_t *input,
                                          int32_t output_size, const int8_t *packed_filter,
                                          const int32_t *folded_bias, int8_t *output);
#endif

/*
 * Average pool over in-bounds taps (padding excluded from the count), rounding half away from
 * zero; input and output share scale and zero point. Scratch: none.
 */
edgec_status edgec_avgpool_s8(const edgec_pool_params *params, const edgec_dims *input_dims,
                              const int8_t *input, const edgec_dims *output_dims, int8_t *output);

/* Max pool over in-bounds taps, then clamp; shares qparams in and out. Scratch: none. */
edgec_status edgec_maxpool_s8(const edgec_pool_params *params, const edgec_dims *input_dims,
                              const int8_t *input, const edgec_dims *output_dims, int8_t *output);

/*
 * Elementwise add of two int8 tensors of `size` elements with independent qparams
 * (TFLite/CMSIS-NN scheme, left_shift 20). output may alias input1 or input2 (in place).
 */
edgec_status edgec_add_s8(const edgec_add_params *params, const int8_t *input1, const int8_t *input2,
                          int8_t *output, int32_t size);

/*
 * edgec_add_s8 on Arm cores with the DSP extension (Cortex-M4/M7/M33/M55) or Helium (Cortex-M55):
 * same arguments and arithmetic, output may alias an input likewise, plus scratch (required,
 * word-aligned): EDGEC_ADD_S8_SCRATCH_BYTES, for the two inputs' rescaled values as lookup tables.
 * Declared only where the build's -mcpu has the extension.
 */
#define EDGEC_ADD_S8_SCRATCH_BYTES (2 * 256 * 4)
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_add_s8_dsp(const edgec_add_params *params, const int8_t *input1,
                              const int8_t *input2, int8_t *output, int32_t size, int8_t *scratch);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_add_s8_mve(const edgec_add_params *params, const int8_t *input1,
                              const int8_t *input2, int8_t *output, int32_t size, int8_t *scratch);
#endif

/* Clamp `size` int8 values to [act_min, act_max] in place (a standalone ReLU/ReLU6/clamp). */
edgec_status edgec_clamp_s8(int8_t *data, int32_t size, int32_t act_min, int32_t act_max);

/*
 * Softmax over the last dimension: num_rows rows of row_size int8 values. Output qparams are
 * fixed: scale 1/256, zero point -128. Arithmetic is gemmlowp fixed point as TFLite Micro's
 * reference softmax and CMSIS-NN's arm_softmax_s8, bit for bit (5 integer bits in, 12 accumulator
 * bits); params come from edgec.ops.softmax.softmax_params. Where those references are undefined
 * (row sum of exps >= 512, possible only with row_size >= 512) every output of the row is -128,
 * the exact rounding of the last step. EDGEC_ARG_ERROR for NULL pointers, num_rows < 0,
 * row_size < 1, input_left_shift outside 0..31, a negative multiplier or a diff_min below
 * -floor(31 * 2^26 / 2^input_left_shift). Scratch: none.
 */
edgec_status edgec_softmax_s8(const edgec_softmax_params *params, const int8_t *input,
                              int32_t num_rows, int32_t row_size, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* EDGEC_NN_H */
