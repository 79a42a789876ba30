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

/* ==== Convolution (runtime_c/src/conv/; golden: edgec.ops.conv.conv2d_s8) ==================== */

/*
 * The convolution kernels' descriptor (all but edgec_conv_s8_dsp_wide, which takes its filter
 * widened to int16): the layer's geometry, quantization and constants, in flash. Tensors are
 * NHWC: input [batches][input_h][input_w][input_c], output [batches][output_h][output_w]
 * [output_c]; the filter OHWI [output_c][kernel_h][kernel_w][input_c / groups] (edgec_conv_s8,
 * edgec_conv_1x1_s8) or laid out for the packed kernels (see edgec_conv_s8_dsp).
 * Values: edgec.ops.conv.conv_desc.
 */
/* generated from edgec/ops/conv.py: edgec_conv_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    int32_t output_h;
    int32_t output_w;
    int32_t output_c;
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t groups;        /* divides input_c and output_c (1 for every kernel but edgec_conv_s8) */
    int32_t input_offset;  /* -input_zero_point, in [-127, 128] */
    int32_t output_offset; /* output_zero_point, in [-128, 127] */
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* OHWI, or the packed kernels' layout */
    const int32_t *bias;       /* [output_c] or NULL; packed kernels: the folded bias */
    const int32_t *multiplier; /* [output_c] */
    const int32_t *shift;      /* [output_c] */
} edgec_conv_desc;
/* end of edgec_conv_desc */

/*
 * Generic 2-D convolution, any kernel size, stride, dilation, padding and groups.
 *   acc = bias[c] + sum w[c,ky,kx,ic] * (x + input_offset); y = clamp(requant(acc) + output_offset)
 * Scratch: none. Any output size is accepted: taps outside the input contribute 0 (implied
 * bottom/right pad). The accumulator wraps modulo 2^32 (see the conventions above).
 * In place: the output may overlap the input when it starts d >= 0 bytes before it and every
 * output pixel q (raster order, batch first) ends at or below the first byte of its own receptive
 * field: (q+1)*C_out <= d + first(q)*C_in, first(q) being the pixel index of the field's top-left
 * tap clipped to the image. Pixels are computed in order, each field read before anything past
 * its pixel is written, so only bytes no later pixel reads are overwritten. (3x3, pad 1, stride 1:
 * d = (W+2)*C suffices.) The _dsp/_mve paths below copy each block of fields into scratch before
 * writing its pixels, so for them q*C_out <= d + first(q)*C_in is enough (1x1, C_out <= C_in: d=0).
 * EDGEC_ARG_ERROR: NULL pointer (bias excepted), non-positive dims, stride/dilation/groups < 1,
 * negative padding, groups not dividing input_c/output_c, act bounds outside int8 or crossed,
 * zero points outside int8, a shift outside [-31, 31], or a geometry whose index arithmetic
 * ((H_out-1)*stride + (KH-1)*dilation + 1, H + pad + stride + dilation, likewise for W) or
 * element counts exceed int32.
 */
edgec_status edgec_conv_s8(const edgec_conv_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_conv_s8 on Arm cores with the DSP extension (Cortex-M4/M7/M33/M55) or Helium (Cortex-M55),
 * from constants edgec lays out at compile time (edgec.ops.kernel_layout). The arithmetic and the
 * descriptor are edgec_conv_s8's, except:
 *  - groups must be 1 (grouped convolutions use edgec_conv_s8), -input_offset must be int8 and
 *    K = kernel_h*kernel_w*input_c at most EDGEC_CONV_S8_PACKED_MAX_K;
 *  - filter: the packed filter: each output channel's K OHWI weights, zero-padded to a multiple
 *    of G bytes, in blocks of R channels (output_c zero-padded to a multiple of R) whose rows
 *    interleave every G bytes: block, then group of G taps, then channel. DSP: R = 2, G = 4;
 *    MVE: R = 4, G = 16. Word-aligned;
 *  - bias (required): the folded bias, bias[c] + input_offset * sum_k w[c][k], wrapped to int32,
 *    so the inner loops need no input offset, then zeros up to a multiple of R entries.
 *    Word-aligned;
 *  - scratch (required, word-aligned): EDGEC_CONV_S8_DSP_SCRATCH_BYTES(K, input_c) or
 *    EDGEC_CONV_S8_MVE_SCRATCH_BYTES(K) bytes, for im2col.
 * Declared only where the build's -mcpu has the extension, so calling them elsewhere does not
 * compile.
 */
#define EDGEC_CONV_S8_PACKED_MAX_K (1 << 26)
/*
 * edgec_conv_s8_dsp's descriptor with its constants laid out for speed (edgec build --opt speed);
 * the other fields as edgec_conv_desc's. Values: edgec.ops.conv.conv_desc (wide).
 */
/* generated from edgec/ops/conv.py: edgec_conv_dsp_wide_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    int32_t output_h;
    int32_t output_w;
    int32_t output_c;
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t groups;        /* divides input_c and output_c (1 for every kernel but edgec_conv_s8) */
    int32_t input_offset;  /* -input_zero_point, in [-127, 128] */
    int32_t output_offset; /* output_zero_point, in [-128, 127] */
    int32_t act_min;
    int32_t act_max;
    const int16_t *wide_filter;   /* the packed filter widened to int16 pairs */
    const int32_t *channel_table; /* 8 words per channel pair */
    const int32_t *multiplier;    /* [output_c] */
    const int32_t *shift;         /* [output_c] */
} edgec_conv_dsp_wide_desc;
/* end of edgec_conv_dsp_wide_desc */
#if defined(__ARM_FEATURE_DSP)
/* generated from edgec/ops/conv.py: EDGEC_CONV_S8_DSP_SCRATCH_BYTES */
#define EDGEC_CONV_S8_DSP_SCRATCH_BYTES(k, c_in) (((c_in) % 4 == 0 ? 24 : 28) * (((k) + 3) / 4))
/* end of EDGEC_CONV_S8_DSP_SCRATCH_BYTES */
edgec_status edgec_conv_s8_dsp(const edgec_conv_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch);
/*
 * edgec_conv_s8_dsp with constants laid out for speed (edgec build --opt speed), the other
 * fields and arguments as there:
 *  - wide_filter: the packed filter with each group of 4 taps (w0, w1, w2, w3) of a channel as
 *    the int16 values (w0, w2, w1, w3) -- the pairs SXTB16 would make -- so the inner loop loads
 *    instead of widening: twice the filter's flash for a fifth fewer instructions per MAC;
 *  - channel_table (instead of the folded bias): per channel pair (c, c + 1), 8 words: folded
 *    bias c, c + 1, multiplier c, c + 1, round_high c, c + 1, r - 1 for c, c + 1, where a
 *    channel's r = -shift and round_high = (1 + 2 * output_offset) * 2^(r-2) (edgec_dsp_requant;
 *    zeros for a channel that does not admit the short requantization), the last pair
 *    zero-padded.
 * Both word-aligned.
 */
edgec_status edgec_conv_s8_dsp_wide(const edgec_conv_dsp_wide_desc *desc, const int8_t *input, int8_t *output,
                                    int8_t *scratch);
/* edgec_conv_s8_dsp_wide, the same contract but this scratch, for a 1x1 stride-1 layer of 8 input
 * channels and an even output count (edgec build picks it): one channel at a time over bands of
 * 24 pixels when every channel admits the short requantization and act_min/act_max are -128/127,
 * else as edgec_conv_s8_dsp_wide. */
/* generated from edgec/ops/conv.py: EDGEC_CONV_S8_DSP_WIDE_1X1X8_SCRATCH_BYTES */
#define EDGEC_CONV_S8_DSP_WIDE_1X1X8_SCRATCH_BYTES (8 * 24)
/* end of EDGEC_CONV_S8_DSP_WIDE_1X1X8_SCRATCH_BYTES */
edgec_status edgec_conv_s8_dsp_wide_1x1x8(const edgec_conv_dsp_wide_desc *desc, const int8_t *input, int8_t *output,
                                          int8_t *scratch);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* generated from edgec/ops/conv.py: EDGEC_CONV_S8_MVE_SCRATCH_BYTES */
#define EDGEC_CONV_S8_MVE_SCRATCH_BYTES(k) (32 * (((k) + 15) / 16))
/* end of EDGEC_CONV_S8_MVE_SCRATCH_BYTES */
/* edgec_conv_s8_dsp's contract with Helium's layout (R = 4, G = 16) and scratch. */
edgec_status edgec_conv_s8_mve(const edgec_conv_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch);
/*
 * edgec_conv_s8_mve running only the assembly routines named, so that a program links only
 * those: `blocks`, the layer's block routine (NULL below 4 output channels), and `direct`, its
 * direct-read routine (or NULL when it reads no field in place; one named that the layer does
 * not need is not run). EDGEC_ARG_ERROR if the layer needs a routine not named. Which routines a
 * layer needs: edgec.ops.conv.mve_routines; the variants: their list in edgec_conv_s8_mve.c.
 */
typedef struct edgec_conv_mve_routine edgec_conv_mve_routine;
extern const edgec_conv_mve_routine edgec_conv_mve_blocks_odd, edgec_conv_mve_blocks_even,
    edgec_conv_mve_blocks_odd_right, edgec_conv_mve_blocks_even_right, edgec_conv_mve_blocks_odd_strict,
    edgec_conv_mve_blocks_even_strict, edgec_conv_mve_blocks_odd_strict_quads, edgec_conv_mve_blocks_even_strict_quads,
    edgec_conv_mve_direct_odd, edgec_conv_mve_direct_even, edgec_conv_mve_direct_odd_runs3,
    edgec_conv_mve_direct_even_runs3, edgec_conv_mve_direct_single, edgec_conv_mve_direct_single_runs3,
    edgec_conv_mve_direct_triple_runs3, edgec_conv_mve_direct_even_quads, edgec_conv_mve_direct_even_runs3_quads;
edgec_status edgec_conv_s8_mve_with(const edgec_conv_desc *desc, const edgec_conv_mve_routine *blocks,
                                    const edgec_conv_mve_routine *direct, const int8_t *input, int8_t *output,
                                    int8_t *scratch);
#endif

/*
 * 1x1 convolution fast path of the portable build (on Arm cores with the DSP extension or
 * Helium, edgec_conv_s8_dsp/_mve are faster for 1x1 layers too, and edgec uses them).
 * Constraints: kernel_h = kernel_w = 1, groups = 1, no padding, dilation 1; any stride. Same
 * arithmetic and descriptor as edgec_conv_s8. Scratch: none. Not in place (see the next
 * function). EDGEC_ARG_ERROR also when these constraints do not hold or an output pixel would
 * read past the input ((H_out-1)*stride_h >= H or (W_out-1)*stride_w >= W).
 */
edgec_status edgec_conv_1x1_s8(const edgec_conv_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_conv_1x1_s8 with the output allowed to overlap the input. Scratch (required): output_c
 * bytes, apart from both. Output pixel q (NHWC order, output_c bytes) is computed from input
 * pixel r(q) into scratch and stored after that pixel is read in full; r increases with q. So,
 * with the input starting d bytes after the output (d may be negative), the result is exact when
 * the two do not overlap or when d >= q*C_out - r(q)*C_in for every output pixel q >= 1: e.g.
 * d = 0 (head-aligned) when C_out <= C_in, or d = P*(C_out - C_in) (tail-aligned: they end
 * together) at stride 1 with P pixels. edgec's planner (edgec.ops.conv.Conv2d.in_place) picks
 * such a d.
 */
edgec_status edgec_conv_1x1_s8_in_place(const edgec_conv_desc *desc, const int8_t *input, int8_t *output,
                                        int8_t *scratch);

/* ==== Depthwise convolution (runtime_c/src/depthwise/; golden: edgec.ops.depthwise) =========== */

/*
 * The depthwise kernels' descriptor: output channel o = c * ch_mult + m of output_c =
 * input_c * ch_mult reads input channel c; the filter is [kernel_h][kernel_w][output_c]
 * (edgec_depthwise_conv_s8, _in_place) or laid out for the packed kernels (see
 * edgec_depthwise_conv_s8_packed). Values: edgec.ops.depthwise.depthwise_desc.
 */
/* generated from edgec/ops/depthwise.py: edgec_depthwise_conv_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    int32_t output_h;
    int32_t output_w;
    int32_t ch_mult; /* output_c = input_c * ch_mult */
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t input_offset;  /* -input_zero_point, in [-127, 128] */
    int32_t output_offset; /* output_zero_point, in [-128, 127] */
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* [kernel_h][kernel_w][output_c], or the packed layout */
    const int32_t *bias;       /* [output_c] or NULL; packed kernels: the folded bias */
    const int32_t *multiplier; /* [output_c] */
    const int32_t *shift;      /* [output_c] */
} edgec_depthwise_conv_desc;
/* end of edgec_depthwise_conv_desc */

/*
 * Depthwise convolution with channel multiplier desc->ch_mult: any stride, dilation and padding.
 * Scratch: none. Not in place (see the next function). The accumulator wraps modulo 2^32.
 * EDGEC_ARG_ERROR as edgec_conv_s8, or when ch_mult < 1 or input_c * ch_mult exceeds int32.
 */
edgec_status edgec_depthwise_conv_s8(const edgec_depthwise_conv_desc *desc, const int8_t *input, int8_t *output);

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
/* generated from edgec/ops/depthwise.py: EDGEC_DEPTHWISE_IN_PLACE_SCRATCH_BYTES */
#define EDGEC_DEPTHWISE_IN_PLACE_SCRATCH_BYTES(pixels, c) \
    ((pixels) * ((c) < EDGEC_DEPTHWISE_IN_PLACE_CHANNELS ? (c) : EDGEC_DEPTHWISE_IN_PLACE_CHANNELS))
/* end of EDGEC_DEPTHWISE_IN_PLACE_SCRATCH_BYTES */
edgec_status edgec_depthwise_conv_s8_in_place(const edgec_depthwise_conv_desc *desc, const int8_t *input,
                                              int8_t *output, int8_t *scratch);

/*
 * edgec_depthwise_conv_s8 for ch_mult 1 from constants edgec lays out at compile time
 * (edgec.ops.depthwise.packed_depthwise_filter): 4 channels at a time over a cache of the input
 * rows, padded with the zero point, so border pixels cost what inside ones do. Uses the DSP
 * extension or Helium where the build's -mcpu has them, else portable C. The arithmetic and the
 * descriptor are edgec_depthwise_conv_s8's, except:
 *  - filter: the packed filter: per group of 4 channels (C zero-padded to a multiple of 4), its
 *    KH*KW taps of 4 bytes each in [KH][KW] order. Word-aligned;
 *  - bias (required): the folded bias, bias[c] + input_offset * the sum of channel c's taps,
 *    wrapped to int32, then zeros up to a multiple of 4 entries. Word-aligned;
 *  - kernel_h <= EDGEC_DEPTHWISE_PACKED_MAX_K;
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
/* Groups of 4 channels the row cache holds at once: Helium caches 16 channels where it can. */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define EDGEC_DEPTHWISE_PACKED_CACHED_GROUPS 4
#else
#define EDGEC_DEPTHWISE_PACKED_CACHED_GROUPS 1
#endif
/* generated from edgec/ops/depthwise.py: EDGEC_DEPTHWISE_PACKED_ROW_PIXELS */
#define EDGEC_DEPTHWISE_PACKED_ROW_PIXELS(out_w, stride_w, k_w, dilation_w) \
    (((out_w)-1) * (stride_w) + ((k_w)-1) * (dilation_w) + 1)
/* end of EDGEC_DEPTHWISE_PACKED_ROW_PIXELS */
/* generated from edgec/ops/depthwise.py: EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES */
#define EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES(k_h, row_pixels) \
    ((k_h) * (row_pixels) * (EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES) * (EDGEC_DEPTHWISE_PACKED_CACHED_GROUPS))
/* end of EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES */
edgec_status edgec_depthwise_conv_s8_packed(const edgec_depthwise_conv_desc *desc, const int8_t *input, int8_t *output,
                                            int8_t *scratch);
edgec_status edgec_depthwise_conv_s8_packed_in_place(const edgec_depthwise_conv_desc *desc, const int8_t *input,
                                                     int8_t *output, int8_t *scratch);

/*
 * Fully connected: for each of `batches` rows of `input_size` int8 values,
 *   acc[o] = bias[o] + sum_j filter[o][j] * (x[j] + input_offset), modulo 2^32,
 *   y[o]   = clamp(requantize(acc[o], multiplier[o], shift[o]) + output_offset, act_min, act_max),
 * entry 0 of multiplier and shift for every output unless per_channel. Values: edgec.ops.linear
 * (FullyConnected.emit); golden: edgec.ops.linear.fully_connected_s8. Scratch: none.
 * EDGEC_ARG_ERROR: NULL pointer (bias excepted), a size < 1, batches*input_size,
 * batches*output_size or output_size*input_size past int32, zero points outside int8, a shift
 * outside [-31, 31], act bounds outside int8 or crossed.
 */
/* generated from edgec/ops/linear.py: edgec_fully_connected_s8_desc */
typedef struct {
    int32_t batches;
    int32_t input_size;
    int32_t output_size;
    int32_t input_offset;  /* -input_zero_point, in [-127, 128] */
    int32_t output_offset; /* output_zero_point, in [-128, 127] */
    int32_t per_channel;   /* 0: multiplier and shift hold one entry for all outputs */
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* [output_size][input_size]; packed paths: re-laid (see below) */
    const int32_t *bias;       /* [output_size] or NULL; packed paths: the folded bias, required */
    const int32_t *multiplier; /* [output_size] if per_channel, else [1] */
    const int32_t *shift;      /* as multiplier, each in [-31, 31] */
} edgec_fully_connected_s8_desc;
/* end of edgec_fully_connected_s8_desc */

edgec_status edgec_fully_connected_s8(const edgec_fully_connected_s8_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_fully_connected_s8 on Arm cores with the DSP extension (Cortex-M4/M7/M33/M55) or Helium
 * (Cortex-M55), from constants edgec lays out at compile time (edgec.ops.kernel_layout). The
 * arithmetic and the descriptor are edgec_fully_connected_s8's, except:
 *  - filter: each output's input_size weights, zero-padded to a multiple of G bytes, in blocks of
 *    R outputs whose rows interleave every G bytes: block, then group of G inputs, then output.
 *    MVE: G = 16, R = 4 (output_size zero-padded to a multiple of 4); DSP: G = 4, R = 6, the
 *    last block of the rest of 2, 4 or 6 rows (output_size zero-padded to an even count;
 *    edgec.ops.linear.fc_packed_filter); _dsp_wide: R = 4 as MVE. Word-aligned;
 *  - bias (required): the folded bias, bias[o] + input_offset * sum_j w[o][j], wrapped to int32.
 * Scratch: none (the DSP kernel widens an input row of up to 1,024 bytes on its stack: at most
 * 2,048 B). Declared only where the build's -mcpu has the extension.
 */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_fully_connected_s8_dsp(const edgec_fully_connected_s8_desc *desc, const int8_t *input,
                                          int8_t *output);
/* edgec_fully_connected_s8_dsp with its filter widened like edgec_conv_s8_dsp_wide's (edgec build
 * --opt speed): each group of 4 taps (w0, w1, w2, w3) as the int16 values (w0, w2, w1, w3), the
 * filter field pointing at their bytes (little-endian). */
edgec_status edgec_fully_connected_s8_dsp_wide(const edgec_fully_connected_s8_desc *desc, const int8_t *input,
                                               int8_t *output);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* edgec_fully_connected_s8 on Helium, the filter packed as above with G = 16. */
edgec_status edgec_fully_connected_s8_mve(const edgec_fully_connected_s8_desc *desc, const int8_t *input,
                                          int8_t *output);
#endif

/*
 * 2-D pooling, NHWC: one descriptor for the average and max pools (values from
 * edgec.ops.pool.pool2d_desc), three entry points so that a build links only the arithmetic its
 * layers use. Windows: output (oy, ox) covers input rows [oy * stride_h - pad_top, + filter_h)
 * and the columns alike, clipped to the input (bottom/right padding is implied by output_h and
 * output_w); every window must overlap the input. Input and output share scale and zero point.
 * Scratch: none. EDGEC_ARG_ERROR: NULL pointer, a size or stride < 1, a pad < 0 or >= its filter,
 * a window without input, more than INT32_MAX elements, act bounds outside int8 or crossed.
 */
#define EDGEC_AVG_POOL2D_MAX_DIVISOR (1 << 23)
/* generated from edgec/ops/pool.py: edgec_pool2d_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t channels;
    int32_t output_h;
    int32_t output_w;
    int32_t filter_h;
    int32_t filter_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t count_include_pad; /* edgec_avg_pool2d_s8: 0 or 1; else 0 */
    int32_t divisor_override;  /* edgec_avg_pool2d_s8: 0 (none) to EDGEC_AVG_POOL2D_MAX_DIVISOR; else 0 */
    int32_t zero_point;        /* edgec_avg_pool2d_s8: the input's, the value of a tap outside it (real 0) */
    int32_t act_min;
    int32_t act_max;
} edgec_pool2d_desc;
/* end of edgec_pool2d_desc */

/*
 * Average pool over in-bounds taps (TFLite's rule: padding excluded from the count), rounding half
 * away from zero: y = clamp(trunc_div(sum > 0 ? sum + n/2 : sum - n/2, n), act_min, act_max), n
 * the window's taps inside the input. Golden: edgec.ops.pool.avg_pool2d_s8 (divisor
 * "in_bounds"). Paths by the build's -mcpu: Helium (four channels per VADD), DSP (four per two
 * SXTAB16, windows of up to 256 taps), portable C; bit-exact. zero_point is not read;
 * count_include_pad and divisor_override must be 0 (the other divisors are edgec_avg_pool2d_s8's)
 * and a window at most 2^23 taps, else EDGEC_ARG_ERROR.
 */
edgec_status edgec_avgpool_s8(const edgec_pool2d_desc *desc, const int8_t *input, int8_t *output);

/* Max pool over in-bounds taps, then clamp. Golden: edgec.ops.pool.max_pool2d_s8. Reads neither
 * zero_point nor the divisor fields. The build's -mcpu picks the path: Helium (16 channels per
 * VMAX.S8), DSP (8 and 4 per SSUB8/SEL), portable C. */
edgec_status edgec_maxpool_s8(const edgec_pool2d_desc *desc, const int8_t *input, int8_t *output);

/*
 * Average pooling with PyTorch's divisor rules (and TFLite's): edgec_avgpool_s8's arithmetic,
 * sum over the taps inside the input, rounded half away from zero,
 *   y = clamp(trunc_div(sum > 0 ? sum + n/2 : sum - n/2, n), act_min, act_max),
 * with the divisor n:
 *  - divisor_override > 0: that value (PyTorch's divisor_override);
 *  - else count_include_pad = 1: PyTorch's count_include_pad=True, (hend - hstart) * (wend -
 *    wstart) with hstart = oy * stride_h - pad_top, hend = min(hstart + filter_h, input_h +
 *    pad_top) (the window clipped to the padded input, not to the input);
 *  - else (0, 0): the in-bounds taps, as edgec_avgpool_s8 (TFLite's rule).
 * ceil_mode=True is an output size: any output_h whose last window starts inside the input or
 * its top/left padding ((output_h - 1) * stride_h - pad_top < input_h) is accepted, which is
 * PyTorch's rule (it drops a last window that would start in the bottom/right padding); windows
 * are clipped. Paths (portable, DSP, Helium) as edgec_avgpool_s8, bit-exact.
 * Golden: edgec.ops.pool.avg_pool2d_s8 (divisor argument); values from edgec.ops.pool.
 * pool2d_desc. Scratch: none. EDGEC_ARG_ERROR as edgec_avgpool_s8 (bar its divisor fields), and
 * for a negative divisor_override, count_include_pad outside 0..1, a zero_point outside int8, or
 * a divisor above EDGEC_AVG_POOL2D_MAX_DIVISOR (2^23: with |zero_point| <= 128 the padded taps'
 * share of the sum stays inside int32). A divisor that counts taps outside the input counts them
 * as real 0 (PyTorch pads with zeros): the sum gains (divisor - in-bounds taps) * zero_point.
 */
edgec_status edgec_avg_pool2d_s8(const edgec_pool2d_desc *desc, const int8_t *input, int8_t *output);

/*
 * Elementwise add of two int8 tensors of `size` elements with independent qparams (TFLite/CMSIS-NN
 * scheme, left_shift 20):
 *   a = requantize((x1 + input1_offset) * 2^left_shift, input1_multiplier, input1_shift),
 *   b likewise from input 2; y = clamp(requantize(a + b, output_multiplier, output_shift) +
 *   output_offset, act_min, act_max), a + b wrapped to int32.
 * output may alias input1 or input2 (in place). Values: edgec.ops.eltwise.add_desc; golden:
 * edgec.ops.eltwise.add_s8. Scratch: none. EDGEC_ARG_ERROR: NULL pointer, a negative size, an input
 * offset outside [-127, 128], an output offset outside int8, left_shift outside 0..23, a shift
 * outside [-31, 31], act bounds outside int8 or crossed.
 */
/* generated from edgec/ops/eltwise.py: edgec_add_s8_desc */
typedef struct {
    int32_t size;          /* elements of each input and of the output, >= 0 */
    int32_t input1_offset; /* -zero_point of input 1 */
    int32_t input1_multiplier;
    int32_t input1_shift;
    int32_t input2_offset; /* -zero_point of input 2 */
    int32_t input2_multiplier;
    int32_t input2_shift;
    int32_t left_shift; /* 20 */
    int32_t output_offset;
    int32_t output_multiplier;
    int32_t output_shift;
    int32_t act_min;
    int32_t act_max;
} edgec_add_s8_desc;
/* end of edgec_add_s8_desc */

edgec_status edgec_add_s8(const edgec_add_s8_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output);

/*
 * edgec_add_s8 on Arm cores with the DSP extension (Cortex-M4/M7/M33/M55) or Helium (Cortex-M55):
 * same descriptor and arithmetic, output may alias an input likewise, plus scratch (required,
 * word-aligned): EDGEC_ADD_S8_SCRATCH_BYTES, for the two inputs' rescaled values as lookup tables
 * (EDGEC_ARG_ERROR also for a NULL or misaligned scratch). Declared only where the build's -mcpu
 * has the extension.
 */
/* generated from edgec/ops/eltwise.py: EDGEC_ADD_S8_SCRATCH_BYTES */
#define EDGEC_ADD_S8_SCRATCH_BYTES (2 * 256 * 4)
/* end of EDGEC_ADD_S8_SCRATCH_BYTES */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_add_s8_dsp(const edgec_add_s8_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output,
                              int8_t *scratch);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_add_s8_mve(const edgec_add_s8_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output,
                              int8_t *scratch);
#endif

/* ==== Binary family: elementwise ops with NumPy broadcasting (eltwise/edgec_binary_s8*.c) === */

/*
 * Broadcasting, shared by edgec_binary_desc and edgec_prelu_desc: the output is a contiguous
 * tensor of dims[0] x ... x dims[num_dims-1] elements (outermost first); its element
 * (i_0, ..., i_k) reads input j at sum_d i_d * strides_j[d] elements, a stride being 0 along a
 * dimension where that input is broadcast. edgec.ops.binary.broadcast_layout merges dimensions so
 * that the common cases need one or two: same shape [N] with strides 1 and 1; a scalar operand,
 * strides 1 and 0; NHWC [1,H,W,C] with a per-channel [1,1,1,C] operand, [H*W, C] with strides
 * (C, 1) and (0, 1). Entries from num_dims on are ignored.
 */
#define EDGEC_BINARY_MAX_DIMS 6

/* edgec_binary_desc.op */
typedef enum {
    EDGEC_BINARY_ADD = 0,
    EDGEC_BINARY_SUB = 1,
    EDGEC_BINARY_MUL = 2,
    EDGEC_BINARY_MINIMUM = 3,
    EDGEC_BINARY_MAXIMUM = 4
} edgec_binary_op;

/* Fields from edgec.ops.binary.binary_desc. The quantization fields are edgec_add_s8_desc's (the
 * same names and order); each op reads those its arithmetic names below, the others are 0. */
/* generated from edgec/ops/binary.py: edgec_binary_desc */
typedef struct {
    int32_t op;                              /* an edgec_binary_op */
    int32_t num_dims;                        /* 1..EDGEC_BINARY_MAX_DIMS */
    int32_t dims[EDGEC_BINARY_MAX_DIMS];     /* output dims, each >= 1 */
    int32_t strides1[EDGEC_BINARY_MAX_DIMS]; /* input1 element strides, >= 0 */
    int32_t strides2[EDGEC_BINARY_MAX_DIMS]; /* input2 element strides, >= 0 */
    int32_t input1_offset;                   /* -zero_point of input 1, in [-127, 128] */
    int32_t input1_multiplier;               /* add/sub; all multipliers >= 0 */
    int32_t input1_shift;
    int32_t input2_offset;     /* -zero_point of input 2, in [-127, 128] */
    int32_t input2_multiplier; /* add/sub */
    int32_t input2_shift;
    int32_t left_shift;    /* add/sub: 20; 0..23 */
    int32_t output_offset; /* output zero point, in [-128, 127] */
    int32_t output_multiplier;
    int32_t output_shift; /* shifts: -31..31, positive to the left */
    int32_t act_min;
    int32_t act_max;
} edgec_binary_desc;
/* end of edgec_binary_desc */

/*
 * y = op(x1, x2) elementwise with broadcasting, int8 in and out, TFLite's int8 arithmetic
 * (requantize = arm_nn_requantize, double rounding; r below is clamped to [act_min - offset,
 * act_max - offset], then offset = output_offset added):
 *  ADD/SUB: a = requantize((x1 + input1_offset) * 2^left_shift, input1_multiplier, input1_shift),
 *           b likewise from input2; r = requantize(a + b, or a - b, wrapped to int32,
 *           output_multiplier, output_shift)            (TFLite reference_integer_ops::Add, Sub)
 *  MUL:     r = requantize((x1 + input1_offset) * (x2 + input2_offset), output_multiplier,
 *           output_shift)                               (TFLite reference_integer_ops::Mul)
 *  MINIMUM/MAXIMUM: y = clamp(min/max(x1, x2), act_min, act_max) on the raw int8 values, which
 *           assumes (as TFLite's MINIMUM/MAXIMUM do) that both inputs and the output share scale
 *           and zero point; the offset and multiplier fields are not read.
 * In place: output may be input1 or input2 exactly when that input is not broadcast (it has the
 * output's shape, contiguous); never a broadcast input. Scratch: none.
 * EDGEC_ARG_ERROR: NULL pointer, an unknown op, num_dims outside 1..EDGEC_BINARY_MAX_DIMS, a
 * dim < 1, a negative stride, more than INT32_MAX output elements or input offsets, a field
 * outside its range above, act bounds outside int8 or crossed.
 */
edgec_status edgec_binary_s8(const edgec_binary_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output);

/*
 * edgec_binary_s8 with its innermost two loop levels on the Arm DSP extension (Cortex-M4/M7/M33/
 * M55) or on Helium (Cortex-M55) where the innermost strides are (1, 1), (1, 0) or (0, 1) (same
 * shape, per-channel, per-pixel and scalar operands): the same arguments, arithmetic and in-place
 * rule, byte for byte. DSP: MUL four elements per step (SXTAB16, SMULBB/SMULTT, an SMMLAR
 * requantization) when output_shift is -1..-24 (QuantizeMultiplier of s1*s2/s_out in
 * [2^-25, 1/2)), MINIMUM/MAXIMUM four bytes per SSUB8/SEL. Helium: MUL eight lanes per step,
 * ADD/SUB four (when left_shift + max(input shift, 0) <= 31 for both inputs, as binary_desc's
 * are), MINIMUM/MAXIMUM sixteen. Other cases run the portable loops. Declared only where the
 * build's -mcpu has the extension.
 */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_binary_s8_dsp(const edgec_binary_desc *desc, const int8_t *input1, const int8_t *input2,
                                 int8_t *output);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_binary_s8_mve(const edgec_binary_desc *desc, const int8_t *input1, const int8_t *input2,
                                 int8_t *output);
#endif

/* Fields from edgec.ops.binary.prelu_desc; the layout as edgec_binary_desc's, input and alpha in
 * the roles of input1 and input2. */
/* generated from edgec/ops/binary.py: edgec_prelu_desc */
typedef struct {
    int32_t num_dims;
    int32_t dims[EDGEC_BINARY_MAX_DIMS];
    int32_t input_strides[EDGEC_BINARY_MAX_DIMS];
    int32_t alpha_strides[EDGEC_BINARY_MAX_DIMS];
    int32_t input_offset;        /* -zero_point of the input, in [-127, 128] */
    int32_t alpha_offset;        /* -zero_point of alpha, in [-127, 128] */
    int32_t output_offset;       /* in [-128, 127] */
    int32_t identity_multiplier; /* QuantizeMultiplier(s_in / s_out), >= 0 */
    int32_t identity_shift;
    int32_t alpha_multiplier; /* QuantizeMultiplier(s_in * s_alpha / s_out), >= 0 */
    int32_t alpha_shift;      /* shifts: -31..31 */
    int32_t act_min;          /* -128 and 127 for TFLite's PRELU */
    int32_t act_max;
} edgec_prelu_desc;
/* end of edgec_prelu_desc */

/*
 * PReLU, TFLite's int8 PRELU (reference_ops::BroadcastPrelu4DSlow) with alpha broadcast (NHWC per
 * channel: alpha strides (0, 1) over [H*W, C]; or one alpha): with v = x + input_offset,
 *   v >= 0: r = requantize(v, identity_multiplier, identity_shift)
 *   v <  0: r = requantize(v * (alpha + alpha_offset), alpha_multiplier, alpha_shift)
 *   y = clamp(r + output_offset, act_min, act_max).
 * In place: output may be input exactly when input is not broadcast. Scratch: none. A plane (the
 * innermost two dimensions) under one alpha per column that outnumbers the entries it needs runs
 * through a 256-entry table of outputs by input byte on the stack (about 260 bytes); a plane with
 * 4x as many elements as the table's alpha-independent half (v >= 0) takes that half from it and
 * computes the negative inputs; the same outputs as the per-element arithmetic, by construction.
 * EDGEC_ARG_ERROR as edgec_binary_s8's.
 */
edgec_status edgec_prelu_s8(const edgec_prelu_desc *desc, const int8_t *input, const int8_t *alpha, int8_t *output);

/*
 * edgec_prelu_s8 with its outputs read from tables made at compile time
 * (edgec.ops.binary.prelu_tables): for alpha element k, tables[k * 256 + x + 128] is the output
 * for input byte x, so an element costs a load, a table load and a store, with no set-up per
 * call (a band stage's PReLU, called on a few rows at a time). The desc's layout is read as
 * edgec_prelu_s8's (the alpha strides step over tables), its quantization fields only validated.
 * In place as edgec_prelu_s8. Scratch: none. EDGEC_ARG_ERROR as edgec_prelu_s8's, or when the
 * tables' extent (alpha extent x 256) exceeds INT32_MAX.
 */
edgec_status edgec_prelu_s8_lookup(const edgec_prelu_desc *desc, const int8_t *tables, const int8_t *input,
                                   int8_t *output);

/* ==== end of the binary family ==== */

/* ==== Select: torch.where / masked_fill on a comparison (eltwise/edgec_select_s8.c) ==== */

/*
 * The layout as edgec_binary_desc's, for four operands: the output is a contiguous tensor of
 * dims[0] x ... x dims[num_dims-1] elements; its element (i_0, ..., i_k) reads operand j at
 * sum_d i_d * j_strides[d] elements, 0 along a dimension where j is broadcast
 * (edgec.ops.select.select_layout merges dimensions). Entries from num_dims on are ignored.
 */
#define EDGEC_SELECT_MAX_DIMS 6

/* edgec_select_desc.cmp: the comparison of the raw int8 x1 and x2. */
typedef enum {
    EDGEC_SELECT_GT = 0,
    EDGEC_SELECT_GE = 1,
    EDGEC_SELECT_LT = 2,
    EDGEC_SELECT_LE = 3,
    EDGEC_SELECT_EQ = 4,
    EDGEC_SELECT_NE = 5
} edgec_select_cmp;

/* Fields from edgec.ops.select.select_desc. */
/* generated from edgec/ops/select.py: edgec_select_desc */
typedef struct {
    int32_t cmp;                               /* an edgec_select_cmp on the raw int8 x1, x2 (table NULL) */
    int32_t num_dims;                          /* 1..EDGEC_SELECT_MAX_DIMS */
    int32_t dims[EDGEC_SELECT_MAX_DIMS];       /* output dims, each >= 1 */
    int32_t x1_strides[EDGEC_SELECT_MAX_DIMS]; /* element strides, >= 0 */
    int32_t x2_strides[EDGEC_SELECT_MAX_DIMS]; /* unread with a table */
    int32_t a_strides[EDGEC_SELECT_MAX_DIMS];
    int32_t b_strides[EDGEC_SELECT_MAX_DIMS];
    const int8_t *table; /* NULL, or the condition (0/1) of x1 at [x1 + 128] */
} edgec_select_desc;
/* end of edgec_select_desc */

/*
 * output = condition ? a : b elementwise with broadcasting, int8 bytes moved unchanged (a, b and
 * the output share scale and zero point). The condition: table[x1 + 128] != 0 when table is not
 * NULL (a comparison of x1 with one value, tabulated at compile time; x2 is not read and may be
 * NULL), else x1 CMP x2 on the raw int8 values (x1 and x2 share scale and zero point, so this is
 * the comparison of their values). Golden: edgec.ops.select.select_s8.
 * In place: output may be any operand that is not broadcast (it has the output's shape,
 * contiguous). Scratch: none.
 * EDGEC_ARG_ERROR: NULL pointer (x2 with a table excepted), an unknown cmp, num_dims outside
 * 1..EDGEC_SELECT_MAX_DIMS, a dim < 1, a negative stride, more than INT32_MAX output elements or
 * operand offsets.
 */
edgec_status edgec_select_s8(const edgec_select_desc *desc, const int8_t *x1, const int8_t *x2, const int8_t *a,
                             const int8_t *b, int8_t *output);

/* ==== end of select ==== */

/*
 * Clamp `size` int8 values to [act_min, act_max] in place (a standalone ReLU/ReLU6/clamp the
 * build could not fuse into its producer). Golden: edgec.ops.eltwise.clamp_s8. Scratch: none.
 * EDGEC_ARG_ERROR: NULL pointer, a negative size, act bounds outside int8 or crossed.
 */
/* generated from edgec/ops/eltwise.py: edgec_clamp_s8_desc */
typedef struct {
    int32_t size; /* >= 0 */
    int32_t act_min;
    int32_t act_max;
} edgec_clamp_s8_desc;
/* end of edgec_clamp_s8_desc */

edgec_status edgec_clamp_s8(const edgec_clamp_s8_desc *desc, int8_t *data);

/* ==== Transposed convolution and the remaining pooling forms (family: convt) ================= */

/*
 * Transposed 2-D convolution (PyTorch ConvTranspose2d; ConvTranspose1d as H = 1) with TFLite's
 * int8 TRANSPOSE_CONV arithmetic (reference_integer_ops::TransposeConv), per-channel:
 *   acc = bias[co] + sum over the input pixels i and taps k that reach output o of
 *         (x[i] + input_offset) * w[k], modulo 2^32,
 *   y = clamp(requantize(acc, multiplier[co], shift[co]) + output_offset, act_min, act_max),
 * where input pixel i and tap k reach o = i * stride - pad + k * dilation (per axis). TFLite
 * scatters into an int32 buffer of the whole output; these kernels gather each output pixel's
 * terms instead (no such buffer): the same terms summed modulo 2^32 in another order, so the same
 * bits. Golden: edgec.ops.conv_transpose.conv_transpose2d_s8; the descriptor's values come from
 * edgec.ops.conv_transpose.conv_transpose_desc (filter re-laid per phase, see there).
 * All fields are compile-time constants; generated code defines the descriptor static const.
 */
/* generated from edgec/ops/conv_transpose.py: edgec_conv_transpose_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    /* (input_h - 1) * stride_h - 2 * pad_h + dilation_h * (kernel_h - 1) + output_padding_h + 1 */
    int32_t output_h;
    int32_t output_w; /* likewise along w */
    int32_t output_c;
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_h; /* PyTorch padding: removed from both ends of the output */
    int32_t pad_w;
    int32_t output_padding_h; /* 0 <= output_padding < max(stride, dilation), as PyTorch */
    int32_t output_padding_w;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t groups;        /* divides C_in and C_out; depthwise: groups == C_in */
    int32_t input_offset;  /* -input zero point, in [-127, 128] */
    int32_t output_offset; /* output zero point, in [-128, 127] */
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* per phase (r_h, r_w) in raster order: [C_out][K_phase] rows (_s4: packed) */
    const int32_t *bias;       /* portable: [C_out] or NULL; _dsp/_mve: folded per phase */
    const int32_t *multiplier; /* [C_out] */
    const int32_t *shift;      /* [C_out], -31..31 */
} edgec_conv_transpose_desc;
/* end of edgec_conv_transpose_desc */

/*
 * Portable C, any groups (1, depthwise with any channel multiplier, or in between). filter: for
 * each phase (r_h = 0..stride_h-1, then r_w = 0..stride_w-1), the taps (ky, kx) with
 * ky * dilation_h % stride_h == r_h (likewise kx), in (ky, kx) order; per output channel co,
 * those taps' C_in/groups weights of co's group one after another: C_out rows of
 * K_phase = taps_h * taps_w * C_in/groups bytes (edgec.ops.conv_transpose.conv_transpose_filter,
 * isa "portable"). Scratch: none. Not in place.
 * EDGEC_ARG_ERROR: a NULL pointer (bias excepted), non-positive dims, stride/dilation/groups < 1,
 * a negative pad or output_padding, output_padding >= max(stride, dilation), an output size other
 * than the formula above (or whose uncropped extent passes INT32_MAX), groups not dividing C_in and
 * C_out, offsets outside their ranges, act bounds outside int8 or crossed, a shift outside -31..31
 * or a negative multiplier.
 */
edgec_status edgec_conv_transpose_s8(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_conv_transpose_s8 with int4 weights (edgec.ops.int4): filter is the portable kernel's phase
 * rows packed as one stream of int4 values in [-8, 7], element i in byte i / 2, the low nibble
 * first (an odd count leaves the last high nibble 0); each weight is read in place, so it needs no
 * scratch. Same arithmetic, checks and results as edgec_conv_transpose_s8 on the unpacked filter.
 */
edgec_status edgec_conv_transpose_s4(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_conv_transpose_s4 on Arm cores with the DSP extension, groups 1: per phase each channel's
 * row zero-padded to a multiple of 8 weights (whole words), then packed as above
 * (edgec.ops.conv_transpose.conv_transpose_s4_filter, isa "dsp"); bias plain ([C_out] or NULL).
 * scratch (required, word-aligned, apart from input and output):
 * EDGEC_CONV_TRANSPOSE_S4_DSP_SCRATCH_BYTES(k) with k the largest K_phase. Same results, bit for
 * bit. Declared only where the build's -mcpu has the extension.
 */
/* generated from edgec/ops/conv_transpose.py: EDGEC_CONV_TRANSPOSE_S4_DSP_SCRATCH_BYTES */
#define EDGEC_CONV_TRANSPOSE_S4_DSP_SCRATCH_BYTES(k) (5 * (((k) + 7) / 8 * 8))
/* end of EDGEC_CONV_TRANSPOSE_S4_DSP_SCRATCH_BYTES */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_conv_transpose_s4_dsp(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output,
                                         int8_t *scratch);
#endif

/*
 * edgec_conv_transpose_s8 on Arm cores with the DSP extension (2 output channels x 2 output
 * pixels per SMLAD step) or Helium (4 x 2 per VMLADAVA step): groups must be 1; per phase the
 * [C_out][K_phase] rows are laid out like edgec_conv_s8_dsp/_mve's packed filter (DSP: blocks of
 * 2 rows, groups of 4 bytes; MVE: 4 rows, 16 bytes; zero-padded), phases one after another
 * (conv_transpose_filter, isa "dsp"/"mve"); bias (required) is folded per phase: for each phase,
 * bias[co] + input_offset * the sum of co's weights in that phase, zero-padded to whole blocks
 * (conv_transpose_bias). filter, bias and scratch word-aligned. scratch (required, apart from
 * input and output): EDGEC_CONV_TRANSPOSE_S8_DSP/MVE_SCRATCH_BYTES(k) with k the largest
 * K_phase (edgec.ops.conv_transpose.conv_transpose_scratch_bytes). Same results, bit for bit.
 * Declared only where the build's -mcpu has the extension.
 */
/* generated from edgec/ops/conv_transpose.py: EDGEC_CONV_TRANSPOSE_S8_DSP_SCRATCH_BYTES */
#define EDGEC_CONV_TRANSPOSE_S8_DSP_SCRATCH_BYTES(k) (5 * (((k) + 3) / 4 * 4))
/* end of EDGEC_CONV_TRANSPOSE_S8_DSP_SCRATCH_BYTES */
/* generated from edgec/ops/conv_transpose.py: EDGEC_CONV_TRANSPOSE_S8_MVE_SCRATCH_BYTES */
#define EDGEC_CONV_TRANSPOSE_S8_MVE_SCRATCH_BYTES(k) (2 * (((k) + 15) / 16 * 16))
/* end of EDGEC_CONV_TRANSPOSE_S8_MVE_SCRATCH_BYTES */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_conv_transpose_s8_dsp(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output,
                                         int8_t *scratch);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_conv_transpose_s8_mve(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output,
                                         int8_t *scratch);
#endif

/*
 * Adaptive average pooling with PyTorch's windows, NHWC: output (oy, ox) averages input rows
 * [oy * input_h / output_h, ceil((oy + 1) * input_h / output_h)) and the columns alike (floor and
 * ceil of exact fractions: windows of uneven size where the output does not divide the input),
 * rounded as edgec_avgpool_s8: y = clamp(trunc_div(sum > 0 ? sum + n/2 : sum - n/2, n)), n the
 * window's taps. Input and output share qparams. Golden: edgec.ops.pool.adaptive_avg_pool2d_s8;
 * values from edgec.ops.pool.adaptive_avg_pool2d_desc. Scratch: none. EDGEC_ARG_ERROR for
 * non-positive sizes, an output larger than the input along an axis, input_h * input_w above
 * 2^23 (the int32 sum) or act_min > act_max.
 */
/* generated from edgec/ops/pool.py: edgec_adaptive_avg_pool_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t channels;
    int32_t output_h;
    int32_t output_w;
    int32_t act_min;
    int32_t act_max;
} edgec_adaptive_avg_pool_desc;
/* end of edgec_adaptive_avg_pool_desc */

edgec_status edgec_adaptive_avg_pool_s8(const edgec_adaptive_avg_pool_desc *desc, const int8_t *input, int8_t *output);

/* ==== end of transposed convolution and pooling forms ========================================= */

/* ==== lut family: lookup-table activations, softmax over any axis, log_softmax ============== */

/* Descriptor of edgec_lut_s8 (fields from edgec.ops.lut.lut_desc). */
/* generated from edgec/ops/lut.py: edgec_lut_desc */
typedef struct {
    int32_t size;        /* number of elements, >= 1 */
    const int8_t *table; /* 256 entries in flash: entry x + 128 is the output for input x */
} edgec_lut_desc;
/* end of edgec_lut_desc */

/*
 * Any int8 -> int8 elementwise function: output[i] = table[input[i] + 128] for i < size. The
 * table (edgec.ops.lut.lut_table: sigmoid, tanh, hardswish, GELU, ..., TFLite's leaky_relu and
 * int8 requantization) is the whole arithmetic. Paths by the build's -mcpu: portable C, four
 * elements per (unaligned) word load and store on Armv7-M and later (Cortex-M3/M4/M7/M33), a
 * 16-lane byte gather with Helium (Cortex-M55); all give the same bytes.
 * In place: output == input is allowed; otherwise the buffers must not overlap. No alignment
 * needed. Scratch: none. EDGEC_ARG_ERROR: a NULL pointer (desc, table, input, output) or size < 1.
 */
edgec_status edgec_lut_s8(const edgec_lut_desc *desc, const int8_t *input, int8_t *output);

/* Descriptor of edgec_lut_channels_s8 (fields from edgec.ops.lut.lut_channels_desc). */
/* generated from edgec/ops/lut.py: edgec_lut_channels_desc */
typedef struct {
    int32_t pixels;   /* the tensor viewed as [pixels][channels], channels last, contiguous; >= 1 */
    int32_t channels; /* >= 1: one 256-entry table each */
} edgec_lut_channels_desc;
/* end of edgec_lut_channels_desc */

/*
 * One int8 -> int8 table per channel, channels last: output[p][c] = tables[c][input[p][c] + 128]
 * for pixels p and channels c (tables: channels x 256 entries, in flash). A per-channel affine (a
 * BatchNorm no layer absorbs, run as a 1x1 depthwise convolution) or a PReLU with one slope per
 * channel, through tables made at compile time from that layer's arithmetic. Helium gathers eight
 * channels at a time, Armv7-M reads words of four channels (or walks channel by channel where the
 * pixels outnumber them). Each element is read before its output is written, so output == input is
 * allowed. EDGEC_ARG_ERROR for NULL pointers, pixels or channels < 1. Scratch: none.
 */
edgec_status edgec_lut_channels_s8(const edgec_lut_channels_desc *desc, const int8_t *tables, const int8_t *input,
                                   int8_t *output);

/*
 * Descriptor of edgec_softmax_axis_s8 (fields from edgec.ops.softmax.softmax_axis_desc). The
 * tensor is viewed as [outer][axis_size][inner]: element (o, a, i) is at (o*axis_size + a)*inner + i.
 */
/* generated from edgec/ops/softmax.py: edgec_softmax_desc */
typedef struct {
    int32_t outer;
    int32_t axis_size;
    int32_t inner;
    int32_t input_multiplier; /* edgec.ops.softmax.softmax_params: the three fields */
    int32_t input_left_shift;
    int32_t diff_min;
} edgec_softmax_desc;
/* end of edgec_softmax_desc */

/*
 * Softmax over the middle axis of [outer][axis_size][inner], on each of the outer*inner strided
 * rows (inner == 1: outer contiguous rows, the last dimension's softmax). Output qparams are
 * fixed: scale 1/256, zero point -128. Arithmetic is gemmlowp fixed point as TFLite Micro's
 * reference softmax and CMSIS-NN's arm_softmax_s8, bit for bit (5 integer bits in, 12 accumulator
 * bits); the parameters come from edgec.ops.softmax.softmax_params. Where those references are
 * undefined (row sum of exps >= 512, possible only with axis_size >= 512) every output of the row
 * is -128, the exact rounding of the last step. Not in place. Scratch: none (a call of at least
 * 256 elements keeps the exp() of each input difference in a 1 KiB table on the stack, computed
 * once per call). EDGEC_ARG_ERROR: a
 * NULL pointer, a dimension < 1, a tensor of 2^31 elements or more, input_left_shift outside
 * 0..31, a negative multiplier or a diff_min below -floor(31 * 2^26 / 2^input_left_shift).
 */
edgec_status edgec_softmax_axis_s8(const edgec_softmax_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_softmax_axis_s8 for inner == 1 only (the last dimension's softmax: outer contiguous rows),
 * the same bytes without the strided rows' code, so a program whose softmaxes all run over the
 * last axis links only this. EDGEC_ARG_ERROR as edgec_softmax_axis_s8's, and for inner != 1.
 */
edgec_status edgec_softmax_s8(const edgec_softmax_desc *desc, const int8_t *input, int8_t *output);

/* Descriptor of edgec_log_softmax_s8 (fields from edgec.ops.softmax.log_softmax_desc). */
/* generated from edgec/ops/softmax.py: edgec_log_softmax_desc */
typedef struct {
    int32_t outer;
    int32_t axis_size; /* 1..4095: TFLite's Q12.19 sum of exps overflows at 4096 */
    int32_t inner;
    int32_t input_multiplier; /* PreprocessLogSoftmaxScalingExp (beta 1, 5 integer bits) */
    int32_t input_left_shift;
    int32_t reverse_scaling_divisor;
    int32_t reverse_scaling_right_shift;
    int32_t diff_min; /* -CalculateInputRadius(5, input_left_shift) */
} edgec_log_softmax_desc;
/* end of edgec_log_softmax_desc */

/*
 * log_softmax over the middle axis of [outer][axis_size][inner], bit-exact with TFLite's int8
 * LOG_SOFTMAX (reference_integer_ops::LogSoftmax / reference_ops::LogSoftmaxQuantized): gemmlowp
 * exp of Q5.26 differences summed in Q12.19, log_x_for_x_greater_than_or_equal_to_1 into Q5.26,
 * y = clamp(RoundingDivideByPOT(diff_q5 - log_sum, 22) + 127) where the difference passes the
 * adjusted diff_min, else -128. Output scale 16/256, zero point 127. Not in place. Scratch:
 * none. EDGEC_ARG_ERROR: a NULL pointer, a dimension < 1, axis_size > 4095, a tensor of 2^31
 * elements or more, shifts outside 0..31, a negative multiplier or divisor, diff_min outside
 * [-floor(31 * 2^26 / 2^input_left_shift), 0].
 */
edgec_status edgec_log_softmax_s8(const edgec_log_softmax_desc *desc, const int8_t *input, int8_t *output);

/* Descriptor of edgec_masked_softmax_s8 (fields from edgec.ops.softmax.masked_softmax_desc). */
/* generated from edgec/ops/softmax.py: edgec_masked_softmax_desc */
typedef struct {
    int32_t rows; /* contiguous rows of row_size int8 values */
    int32_t row_size;
    int32_t mask_rows;        /* row r reads mask row r % mask_rows; rows % mask_rows == 0 */
    const uint8_t *mask;      /* [mask_rows][row_size] in flash: non-zero where the element takes part */
    int32_t input_multiplier; /* edgec.ops.softmax.softmax_params: the three fields */
    int32_t input_left_shift;
    int32_t diff_min;
} edgec_masked_softmax_desc;
/* end of edgec_masked_softmax_desc */

/*
 * Attention's softmax with a constant mask (SDPA attn_mask / is_causal): edgec_softmax_s8's
 * arithmetic on each row among the elements its mask row keeps (their maximum, their sum of
 * exps), every masked element -128 (probability 0); a row keeping nothing is all -128.
 * Output scale 1/256, zero point -128. EDGEC_ARG_ERROR for NULL pointers, rows or row_size < 1,
 * mask_rows < 1 or not dividing rows, and the parameters edgec_softmax_s8 refuses. Scratch: none.
 */
edgec_status edgec_masked_softmax_s8(const edgec_masked_softmax_desc *desc, const int8_t *input, int8_t *output);

/* Descriptor of edgec_input_masked_softmax_s8 (fields from edgec.ops.softmax.input_masked_softmax_desc). */
/* generated from edgec/ops/softmax.py: edgec_input_masked_softmax_desc */
typedef struct {
    int32_t rows; /* contiguous rows of row_size int8 values */
    int32_t row_size;
    int32_t rows_per_mask; /* row r reads mask row r / rows_per_mask; rows % rows_per_mask == 0 */
    int32_t ignore;        /* 1: a non-zero mask byte drops its key (key_padding_mask); 0: it keeps it */
    int32_t keep_rows;     /* 0: no constant mask; else row r reads keep row r % keep_rows */
    /* [keep_rows][row_size] in flash, or NULL: a constant mask (causal) an element must pass too */
    const uint8_t *keep;
    int32_t input_multiplier; /* edgec.ops.softmax.softmax_params: the three fields */
    int32_t input_left_shift;
    int32_t diff_min;
} edgec_input_masked_softmax_desc;
/* end of edgec_input_masked_softmax_desc */

/*
 * Attention's softmax with a key mask read at run time (nn.MultiheadAttention's key_padding_mask,
 * or a bool attn_mask, given as a model input of one byte per key): edgec_masked_softmax_s8's
 * rows, row r reading mask row r / rows_per_mask (scores [B][..][S], mask [B][S]); a key takes part
 * where its byte is non-zero, or zero with ignore = 1 (key_padding_mask: True pads), and, with
 * keep_rows > 0, where byte col of constant row r % keep_rows of keep is non-zero too (a causal
 * attn_mask added to the key_padding_mask). Masked elements -128, a row keeping nothing all -128.
 * EDGEC_ARG_ERROR for NULL pointers (keep: when keep_rows > 0), rows or row_size < 1, rows_per_mask
 * < 1 or not dividing rows, keep_rows < 0 or not dividing rows, ignore not 0 or 1, and the
 * parameters edgec_softmax_s8 refuses. Scratch: none.
 */
edgec_status edgec_input_masked_softmax_s8(const edgec_input_masked_softmax_desc *desc, const int8_t *input,
                                           const int8_t *mask, int8_t *output);

/* Descriptor of edgec_argmax_s8 (fields from edgec.ops.argmax.argmax_desc). */
/* generated from edgec/ops/argmax.py: edgec_argmax_desc */
typedef struct {
    int32_t outer; /* the input viewed as [outer][axis_size][inner], contiguous */
    int32_t axis_size;
    int32_t inner;
} edgec_argmax_desc;
/* end of edgec_argmax_desc */

/*
 * torch.argmax(x, dim) of int8 values: output[o][i] = the first a with input[o][a][i] the largest
 * of its row, as int32 ([outer][inner], contiguous). EDGEC_ARG_ERROR for NULL pointers, a dimension
 * < 1 or 2^31 elements or more. Scratch: none.
 */
edgec_status edgec_argmax_s8(const edgec_argmax_desc *desc, const int8_t *input, int32_t *output);

/* Descriptor of edgec_topk_s8 (fields from edgec.ops.argmax.topk_desc). */
/* generated from edgec/ops/argmax.py: edgec_topk_desc */
typedef struct {
    int32_t outer; /* the input viewed as [outer][axis_size][inner], contiguous */
    int32_t axis_size;
    int32_t inner;
    int32_t k;       /* 1..axis_size: the output is [outer][k][inner] */
    int32_t largest; /* 1: the k largest, in descending order; 0: the k smallest, ascending */
} edgec_topk_desc;
/* end of edgec_topk_desc */

/*
 * torch.topk(x, k, dim, largest) of int8 values: for each [o][i], the k largest (largest = 1, in
 * descending order) or smallest (0, ascending) values along the axis, equal values in index order;
 * values[o][j][i] (int8, the input's bytes) and indices[o][j][i] (int32), either pointer NULL when
 * that output is not wanted. EDGEC_ARG_ERROR for NULL desc/input, both outputs NULL, a dimension
 * < 1, k outside 1..axis_size, largest not 0 or 1, or 2^31 elements or more. Scratch: none.
 */
edgec_status edgec_topk_s8(const edgec_topk_desc *desc, const int8_t *input, int8_t *values, int32_t *indices);

/* Descriptor of edgec_embedding_s8 (fields from edgec.ops.embedding). */
/* generated from edgec/ops/embedding.py: edgec_embedding_desc */
typedef struct {
    int32_t count;       /* ids to look up; the output is [count][dim] */
    int32_t rows;        /* table rows: an id is clamped to [0, rows - 1] */
    int32_t dim;         /* int8 values per row */
    const int8_t *table; /* [rows][dim], quantized at the output's qparams */
} edgec_embedding_desc;
/* end of edgec_embedding_desc */

/*
 * nn.Embedding over int32 token ids: output[i][:] = table[clamp(ids[i], 0, rows - 1)][:] for i <
 * count (int8 rows of dim values, the table quantized at the output's qparams at compile time). An
 * id outside [0, rows) reads the nearest row: defined, never outside the table. EDGEC_ARG_ERROR
 * for NULL pointers or a dimension < 1. Scratch: none.
 */
edgec_status edgec_embedding_s8(const edgec_embedding_desc *desc, const int32_t *ids, int8_t *output);

/* ==== end of the lut family ================================================================= */

/* ==== Data movement and reductions (runtime_c/src/movement/, golden: edgec/ops/movement.py) ====
 * Every kernel below takes one descriptor made at compile time by edgec.ops.movement (its
 * <kernel>_desc functions), moves or reduces int8 values of flat buffers, and returns
 * EDGEC_ARG_ERROR without writing anything for a NULL pointer or an invalid descriptor. None may
 * run in place (the output must not overlap the input). Scratch: none. Input and output share
 * scale and zero point, except for the requantizing sum and mean of edgec_reduce_s8. */

#define EDGEC_MAX_DIMS 6

/*
 * Strided copy: for every index (i_0, ..., i_{rank-1}) < dims,
 *   output[output_start + sum_k i_k * output_strides[k]] = input[input_start + sum_k i_k * input_strides[k]].
 * Strides and starts are in elements. Input strides may be anything: 0 repeats (expand), negative
 * walks backwards (flip, slices with negative steps). Permute, slice, cat (one call per input,
 * each writing its block of the output), expand and channel shuffle are all this one kernel; the
 * loops come simplified (edgec.ops.movement.simplify_copy), the last one innermost, so a
 * contiguous run is copied a word at a time (16 bytes per vector on Helium) and a repeated
 * element is a fill. Other output bytes are left alone.
 * EDGEC_ARG_ERROR: rank outside 1..EDGEC_MAX_DIMS, a dim < 1, or an access outside
 * input[0, input_elements) or output[0, output_elements). The output strides must map distinct
 * indices to distinct elements (edgec's descriptors do; not checked).
 */
/* generated from edgec/ops/movement.py: edgec_copy_desc */
typedef struct {
    int32_t rank;
    int32_t dims[EDGEC_MAX_DIMS];
    int32_t input_strides[EDGEC_MAX_DIMS];
    int32_t output_strides[EDGEC_MAX_DIMS];
    int32_t input_start;
    int32_t output_start;
    int32_t input_elements;  /* size of the input buffer */
    int32_t output_elements; /* size of the output buffer */
} edgec_copy_desc;
/* end of edgec_copy_desc */

edgec_status edgec_copy_s8(const edgec_copy_desc *desc, const int8_t *input, int8_t *output);

/*
 * Constant padding of a contiguous tensor of input_dims: pad_before[k] and pad_after[k] (>= 0)
 * elements of value `fill` (int8, already quantized) on each side of dim k; the output is
 * contiguous, (input_dims[k] + pad_before[k] + pad_after[k]) along dim k. Written in one pass in
 * memory order (each pad run filled, each input row copied), no separate fill of the whole output.
 * EDGEC_ARG_ERROR: rank outside 1..EDGEC_MAX_DIMS, a dim < 1, a negative pad, fill not int8.
 */
/* generated from edgec/ops/movement.py: edgec_pad_desc */
typedef struct {
    int32_t rank;
    int32_t input_dims[EDGEC_MAX_DIMS];
    int32_t pad_before[EDGEC_MAX_DIMS];
    int32_t pad_after[EDGEC_MAX_DIMS];
    int32_t fill;
} edgec_pad_desc;
/* end of edgec_pad_desc */

edgec_status edgec_pad_s8(const edgec_pad_desc *desc, const int8_t *input, int8_t *output);

/*
 * Nearest-neighbour upsampling of an NHWC tensor by integer factors:
 *   output[n][y][x][c] = input[n][y / scale_h][x / scale_w][c], output [N][H*scale_h][W*scale_w][C]
 * (PyTorch interpolate(mode='nearest') at integer scales = TFLite RESIZE_NEAREST_NEIGHBOR with
 * align_corners and half_pixel_centers false). Each output row is built once, then copied.
 * EDGEC_ARG_ERROR: a dim or scale < 1.
 */
/* generated from edgec/ops/movement.py: edgec_upsample_nearest_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t channels;
    int32_t scale_h;
    int32_t scale_w;
} edgec_upsample_nearest_desc;
/* end of edgec_upsample_nearest_desc */

edgec_status edgec_upsample_nearest_s8(const edgec_upsample_nearest_desc *desc, const int8_t *input, int8_t *output);

/*
 * Bilinear resize of an NHWC tensor [N][input_h][input_w][C] to [N][output_h][output_w][C], TFLite's
 * int8 RESIZE_BILINEAR (reference_ops::ResizeBilinearInteger, default double rounding), bit for bit.
 * y_table holds output_h triples (y0, y1, fy) and x_table output_w triples (x0, x1, fx), from
 * edgec.ops.movement.bilinear_axis_table (TFLite's 10-bit positions: half_pixel_centers for
 * PyTorch's align_corners=False, or align_corners). For each output element:
 *   v = in[y0][x0]*(1024-fy)*(1024-fx) + in[y1][x0]*fy*(1024-fx) + in[y0][x1]*(1024-fy)*fx
 *     + in[y1][x1]*fy*fx;  output = (v + (v > 0 ? 2^19 : -2^19)) / 2^20 (C division).
 * EDGEC_ARG_ERROR: a dim < 1, NULL tables, a table index outside the input, a fraction outside
 * -1024..1024, or a negative one with y0 != y1 (x0 != x1): TFLite's tables never have those.
 */
/* generated from edgec/ops/movement.py: edgec_resize_bilinear_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t channels;
    int32_t output_h;
    int32_t output_w;
    const int16_t *y_table; /* output_h * 3 */
    const int16_t *x_table; /* output_w * 3 */
} edgec_resize_bilinear_desc;
/* end of edgec_resize_bilinear_desc */

edgec_status edgec_resize_bilinear_s8(const edgec_resize_bilinear_desc *desc, const int8_t *input, int8_t *output);

/*
 * Reduction over any set of axes (edgec.ops.movement.reduce_desc): the output, contiguous, has one
 * element per index of the kept loops (kept_dims, read with kept_strides); each reduces the input
 * elements its reduced loops reach (reduced_dims, reduced_strides; strides in elements, >= 0).
 * kept_rank may be 0 (a single output), reduced_rank 0 (each output reduces one element).
 *   EDGEC_REDUCE_MAX / _MIN: clamp(max / min of the raw int8 values, act_min, act_max);
 *   EDGEC_REDUCE_SUM: clamp(requantize(sum + sum_offset, multiplier, shift) + output_offset,
 *     act_min, act_max) -- TFLite Micro's int8 SUM and MEAN (reference_ops::QuantizedMeanOrSum):
 *     sum_offset = -input_zero_point * (reduced elements), and for a mean the multiplier and
 *     shift already hold the division by the element count.
 * EDGEC_ARG_ERROR: unknown op, ranks outside 0..EDGEC_MAX_DIMS, a dim < 1, a negative stride,
 * more than 2^23 reduced elements, a shift outside -31..31, a negative multiplier, act bounds
 * outside int8 or crossed.
 */
enum {
    EDGEC_REDUCE_MAX = 0,
    EDGEC_REDUCE_MIN = 1,
    EDGEC_REDUCE_SUM = 2
};

/* generated from edgec/ops/movement.py: edgec_reduce_desc */
typedef struct {
    int32_t op;
    int32_t kept_rank;
    int32_t kept_dims[EDGEC_MAX_DIMS];
    int32_t kept_strides[EDGEC_MAX_DIMS];
    int32_t reduced_rank;
    int32_t reduced_dims[EDGEC_MAX_DIMS];
    int32_t reduced_strides[EDGEC_MAX_DIMS];
    int32_t sum_offset;
    int32_t multiplier;
    int32_t shift;
    int32_t output_offset; /* output zero point (sum) */
    int32_t act_min;
    int32_t act_max;
} edgec_reduce_desc;
/* end of edgec_reduce_desc */

edgec_status edgec_reduce_s8(const edgec_reduce_desc *desc, const int8_t *input, int8_t *output);

/* ==== end of data movement and reductions ==== */

/* ==== int16 (16x8) kernels ============================================================ * int16 activations (symmetric: zero point 0, no offsets), int8 weights symmetric per output
 * channel, int64 biases: TFLite's 16x8 scheme, CMSIS-NN's _s16 kernels. Goldens and descriptor
 * values: edgec.ops.int16 (*_desc functions give every field). The output stage of conv,
 * depthwise and fully connected, "requantize_s64" below, is CMSIS-NN's arm_nn_requantize_s64 with
 * REDUCE_MULTIPLIER (= TFLite's int64 MultiplyByQuantizedMultiplier):
 *   x = acc + bias[c] (exact int64 sum of int16*int8 products plus the bias; the sum saturated
 *       to [-2^47, 2^47), the input range both libraries document),
 *   m = multiplier[c] < 0x7FFF0000 ? (multiplier[c] + 2^15) >> 16 : 0x7FFF,
 *   y = (((x * m) >> (14 - shift[c])) + 1) >> 1,  out = clamp(y, act_min, act_max).
 * multiplier[c] >= 0 and shift[c] in [-31, 7] (TFLite's DCHECKs), act_min <= act_max within
 * int16; otherwise, and for NULL pointers (bias excepted: NULL = no bias), non-positive dims or
 * element counts beyond int32, the kernels return EDGEC_ARG_ERROR. None runs in place.
 */

/*
 * Convolution (CMSIS-NN arm_convolve_s16, TFLite reference_integer_ops::ConvPerChannel int16),
 * NHWC, with groups: output channel o of group g = o / (output_c / groups) sums
 * input[n][oy*stride_h - pad_top + ky*dilation_h][ox*stride_w - pad_left + kx*dilation_w]
 * [g*Cg + i] * filter[o][ky][kx][i] (Cg = input_c / groups; taps outside the input add 0), then
 * requantize_s64. groups must divide input_c and output_c; stride, dilation >= 1, pads >= 0.
 */
/* generated from edgec/ops/int16.py: edgec_conv_s16_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    int32_t output_h;
    int32_t output_w;
    int32_t output_c;
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t groups;
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* [output_c][kernel_h][kernel_w][input_c / groups] */
    const int64_t *bias;       /* [output_c] or NULL */
    const int32_t *multiplier; /* [output_c] */
    const int32_t *shift;      /* [output_c] */
} edgec_conv_s16_desc;
/* end of edgec_conv_s16_desc */

edgec_status edgec_conv_s16(const edgec_conv_s16_desc *desc, const int16_t *input, int16_t *output);

/*
 * edgec_conv_s16 with the DSP extension: per output pixel and group, the K = kernel_h*kernel_w*Cg
 * inputs are gathered into scratch (required, word-aligned, EDGEC_CONV_S16_DSP_SCRATCH_BYTES(K)
 * bytes) in SMLALD order, then each output channel takes two SMLALD per four weights. Same
 * arithmetic and checks (misaligned scratch: EDGEC_ARG_ERROR).
 */
/* generated from edgec/ops/int16.py: EDGEC_CONV_S16_DSP_SCRATCH_BYTES */
#define EDGEC_CONV_S16_DSP_SCRATCH_BYTES(k) (4 * (((k) + 1) / 2))
/* end of EDGEC_CONV_S16_DSP_SCRATCH_BYTES */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_conv_s16_dsp(const edgec_conv_s16_desc *desc, const int16_t *input, int16_t *output,
                                int16_t *scratch);
#endif

/*
 * edgec_conv_s16 with Helium: per output pixel and group, the K inputs are gathered into scratch
 * (required, EDGEC_CONV_S16_DSP_SCRATCH_BYTES(K) bytes, any int16 alignment; a 1x1 tap inside
 * the input is read in place), then four output channels at a time take one VLDRH, four VLDRB.S16
 * and four VMLALDAVA per eight inputs (VCTP16-predicated tail). Same arithmetic and checks.
 */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_conv_s16_mve(const edgec_conv_s16_desc *desc, const int16_t *input, int16_t *output,
                                int16_t *scratch);
#endif

/*
 * Depthwise convolution (CMSIS-NN arm_depthwise_conv_s16, TFLite
 * reference_integer_ops::DepthwiseConvPerChannel int16), NHWC: output channel
 * o = c * ch_mult + m (output_c = input_c * ch_mult) sums
 * input[n][oy*stride_h - pad_top + ky*dilation_h][ox*stride_w - pad_left + kx*dilation_w][c]
 * * filter[ky][kx][o] (taps outside the input add 0), then requantize_s64.
 */
/* generated from edgec/ops/int16.py: edgec_depthwise_conv_s16_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    int32_t output_h;
    int32_t output_w;
    int32_t ch_mult;
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* [kernel_h][kernel_w][input_c * ch_mult] */
    const int64_t *bias;       /* [input_c * ch_mult] or NULL */
    const int32_t *multiplier; /* [input_c * ch_mult] */
    const int32_t *shift;      /* [input_c * ch_mult] */
} edgec_depthwise_conv_s16_desc;
/* end of edgec_depthwise_conv_s16_desc */

edgec_status edgec_depthwise_conv_s16(const edgec_depthwise_conv_s16_desc *desc, const int16_t *input, int16_t *output);

/*
 * edgec_depthwise_conv_s16 with Helium: eight channels a group, each tap one VLDRH, one VLDRB.S16
 * and VMULLB/VMULLT into the 32-bit sums of the even and odd channels (exact for windows of at
 * most 511 taps), then the 64-bit output stage in 32-bit lanes (exact; extreme biases or
 * multipliers channel by channel in scalar). ch_mult above 1, fewer than 8 channels or larger
 * windows take the portable loops. Same arithmetic and checks; no scratch.
 */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_depthwise_conv_s16_mve(const edgec_depthwise_conv_s16_desc *desc, const int16_t *input,
                                          int16_t *output);
#endif

/*
 * edgec_depthwise_conv_s16 with the DSP extension: four channels a group, each tap two words of
 * int16 inputs and one word of four int8 weights (SXTB16 into pairs) into four SMLABB/SMLATB/
 * SMLABT/SMLATT 32-bit sums (exact for windows of at most 511 taps), then the portable kernel's
 * 64-bit output stage channel by channel. ch_mult above 1, fewer than 4 channels or larger
 * windows take the portable loops. Same arithmetic and checks; no scratch.
 */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_depthwise_conv_s16_dsp(const edgec_depthwise_conv_s16_desc *desc, const int16_t *input,
                                          int16_t *output);
#endif

/*
 * Fully connected (CMSIS-NN arm_fully_connected_s16 / arm_nn_vec_mat_mult_t_s16, TFLite
 * reference_integer_ops::FullyConnected int16; here per output channel):
 * output[b][o] = requantize_s64(sum_k input[b][k] * filter[o][k]).
 */
/* generated from edgec/ops/int16.py: edgec_fully_connected_s16_desc */
typedef struct {
    int32_t batches;
    int32_t input_c;
    int32_t output_c;
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* [output_c][input_c] */
    const int64_t *bias;       /* [output_c] or NULL */
    const int32_t *multiplier; /* [output_c] */
    const int32_t *shift;      /* [output_c] */
} edgec_fully_connected_s16_desc;
/* end of edgec_fully_connected_s16_desc */

edgec_status edgec_fully_connected_s16(const edgec_fully_connected_s16_desc *desc, const int16_t *input,
                                       int16_t *output);

/*
 * edgec_fully_connected_s16 with the DSP extension: each input row is copied into scratch
 * (required, word-aligned, EDGEC_FULLY_CONNECTED_S16_DSP_SCRATCH_BYTES(input_c) bytes) in SMLALD
 * order, then two SMLALD per four weights. Same arithmetic and checks.
 */
/* generated from edgec/ops/int16.py: EDGEC_FULLY_CONNECTED_S16_DSP_SCRATCH_BYTES */
#define EDGEC_FULLY_CONNECTED_S16_DSP_SCRATCH_BYTES(input_c) (4 * (((input_c) + 1) / 2))
/* end of EDGEC_FULLY_CONNECTED_S16_DSP_SCRATCH_BYTES */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_fully_connected_s16_dsp(const edgec_fully_connected_s16_desc *desc, const int16_t *input,
                                           int16_t *output, int16_t *scratch);
#endif

/* edgec_fully_connected_s16 with Helium: the input row read in place, four output channels at a
 * time as edgec_conv_s16_mve (no scratch). Same arithmetic and checks. */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_fully_connected_s16_mve(const edgec_fully_connected_s16_desc *desc, const int16_t *input,
                                           int16_t *output);
#endif

/*
 * Add and mul with NumPy broadcasting (CMSIS-NN arm_elementwise_add_s16 / arm_elementwise_mul_s16,
 * TFLite reference_integer_ops Add / Mul int16; edgec.ops.int16.add_s16_desc / mul_s16_desc).
 * Output element (i_0, ..., i_{num_dims-1}), stored contiguously, reads input k at
 * sum_d i_d * strides_k[d] (strides in elements, 0 where broadcast), as edgec_binary_desc.
 * requantize is arm_nn_requantize (double rounding, left shift saturating) as in edgec_binary_s8.
 *   add: a = requantize(x1 << left_shift, input1_multiplier, input1_shift), b likewise;
 *        y = clamp(requantize(a + b (wrapping in int32), output_multiplier, output_shift),
 *        act_min, act_max); TFLite's int16 left_shift is 15.
 *   mul: y = clamp(requantize(x1 * x2, output_multiplier, output_shift), act_min, act_max)
 *        (the input fields are unused).
 * EDGEC_ARG_ERROR: NULL pointers, num_dims outside 1..EDGEC_BINARY_MAX_DIMS, dims < 1, negative
 * strides, element counts or offsets beyond int32, left_shift outside 0..16, a negative
 * multiplier, a shift outside -31..31, act bounds outside int16 or crossed. May run in place
 * when the output is an input that is not broadcast (unit inner stride, same layout).
 */
/* generated from edgec/ops/int16.py: edgec_binary_s16_desc */
typedef struct {
    int32_t num_dims;
    int32_t dims[EDGEC_BINARY_MAX_DIMS];
    int32_t strides1[EDGEC_BINARY_MAX_DIMS];
    int32_t strides2[EDGEC_BINARY_MAX_DIMS];
    int32_t input1_multiplier;
    int32_t input1_shift;
    int32_t input2_multiplier;
    int32_t input2_shift;
    int32_t left_shift;
    int32_t output_multiplier;
    int32_t output_shift;
    int32_t act_min;
    int32_t act_max;
} edgec_binary_s16_desc;
/* end of edgec_binary_s16_desc */

edgec_status edgec_add_s16(const edgec_binary_s16_desc *desc, const int16_t *input1, const int16_t *input2,
                           int16_t *output);
edgec_status edgec_mul_s16(const edgec_binary_s16_desc *desc, const int16_t *input1, const int16_t *input2,
                           int16_t *output);

/*
 * Max and average pooling, NHWC (CMSIS-NN arm_max_pool_s16 / arm_avgpool_s16, TFLite
 * reference_integer_ops MaxPool / AveragePool int16; edgec.ops.int16.pool_s16_desc). The window
 * of output (oy, ox) starts at (oy*stride_h - pad_top, ox*stride_w - pad_left); only its
 * in-bounds taps are read.
 *   max: y = clamp(max of the taps, act_min, act_max) (count_include_pad, divisor_override unused);
 *   avg: y = clamp(trunc_div(sum > 0 ? sum + n/2 : sum - n/2, n), act_min, act_max), the sum
 *        exact in int64, n = divisor_override if > 0, else with count_include_pad PyTorch's
 *        count (the window clipped to the padded input), else the in-bounds taps (TFLite).
 * EDGEC_ARG_ERROR: NULL pointers, dims < 1, element counts beyond int32, a window entirely in
 * padding (pad >= filter or the last window past the input), count_include_pad not 0/1,
 * divisor_override outside 0..EDGEC_AVG_POOL2D_MAX_DIVISOR, act bounds outside int16 or crossed.
 * Not in place.
 */
/* generated from edgec/ops/int16.py: edgec_pool_s16_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t channels;
    int32_t output_h;
    int32_t output_w;
    int32_t filter_h;
    int32_t filter_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t count_include_pad;
    int32_t divisor_override;
    int32_t act_min;
    int32_t act_max;
} edgec_pool_s16_desc;
/* end of edgec_pool_s16_desc */

edgec_status edgec_max_pool_s16(const edgec_pool_s16_desc *desc, const int16_t *input, int16_t *output);
edgec_status edgec_avg_pool_s16(const edgec_pool_s16_desc *desc, const int16_t *input, int16_t *output);

/*
 * Table lookup with linear interpolation (TFLite LUTLookup for int16: TANH, LOGISTIC, GELU... on
 * a LUTPopulate<int16_t> table; edgec.ops.int16.lut_s16_desc builds it for any function):
 * index = 256 + (x >> 7), offset = x & 127,
 * y = int16(table[index] + ((int16(table[index + 1] - table[index]) * offset + 64) >> 7))
 * (int16() wraps, as TFLite's int16_t locals). EDGEC_ARG_ERROR: NULL pointers, size < 1.
 * May run in place.
 */
#define EDGEC_LUT_S16_SIZE 513
/* generated from edgec/ops/int16.py: edgec_lut_s16_desc */
typedef struct {
    int32_t size;         /* elements */
    const int16_t *table; /* EDGEC_LUT_S16_SIZE entries */
} edgec_lut_s16_desc;
/* end of edgec_lut_s16_desc */

edgec_status edgec_lut_s16(const edgec_lut_s16_desc *desc, const int16_t *input, int16_t *output);

/*
 * Square root of `size` int16 elements, correctly rounded in integers (edgec.ops.int16.sqrt_s16):
 *   y = min(((isqrt(4 * max(x, 0) * multiplier) >> half_shift) + 1) >> 1, 32767)
 * = round(sqrt(x * R)) (half up), R = s_in / s_out^2 = multiplier * 4^-half_shift; a negative x
 * gives 0. May run in place. EDGEC_ARG_ERROR: NULL pointers, size < 1, a negative multiplier,
 * half_shift outside 0..31.
 */
/* generated from edgec/ops/int16.py: edgec_sqrt_s16_desc */
typedef struct {
    int32_t size;       /* elements */
    int32_t multiplier; /* s_in / s_out^2 = multiplier * 4^-half_shift, multiplier in [0, 2^31) */
    int32_t half_shift; /* 0..31 */
} edgec_sqrt_s16_desc;
/* end of edgec_sqrt_s16_desc */

edgec_status edgec_sqrt_s16(const edgec_sqrt_s16_desc *desc, const int16_t *input, int16_t *output);

/*
 * Softmax over the middle axis of [outer, axis_size, inner] (TFLite reference_ops::SoftmaxInt16;
 * CMSIS-NN arm_softmax_s16 where its int32 steps do not overflow;
 * edgec.ops.int16.softmax_s16_desc):
 * output scale 1/32768, zero point 0. Per row, with lookup as edgec_lut_s16:
 *   e = lookup(max(requantize(x - max, input_multiplier, input_left_shift) + 32767, -32768),
 *       exp_lut);  sum = sum of e;  h = clz32(sum);
 *   r = lookup(min(((sum << (h - 1)) + 2^13) >> 14) - 98304, 32767), one_over_one_plus_x_lut);
 *   y = clamp((e * r + 2^(30 - h)) >> (31 - h), 0, 32767) (no rounding term when h = 31).
 * EDGEC_ARG_ERROR: NULL pointers, dims < 1, axis_size above EDGEC_SOFTMAX_S16_MAX_AXIS, element
 * counts beyond int32, a negative multiplier, a shift outside -31..31, an exp_lut with a negative
 * entry or entries 511/512 below 1 (then a row's sum could be 0). May run in place.
 */
#define EDGEC_SOFTMAX_S16_MAX_AXIS 65536
/* generated from edgec/ops/int16.py: edgec_softmax_s16_desc */
typedef struct {
    int32_t outer;
    int32_t axis_size;
    int32_t inner;
    int32_t input_multiplier;
    int32_t input_left_shift;
    const int16_t *exp_lut;                 /* EDGEC_LUT_S16_SIZE entries */
    const int16_t *one_over_one_plus_x_lut; /* EDGEC_LUT_S16_SIZE entries */
} edgec_softmax_s16_desc;
/* end of edgec_softmax_s16_desc */

edgec_status edgec_softmax_s16(const edgec_softmax_s16_desc *desc, const int16_t *input, int16_t *output);

/*
 * int8 <-> int16 requantization (TFLite QUANTIZE between int8 and int16: reference_ops::Requantize
 * with QuantizeMultiplier(s_in / s_out); edgec.ops.int16.requantize_s16_desc):
 * y = clamp(requantize(x + input_offset, multiplier, shift) + output_offset, output type's range),
 * requantize = arm_nn_requantize (double rounding, left shift saturating). input_offset =
 * -(input zero point) within the input type, output_offset = the output zero point within the
 * output type. EDGEC_ARG_ERROR: NULL pointers, size < 1, offsets out of those ranges, a negative
 * multiplier, a shift outside -31..31. Not in place.
 */
/* generated from edgec/ops/int16.py: edgec_requantize_s16_desc */
typedef struct {
    int32_t size;
    int32_t input_offset;
    int32_t multiplier;
    int32_t shift;
    int32_t output_offset;
} edgec_requantize_s16_desc;
/* end of edgec_requantize_s16_desc */

edgec_status edgec_requantize_s8_s16(const edgec_requantize_s16_desc *desc, const int8_t *input, int16_t *output);
edgec_status edgec_requantize_s16_s8(const edgec_requantize_s16_desc *desc, const int16_t *input, int8_t *output);

/* ==== end of int16 (16x8) kernels ==== */

/* ==== int4-weight kernels (runtime_c/src/{fc,conv,depthwise}/edgec_*_s4.c; golden: edgec/ops/int4.py) ====
 * int8 activations, int4 weights symmetric per output channel (values -8..7), int32 bias:
 * CMSIS-NN's _s4 kernels' scheme (arm_fully_connected_s4, arm_convolve_s4, arm_depthwise_conv_s4)
 * with per-channel requantization. The filter is packed as CMSIS-NN packs it: the weights in
 * the order each descriptor gives, as one flat stream, element i in byte i / 2, the low nibble
 * first (an odd count leaves the last high nibble unused). The arithmetic is the int8 kernels':
 *   acc = bias[o] + sum w * (x + input_offset)   (int32, wrapping like edgec_fully_connected_s8),
 *   y   = clamp(requantize(acc, multiplier[o], shift[o]) + output_offset, act_min, act_max).
 * Descriptor values: edgec.ops.int4.*_desc. EDGEC_ARG_ERROR without writing anything for a NULL
 * pointer (bias excepted: NULL = no bias), non-positive dims, element counts beyond int32, an
 * input_offset outside [-127, 128], an output_offset or act_min <= act_max outside int8, a shift
 * outside [-31, 31]. Scratch: none. None runs in place.
 */

/* Fully connected: output[b][o] = y(sum_k input[b][k] * filter[o * input_c + k]). */
/* generated from edgec/ops/int4.py: edgec_fully_connected_s4_desc */
typedef struct {
    int32_t batches;
    int32_t input_c;
    int32_t output_c;
    int32_t input_offset;
    int32_t output_offset;
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* packed int4 [output_c][input_c] */
    const int32_t *bias;       /* [output_c] or NULL */
    const int32_t *multiplier; /* [output_c] */
    const int32_t *shift;      /* [output_c] */
} edgec_fully_connected_s4_desc;
/* end of edgec_fully_connected_s4_desc */

edgec_status edgec_fully_connected_s4(const edgec_fully_connected_s4_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_fully_connected_s4 with the DSP extension, for an even input_c of at least 8: each input
 * row is widened into scratch (required, word-aligned, EDGEC_FULLY_CONNECTED_S4_DSP_SCRATCH_BYTES
 * (input_c) bytes) in SMLAD pair order, then three rows at a time, four AND and four SMLAD per
 * eight packed weights (a word). Same arithmetic and checks (an odd input_c or one below 8, a
 * NULL or misaligned scratch: EDGEC_ARG_ERROR).
 */
/* generated from edgec/ops/int4.py: EDGEC_FULLY_CONNECTED_S4_DSP_SCRATCH_BYTES */
#define EDGEC_FULLY_CONNECTED_S4_DSP_SCRATCH_BYTES(input_c) (2 * ((input_c) / 8 * 8))
/* end of EDGEC_FULLY_CONNECTED_S4_DSP_SCRATCH_BYTES */
#define EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT 65536
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_fully_connected_s4_dsp(const edgec_fully_connected_s4_desc *desc, const int8_t *input,
                                          int8_t *output, int16_t *scratch);
#endif

/*
 * edgec_fully_connected_s4 with Helium, for an even input_c: `bias` (required) holds the input
 * offset folded in, bias[o] + input_offset * sum_k w[o][k] modulo 2^32 (edgec.ops.int4's
 * mve_folded_bias); each input row is deinterleaved into scratch (required,
 * EDGEC_FULLY_CONNECTED_S4_MVE_SCRATCH_BYTES(input_c) bytes), then four rows at a time, per 16
 * packed bytes of each a VSHL, a VAND and two VMLADAVA. Same arithmetic and checks (an odd
 * input_c, a NULL bias or scratch: EDGEC_ARG_ERROR).
 */
/* generated from edgec/ops/int4.py: EDGEC_FULLY_CONNECTED_S4_MVE_SCRATCH_BYTES */
#define EDGEC_FULLY_CONNECTED_S4_MVE_SCRATCH_BYTES(input_c) (32 * (((input_c) + 31) / 32))
/* end of EDGEC_FULLY_CONNECTED_S4_MVE_SCRATCH_BYTES */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_fully_connected_s4_mve(const edgec_fully_connected_s4_desc *desc, const int8_t *input,
                                          int8_t *output, int8_t *scratch);
#endif

/*
 * Convolution, NHWC, with groups: output channel o of group g = o / (output_c / groups) sums
 * (input[n][oy*stride_h - pad_top + ky*dilation_h][ox*stride_w - pad_left + kx*dilation_w]
 * [g*Cg + i] + input_offset) * filter[o][ky][kx][i] (Cg = input_c / groups; taps outside the
 * input add 0). groups must divide input_c and output_c; stride, dilation >= 1, pads >= 0.
 */
/* generated from edgec/ops/int4.py: edgec_conv_s4_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    int32_t output_h;
    int32_t output_w;
    int32_t output_c;
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t groups;
    int32_t input_offset;
    int32_t output_offset;
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* packed int4 [output_c][kernel_h][kernel_w][input_c / groups] */
    const int32_t *bias;       /* [output_c] or NULL */
    const int32_t *multiplier; /* [output_c] */
    const int32_t *shift;      /* [output_c] */
} edgec_conv_s4_desc;
/* end of edgec_conv_s4_desc */

edgec_status edgec_conv_s4(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_conv_s4 with the DSP extension, for K = kernel_h * kernel_w * input_c / groups even and at
 * least 8, or odd in an ungrouped layer (each row read from the byte of its first nibble against
 * the column with a 0 appended or prepended): per output pixel and group, the receptive field is
 * gathered into scratch (required, word-aligned, EDGEC_CONV_S4_DSP_SCRATCH_BYTES(K) bytes) and
 * widened, then edgec_fully_connected_s4_dsp's rows run over it; an ungrouped layer with K a
 * multiple of 8 up to 256 (or odd) takes two pixels at a time. Same arithmetic and checks (another
 * K, a NULL or misaligned scratch: EDGEC_ARG_ERROR).
 */
/* generated from edgec/ops/int4.py: EDGEC_CONV_S4_DSP_SCRATCH_BYTES */
#define EDGEC_CONV_S4_DSP_SCRATCH_BYTES(k) ((k) % 2 ? 88 * (((k) + 8) / 8) + 2 * (k) + 12 : 4 * ((k) / 8 * 8) + 2 * (k))
/* end of EDGEC_CONV_S4_DSP_SCRATCH_BYTES */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_conv_s4_dsp(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output, int16_t *scratch);
#endif

/*
 * edgec_conv_s4 with Helium, for K up to EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT (an odd K: an
 * ungrouped layer, each row read from the byte of its first nibble against the column with a 0
 * appended or prepended): `bias`
 * (required) holds the input offset folded in over the whole window, bias[o] + input_offset *
 * sum of row o's weights modulo 2^32 (edgec.ops.int4's mve_folded_bias); per output pixel and group,
 * the receptive field is gathered into scratch (required, EDGEC_CONV_S4_MVE_SCRATCH_BYTES(K)
 * bytes) and deinterleaved, then edgec_fully_connected_s4_mve's rows run over it; an ungrouped
 * layer takes two pixels at a time. Same arithmetic
 * and checks (another K, a NULL bias or scratch: EDGEC_ARG_ERROR).
 */
/* generated from edgec/ops/int4.py: EDGEC_CONV_S4_MVE_SCRATCH_BYTES */
#define EDGEC_CONV_S4_MVE_SCRATCH_BYTES(k) ((k) % 2 ? 192 * (((k) + 32) / 32) + 32 : 128 * (((k) + 31) / 32))
/* end of EDGEC_CONV_S4_MVE_SCRATCH_BYTES */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_conv_s4_mve(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch);
#endif

/*
 * edgec_conv_s4 through an int8 packed kernel, for an ungrouped layer (edgec builds choose them
 * where the unpacked filter is small: RGB and one-channel stems, pointwise layers and 3x3 ones of
 * few channels): the filter is unpacked
 * once per call into scratch in that kernel's layout, which it then runs. Same arithmetic (the
 * int4 values are int8 values); the checks of that kernel and edgec_conv_s4's (groups other than
 * 1, a NULL bias or scratch, a misaligned scratch: EDGEC_ARG_ERROR). Scratch (required,
 * word-aligned, apart from input and output): the unpacked filter, then the int8 kernel's.
 *  - _dsp_unpacked: edgec_conv_s8_dsp_wide's filter (int16 taps,
 *    EDGEC_CONV_S4_DSP_UNPACKED_FILTER_BYTES(K, output_c) bytes), then
 *    EDGEC_CONV_S8_DSP_SCRATCH_BYTES(K, input_c) bytes; `bias` is that kernel's channel table.
 *  - _dsp_unpacked_narrow: edgec_conv_s8_dsp's filter (int8 taps,
 *    EDGEC_CONV_S4_DSP_NARROW_FILTER_BYTES(K, output_c) bytes), then
 *    EDGEC_CONV_S8_DSP_SCRATCH_BYTES(K, input_c) bytes; `bias` is that kernel's folded bias.
 *  - _mve_unpacked: edgec_conv_s8_mve's filter (EDGEC_CONV_S4_MVE_UNPACKED_FILTER_BYTES(T,
 *    output_c) bytes, T = 48 where its rows are padded per window row (kernel_h 3, kernel_w *
 *    input_c 8 to 15, output_c a multiple of 4), else K), then EDGEC_CONV_S8_MVE_SCRATCH_BYTES(T)
 *    bytes; `bias` is that kernel's folded bias, `blocks` and `direct` edgec_conv_s8_mve_with's.
 */
/* generated from edgec/ops/int4.py: EDGEC_CONV_S4_DSP_UNPACKED_FILTER_BYTES */
#define EDGEC_CONV_S4_DSP_UNPACKED_FILTER_BYTES(k, c_out) (4 * (((c_out) + 1) / 2) * (((k) + 3) / 4 * 4))
/* end of EDGEC_CONV_S4_DSP_UNPACKED_FILTER_BYTES */
/* generated from edgec/ops/int4.py: EDGEC_CONV_S4_DSP_NARROW_FILTER_BYTES */
#define EDGEC_CONV_S4_DSP_NARROW_FILTER_BYTES(k, c_out) (2 * (((c_out) + 1) / 2) * (((k) + 3) / 4 * 4))
/* end of EDGEC_CONV_S4_DSP_NARROW_FILTER_BYTES */
/* generated from edgec/ops/int4.py: EDGEC_CONV_S4_MVE_UNPACKED_FILTER_BYTES */
#define EDGEC_CONV_S4_MVE_UNPACKED_FILTER_BYTES(taps, c_out) (4 * (((c_out) + 3) / 4) * (((taps) + 15) / 16 * 16))
/* end of EDGEC_CONV_S4_MVE_UNPACKED_FILTER_BYTES */
#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_conv_s4_dsp_unpacked(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output,
                                        int8_t *scratch);
edgec_status edgec_conv_s4_dsp_unpacked_narrow(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output,
                                               int8_t *scratch);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_conv_s4_mve_unpacked(const edgec_conv_s4_desc *desc, const edgec_conv_mve_routine *blocks,
                                        const edgec_conv_mve_routine *direct, const int8_t *input, int8_t *output,
                                        int8_t *scratch);
#endif

/*
 * Convolution with a small receptive field, one function per window shape (kernel_h x kernel_w
 * x input_c: 3x3x1, 3x3x2, 3x3x3, 1x1x4, 1x1x8, 1x1x12, 1x1x16), NHWC, groups 1, dilation 1:
 * output[n][oy][ox][o] sums (input[n][oy*stride_h - pad_top + ky][ox*stride_w - pad_left + kx][i]
 * + input_offset) * w[o][ky][kx][i] (taps outside the input add 0), as edgec_conv_s8. The
 * window is compiled into each function (the descriptor's kernel_h, kernel_w and input_c must
 * equal it): the first convolution of an image model and pointwise layers of few channels on cores
 * without the packed kernels, where edgec_conv_s8 walks each window at run time. Constants
 * (word-aligned):
 *  - filter: per output channel its K = kernel_h * kernel_w * input_c taps (OHWI order),
 *    zero-padded to K4 = a multiple of 4, each group of 4 taps (w0, w1, w2, w3) as the int16
 *    values (w0, w2, w1, w3): [output_c rounded up to even][K4] int16;
 *  - channel_table: edgec_conv_s8_dsp_wide's (8 words per channel pair: folded biases,
 *    multipliers, round_high, r - 1); every channel must admit the short requantization
 *    (r - 1 in 1..23, else EDGEC_ARG_ERROR), the output offset is in round_high.
 * Portable C.
 */
/* generated from edgec/ops/conv_small.py: edgec_conv_small_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    int32_t output_h;
    int32_t output_w;
    int32_t output_c;
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t input_offset;
    int32_t act_min;
    int32_t act_max;
    const int16_t *filter;        /* [output_c, even][K4]: taps widened, (w0, w2, w1, w3) per group of 4 */
    const int32_t *channel_table; /* 8 words per channel pair (edgec_conv_s8_dsp_wide's) */
} edgec_conv_small_desc;
/* end of edgec_conv_small_desc */

edgec_status edgec_conv_s8_small_3x3x1(const edgec_conv_small_desc *desc, const int8_t *input, int8_t *output);
edgec_status edgec_conv_s8_small_3x3x2(const edgec_conv_small_desc *desc, const int8_t *input, int8_t *output);
edgec_status edgec_conv_s8_small_3x3x3(const edgec_conv_small_desc *desc, const int8_t *input, int8_t *output);
edgec_status edgec_conv_s8_small_1x1x4(const edgec_conv_small_desc *desc, const int8_t *input, int8_t *output);
edgec_status edgec_conv_s8_small_1x1x8(const edgec_conv_small_desc *desc, const int8_t *input, int8_t *output);
edgec_status edgec_conv_s8_small_1x1x12(const edgec_conv_small_desc *desc, const int8_t *input, int8_t *output);
edgec_status edgec_conv_s8_small_1x1x16(const edgec_conv_small_desc *desc, const int8_t *input, int8_t *output);

/*
 * Depthwise convolution, NHWC: output channel o = c * ch_mult + m (output_c = input_c * ch_mult)
 * sums (input[n][oy*stride_h - pad_top + ky*dilation_h][ox*stride_w - pad_left + kx*dilation_w][c]
 * + input_offset) * filter[ky][kx][o] (taps outside the input add 0).
 */
/* generated from edgec/ops/int4.py: edgec_depthwise_conv_s4_desc */
typedef struct {
    int32_t batches;
    int32_t input_h;
    int32_t input_w;
    int32_t input_c;
    int32_t output_h;
    int32_t output_w;
    int32_t ch_mult;
    int32_t kernel_h;
    int32_t kernel_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t input_offset;
    int32_t output_offset;
    int32_t act_min;
    int32_t act_max;
    const int8_t *filter;      /* packed int4 [kernel_h][kernel_w][input_c * ch_mult] */
    const int32_t *bias;       /* [input_c * ch_mult] or NULL */
    const int32_t *multiplier; /* [input_c * ch_mult] */
    const int32_t *shift;      /* [input_c * ch_mult] */
} edgec_depthwise_conv_s4_desc;
/* end of edgec_depthwise_conv_s4_desc */

edgec_status edgec_depthwise_conv_s4(const edgec_depthwise_conv_s4_desc *desc, const int8_t *input, int8_t *output);

/*
 * edgec_depthwise_conv_s4 for channel multiplier 1 and kernel_h <= EDGEC_DEPTHWISE_PACKED_MAX_K on
 * a build with the DSP extension or Helium: the filter is unpacked once per call into scratch in
 * edgec_depthwise_conv_s8_packed's layout (EDGEC_DEPTHWISE_CONV_S4_FILTER_BYTES(taps, input_c)
 * bytes, taps = kernel_h * kernel_w), which that kernel then runs. Same arithmetic; `bias`
 * (required) is edgec_depthwise_conv_s8_packed's folded bias (bias[c] + input_offset * the sum of
 * channel c's taps, wrapped to int32, zeros up to a multiple of 4 entries). Scratch (required,
 * word-aligned, apart from input and output): the unpacked filter, then
 * EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES(kernel_h, EDGEC_DEPTHWISE_PACKED_ROW_PIXELS(output_w,
 * stride_w, kernel_w, dilation_w)) bytes. Other shapes, a NULL bias or scratch: EDGEC_ARG_ERROR.
 */
/* generated from edgec/ops/int4.py: EDGEC_DEPTHWISE_CONV_S4_FILTER_BYTES */
#define EDGEC_DEPTHWISE_CONV_S4_FILTER_BYTES(taps, c) (4 * (((c) + 3) / 4) * (taps))
/* end of EDGEC_DEPTHWISE_CONV_S4_FILTER_BYTES */
edgec_status edgec_depthwise_conv_s4_packed(const edgec_depthwise_conv_s4_desc *desc, const int8_t *input,
                                            int8_t *output, int8_t *scratch);

/* ==== end of int4-weight kernels ==== */

/* ==== Attention family: batch matmul of two activations, layer norm (matmul/, norm/) ======== */

/*
 * int8 x int8 -> int8 matrix product with broadcast batch dimensions (torch.matmul / bmm), TFLite
 * Micro's int8 BATCH_MATMUL arithmetic (edgec.ops.matmul.batch_matmul_s8):
 *   acc = sum_k (lhs[b][m][k] + lhs_offset) * (rhs[b][k][n] + rhs_offset)    (int32, wraps)
 *   out[b][m][n] = clamp(requantize(acc, multiplier, shift) + output_offset, act_min, act_max)
 * lhs is contiguous [batch..][rows][depth]; rhs element (k, n) of a batch is at
 * k * rhs_depth_stride + n * rhs_col_stride (so a transposed right operand needs no copy); batch
 * index (i_0..) reads lhs/rhs at sum_d i_d * *_batch_strides[d] (0: broadcast). The output is
 * contiguous [batch..][rows][cols]. batch_rank may be 0 (one product). Not in place.
 * EDGEC_ARG_ERROR: NULL pointers, a dim < 1, negative strides, batch_rank outside
 * 0..EDGEC_MATMUL_MAX_BATCH_DIMS, offsets outside int8 zero points, a shift outside -31..31, a
 * negative multiplier, act bounds outside int8 or crossed, spans beyond int32.
 */
#define EDGEC_MATMUL_MAX_BATCH_DIMS 4

/* generated from edgec/ops/matmul.py: edgec_batch_matmul_desc */
typedef struct {
    int32_t batch_rank;
    int32_t batch_dims[EDGEC_MATMUL_MAX_BATCH_DIMS];
    int32_t lhs_batch_strides[EDGEC_MATMUL_MAX_BATCH_DIMS];
    int32_t rhs_batch_strides[EDGEC_MATMUL_MAX_BATCH_DIMS];
    int32_t rows;
    int32_t cols;
    int32_t depth;
    int32_t rhs_depth_stride;
    int32_t rhs_col_stride;
    int32_t lhs_offset;    /* -lhs zero point */
    int32_t rhs_offset;    /* -rhs zero point */
    int32_t output_offset; /* output zero point */
    int32_t multiplier;
    int32_t shift;
    int32_t act_min;
    int32_t act_max;
} edgec_batch_matmul_desc;
/* end of edgec_batch_matmul_desc */

edgec_status edgec_batch_matmul_s8(const edgec_batch_matmul_desc *desc, const int8_t *lhs, const int8_t *rhs,
                                   int8_t *output);

/*
 * int8 layer normalisation over the last `features` values of each of `rows` rows, integer only
 * (edgec.ops.layer_norm.layer_norm_s8 states the arithmetic and its bounds): per row
 *   d_i = n q_i - sum q; V = 4^F sum d_i^2 + eps_term (F = max(0, (30 - 3 ceil(log2 n)) / 2): eps_term
 *   carries F fraction bits); r = isqrt(V 4^t) in [2^30, 2^31);
 *   u_i = RoundShift(d_i 2^(t+F) floor((2^61-1)/r), 37);
 *   y_i = clamp(RoundShift(u_i scale[i] + offset[i], shift) + output_offset, act_min, act_max),
 * RoundShift(v, s) = floor((v + 2^(s-1)) / 2^s). 64-bit values travel as (hi, lo) int32 pairs:
 * v = hi * 2^32 + (uint32_t)lo. May run in place (each row is read before it is written).
 * EDGEC_ARG_ERROR: NULL pointers, rows < 1, features outside 1..EDGEC_LAYER_NORM_MAX_FEATURES,
 * eps_term outside 0..2^60, |offset| > 2^56, shift outside 32..62, act bounds outside int8.
 */
#define EDGEC_LAYER_NORM_MAX_FEATURES 4096

/* generated from edgec/ops/layer_norm.py: edgec_layer_norm_desc */
typedef struct {
    int32_t rows;
    int32_t features;
    int32_t eps_term_hi;
    int32_t eps_term_lo;
    int32_t shift;
    int32_t output_offset;
    int32_t act_min;
    int32_t act_max;
    const int32_t *scale;     /* [features] */
    const int32_t *offset_hi; /* [features] */
    const int32_t *offset_lo; /* [features] */
} edgec_layer_norm_desc;
/* end of edgec_layer_norm_desc */

edgec_status edgec_layer_norm_s8(const edgec_layer_norm_desc *desc, const int8_t *input, int8_t *output);

/*
 * int8 L2 normalisation along one axis (F.normalize): TFLite Micro's integer L2_NORMALIZATION, bit
 * for bit (edgec.ops.l2_norm.l2_norm_s8). The input is viewed as [outer][depth][inner]; each of the
 * outer * inner rows of `depth` values (stride inner) is normalised:
 *   acc = sum (q - input_zero_point)^2; (m, s) = GetInvSqrtQuantizedMultiplierExp(acc);
 *   y = clamp(requantize(q - input_zero_point, m, s + 7), -128, 127), at scale 1/128, zero point 0.
 * May run in place (each row is read before it is written).
 * EDGEC_ARG_ERROR: NULL pointers, a dimension < 1, depth > EDGEC_L2_NORM_MAX_DEPTH (the int32 sum of
 * squares), input_zero_point outside int8.
 */
#define EDGEC_L2_NORM_MAX_DEPTH 32768

/* generated from edgec/ops/l2_norm.py: edgec_l2_norm_desc */
typedef struct {
    int32_t outer;
    int32_t depth;
    int32_t inner;
    int32_t input_zero_point;
} edgec_l2_norm_desc;
/* end of edgec_l2_norm_desc */

edgec_status edgec_l2_norm_s8(const edgec_l2_norm_desc *desc, const int8_t *input, int8_t *output);

/* ==== end of the attention family ==== */

/* ==== recurrent cells: LSTM, GRU (runtime_c/src/recurrent/) ==== */

/*
 * edgec_lstm_s8 / edgec_gru_s8: int8 LSTM / GRU over time_steps steps (a whole sequence, or one
 * step of a stream whose state persists between calls). Golden: edgec.ops.recurrent.
 *
 * LSTM (cell = EDGEC_RECURRENT_LSTM, gates i, f, g, o in PyTorch's row order): TFLite Micro's
 * integer UNIDIRECTIONAL_SEQUENCE_LSTM as CMSIS-NN's arm_lstm_unidirectional_s8 computes it:
 *   pre_k  = sat16(requant(Wx_k x + input_bias_k) + requant(Wh_k h + hidden_bias_k))   Q3.12
 *   gate_k = sigmoid_s16(pre_k) (tanh for g)                                           Q0.15
 *   c' = sat16(requant(f * c, forget_cell)); c' = sat16(requant(i * g, input_cell) + c')
 *   h' = sat8(requant(o * tanh_s16(c' << cell_tanh_shift), output) + output_offset)
 * GRU (cell = EDGEC_RECURRENT_GRU, gates r, z, n): r, z as above; n = tanh(sat16(xn +
 *   sat16(requant(r * hn, forget_cell)))) with xn, hn the two parts of gate n kept apart;
 *   hq = sat16(requant(h - output_offset, hidden_q15)) (h in Q0.15);
 *   h' = sat8(requant((32768 - z) * n + z * hq, output) + output_offset). With tanh_linear,
 *   the GRU's n = sat16(xn + rh) and the LSTM's g = pre_g, tanh(c') = c' (tanh(x) = x; the
 *   scales, finer than Q3.12 / Q0.15, are in the multipliers).
 * sigmoid/tanh: arm_nn_activation_s16's interpolation in `sigmoid_table` (256 x sigmoid(i/24), 0.16).
 * The biases are effective: the float bias quantized at s_x * s_w minus zp * sum of the row.
 * input/output: [T, B, I] / [T, B, H] when time_major, else [B, T, I] / [B, T, H]; with
 * last_step_only the output is the last step's hidden state only, [B, H].
 * hidden int8 [B, H], cell int16 [B, H] (LSTM only): the state, read and updated; reset_state
 * sets them to real zero (hidden = output_offset, cell = 0) first.
 * scratch: EDGEC_RECURRENT_SCRATCH_BYTES(hidden_size) bytes, 4-byte aligned. Not in place.
 * EDGEC_ARG_ERROR: NULL pointers, non-positive sizes, sizes over 65535, a cell kind that is not the
 * function's, shifts outside -31..31, cell_tanh_shift outside -31..14, output_offset outside int8.
 */
enum {
    EDGEC_RECURRENT_GRU = 3,
    EDGEC_RECURRENT_LSTM = 4
};
/* generated from edgec/ops/recurrent.py: EDGEC_RECURRENT_SCRATCH_BYTES */
#define EDGEC_RECURRENT_SCRATCH_BYTES(hidden_size) (16 * (hidden_size))
/* end of EDGEC_RECURRENT_SCRATCH_BYTES */

/* generated from edgec/ops/recurrent.py: edgec_recurrent_desc */
typedef struct {
    int32_t cell; /* EDGEC_RECURRENT_LSTM or EDGEC_RECURRENT_GRU: the number of gates */
    int32_t batches;
    int32_t time_steps;
    int32_t input_size;
    int32_t hidden_size;
    int32_t time_major;           /* 1: [T, B, features]; 0: [B, T, features] */
    int32_t reset_state;          /* 1: start from a zero state (whole sequence); 0: continue (stream) */
    const int8_t *input_weights;  /* [cell * H, I], gate blocks in PyTorch order */
    const int8_t *hidden_weights; /* [cell * H, H] */
    const int32_t *input_bias;    /* [cell * H] */
    const int32_t *hidden_bias;   /* [cell * H] */
    int32_t input_multiplier[4];  /* per gate: s_x * s_wx / 2^-12 */
    int32_t input_shift[4];
    int32_t hidden_multiplier[4]; /* per gate: s_h * s_wh / 2^-12 */
    int32_t hidden_shift[4];
    int32_t forget_cell_multiplier; /* LSTM f * c: 2^-15; GRU r * hn: 2^-15 */
    int32_t forget_cell_shift;
    int32_t input_cell_multiplier; /* LSTM i * g: 2^-30 / s_c */
    int32_t input_cell_shift;
    int32_t cell_tanh_shift;   /* LSTM: log2(s_c) + 12 */
    int32_t output_multiplier; /* 2^-30 / s_h */
    int32_t output_shift;
    int32_t output_offset;         /* the hidden state's (= output's) zero point */
    int32_t hidden_q15_multiplier; /* GRU: s_h / 2^-15, the hidden state in Q0.15 */
    int32_t hidden_q15_shift;
    int32_t last_step_only; /* 1: output holds only the last step ([1, B, H] / [B, 1, H]) */
    /* 1: the tanh gates are the identity (GRU: n = sat16(xn + rh); LSTM: g = pre_g, tanh(c') =
     * c'), at the finer scales the multipliers give: a layer whose values stay where tanh(x) = x */
    int32_t tanh_linear;
    const uint16_t *sigmoid_table; /* 256 entries */
    /* 8, or 4: input_weights and hidden_weights are int4 values in [-8, 7] packed as one stream
     * each (edgec.ops.int4: element i in byte i / 2, the low nibble first) */
    int32_t weight_bits;
} edgec_recurrent_desc;
/* end of edgec_recurrent_desc */

edgec_status edgec_lstm_s8(const edgec_recurrent_desc *desc, const int8_t *input, int8_t *output, int8_t *hidden,
                           int16_t *cell, void *scratch);
edgec_status edgec_gru_s8(const edgec_recurrent_desc *desc, const int8_t *input, int8_t *output, int8_t *hidden,
                          void *scratch);

/*
 * edgec_lstm_s16: the 16x8 LSTM (int16 input and hidden state, symmetric; int8 weights; int64
 * bias; int16 cell state), TFLite Micro's 16x8 UNIDIRECTIONAL_SEQUENCE_LSTM as CMSIS-NN's
 * arm_lstm_unidirectional_s16 computes it. Golden: edgec.ops.recurrent.lstm_s16.
 *   pre_k  = sat16(requant_s64(Wh_k h) + sat16(requant_s64(Wx_k x + bias_k)))   Q3.12
 *   gate_k = sigmoid_s16(pre_k) (tanh for g)                                    Q0.15
 *   c' = sat16(requant(f * c, forget_cell)); c' = sat16(requant(i * g, input_cell) + c')
 *   h' = sat16(requant(o * tanh_s16(c' << cell_tanh_shift), output))
 * The sums are exact in int64 (Helium: VMLALDAVA; the DSP extension: SMLALD, x and h reordered
 * into the scratch); requant_s64 is arm_nn_requantize_s64 of the Q31 multiplier reduced to Q15 (the 16x8
 * layers'), requant arm_nn_requantize. Layouts and reset_state as edgec_lstm_s8's (a zero state
 * is all zeros). scratch: EDGEC_LSTM_S16_SCRATCH_BYTES(input_size, hidden_size) bytes, 4-byte
 * aligned. Not in place. EDGEC_ARG_ERROR: NULL pointers, non-positive sizes, sizes
 * over 65535, a negative matmul multiplier or its shift outside -31..7, other shifts outside
 * -31..31, cell_tanh_shift outside -31..14.
 */
/* generated from edgec/ops/recurrent.py: EDGEC_LSTM_S16_SCRATCH_BYTES */
#define EDGEC_LSTM_S16_SCRATCH_BYTES(input_size, hidden_size) \
    (8 * (hidden_size) + 4 * (((input_size) + 1) / 2) + 4 * (((hidden_size) + 1) / 2))
/* end of EDGEC_LSTM_S16_SCRATCH_BYTES */

/* generated from edgec/ops/recurrent.py: edgec_lstm_s16_desc */
typedef struct {
    int32_t batches;
    int32_t time_steps;
    int32_t input_size;
    int32_t hidden_size;
    int32_t time_major;           /* 1: [T, B, features]; 0: [B, T, features] */
    int32_t reset_state;          /* 1: start from a zero state (whole sequence); 0: continue (stream) */
    const int8_t *input_weights;  /* [4 * H, I], gate blocks i, f, g, o (PyTorch's order) */
    const int8_t *hidden_weights; /* [4 * H, H] */
    const int64_t *bias;          /* [4 * H]: b_ih + b_hh at s_x * s_wx (the input side's) */
    int32_t input_multiplier[4];  /* per gate: s_x * s_wx / 2^-12 (requantize_s64) */
    int32_t input_shift[4];
    int32_t hidden_multiplier[4]; /* per gate: s_h * s_wh / 2^-12 (requantize_s64) */
    int32_t hidden_shift[4];
    int32_t forget_cell_multiplier; /* f * c: 2^-15 */
    int32_t forget_cell_shift;
    int32_t input_cell_multiplier; /* i * g: 2^-30 / s_c */
    int32_t input_cell_shift;
    int32_t cell_tanh_shift;   /* log2(s_c) + 12 */
    int32_t output_multiplier; /* 2^-30 / s_h */
    int32_t output_shift;
    int32_t last_step_only;        /* 1: output holds only the last step ([1, B, H] / [B, 1, H]) */
    const uint16_t *sigmoid_table; /* 256 entries */
} edgec_lstm_s16_desc;
/* end of edgec_lstm_s16_desc */

edgec_status edgec_lstm_s16(const edgec_lstm_s16_desc *desc, const int16_t *input, int16_t *output, int16_t *hidden,
                            int16_t *cell, void *scratch);

/* ==== end of recurrent cells ==== */

#ifdef __cplusplus
}
#endif

#endif /* EDGEC_NN_H */
