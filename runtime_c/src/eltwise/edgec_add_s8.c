/*
 * edgec_add_s8.c -- int8 elementwise add with independent qparams (portable C99 path).
 *
 * TFLite/CMSIS-NN scheme: both inputs are rescaled onto a common fixed-point grid with
 * left_shift (20) bits of headroom, added, then requantized to the output scale:
 *   a = requantize((x1 + off1) << left_shift, m1, s1)
 *   b = requantize((x2 + off2) << left_shift, m2, s2)
 *   y = clamp(requantize(a + b, mo, so) + output_offset, act_min, act_max)
 * Golden: edgec.ops.eltwise.add_s8 (params from edgec.ops.eltwise.add_params).
 */
#include <stddef.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

/* (x + off) is within [-255, 255]; 255 << 23 still fits int32, so 23 is the largest safe shift. */
#define ADD_MAX_LEFT_SHIFT 23

static int add_params_valid(const edgec_add_params *p)
{
    return p->input1_offset >= -127 && p->input1_offset <= 128 &&
           p->input2_offset >= -127 && p->input2_offset <= 128 &&
           p->output_offset >= -128 && p->output_offset <= 127 &&
           p->left_shift >= 0 && p->left_shift <= ADD_MAX_LEFT_SHIFT &&
           edgec_shift_valid(p->input1_shift) && edgec_shift_valid(p->input2_shift) &&
           edgec_shift_valid(p->output_shift) && edgec_act_range_valid(p->act_min, p->act_max);
}

/*
 * Element loop. Each iteration reads input1[i] and input2[i] before writing output[i], so the
 * output may alias either input exactly (no `restrict` anywhere on purpose).
 */
edgec_status edgec_add_s8(const edgec_add_params *params, const int8_t *input1, const int8_t *input2,
                          int8_t *output, int32_t size)
{
    int32_t i;
    int32_t scale;
    edgec_output_stage stage;

    if (params == NULL || input1 == NULL || input2 == NULL || output == NULL || size < 0 ||
        !add_params_valid(params)) {
        return EDGEC_ARG_ERROR;
    }
    /* Multiplying by 2^left_shift instead of `<<`: left-shifting a negative value is UB in C99. */
    scale = (int32_t)1 << params->left_shift;
    stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);

    for (i = 0; i < size; ++i) {
        const int32_t x1 = ((int32_t)input1[i] + params->input1_offset) * scale;
        const int32_t x2 = ((int32_t)input2[i] + params->input2_offset) * scale;
        const int32_t a = edgec_requantize(x1, params->input1_multiplier, params->input1_shift);
        const int32_t b = edgec_requantize(x2, params->input2_multiplier, params->input2_shift);
        /* Sum through uint32_t: with arbitrary multipliers a + b may exceed int32, and the
         * golden models that as a two's-complement wrap rather than undefined behaviour. */
        const int32_t sum = (int32_t)((uint32_t)a + (uint32_t)b);
        output[i] = edgec_requantize_s8(sum, params->output_multiplier, params->output_shift, stage);
    }
    return EDGEC_OK;
}
