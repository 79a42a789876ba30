/*
 * Micro-benchmarks of the cycle model (tests/test_timing_model.py). Each routine is one
 * bench_begin/bench_end region holding exactly its body plus the call site of bench_end
 * (`movs r0, #id` and `bl`): routine(buffer) with r4 = buffer (RAM, or flash constants for
 * the flash_* routines). Region ids are the order of the calls in timing_micro_main.c.
 */
    .syntax unified
    .thumb
    .text

/* REGION name: prologue up to bench_begin (16-byte aligned `bl`, so the body starts 4 bytes
 * into a flash line); END: the region's end and the epilogue. */
    .macro REGION name
    .global \name
    .type \name, %function
    .thumb_func
    .p2align 4
\name:
    push {r4-r11, lr}
    mov r4, r0
    movs r0, #0
    .p2align 4
    bl bench_begin
    .endm

    .macro END
    movs r0, #0
    bl bench_end
    pop {r4-r11, pc}
    .endm

REGION empty
END

/* 8 loads whose destinations no later address uses: pipelined after the first. */
REGION ldr_independent
    ldr r5, [r4, #0]
    ldr r6, [r4, #4]
    ldr r7, [r4, #8]
    ldr r8, [r4, #12]
    ldr r9, [r4, #16]
    ldr r10, [r4, #20]
    ldr r11, [r4, #24]
    ldr r0, [r4, #28]
END

/* A chain of 4 loads, each addressed by the previous one's result (buffer[0] = buffer). */
REGION ldr_chase
    ldr r5, [r4]
    ldr r5, [r5]
    ldr r5, [r5]
    ldr r5, [r5]
END

/* 4 loads each followed by an instruction using the loaded value. */
REGION ldr_use
    ldr r5, [r4, #4]
    adds r5, r5, #1
    ldr r6, [r4, #8]
    adds r6, r6, #1
    ldr r7, [r4, #12]
    adds r7, r7, #1
    ldr r8, [r4, #16]
    add r8, r8, #1
END

REGION ldrd_x4
    ldrd r5, r6, [r4, #0]
    ldrd r7, r8, [r4, #8]
    ldrd r9, r10, [r4, #16]
    ldrd r5, r6, [r4, #24]
END

/* LDM then STM of N registers, N = 1..8 */
    .macro LDM_STM n, list
REGION ldm_stm_\n
    ldm r4, {\list}
    stm r4, {\list}
END
    .endm
    LDM_STM 1, "r5"
    LDM_STM 2, "r5-r6"
    LDM_STM 3, "r5-r7"
    LDM_STM 4, "r5-r8"
    LDM_STM 5, "r5-r9"
    LDM_STM 6, "r5-r10"
    LDM_STM 7, "r5-r11"
    LDM_STM 8, "r0-r3, r5-r8"

/* 4 taken branches, each skipping one 16-bit instruction to a 16-bit target. */
REGION branch_taken
    b 1f
    nop
1:  b 2f
    nop
2:  b 3f
    nop
3:  b 4f
    nop
4:  nop
END

/* 4 conditional branches that are not taken. */
REGION branch_untaken
    cmp r4, r4
    bne 1f
    bne 1f
    bne 1f
    bne 1f
1:  nop
END

REGION smlad_chain
    smlad r5, r6, r7, r5
    smlad r5, r6, r7, r5
    smlad r5, r6, r7, r5
    smlad r5, r6, r7, r5
    smlad r5, r6, r7, r5
    smlad r5, r6, r7, r5
    smlad r5, r6, r7, r5
    smlad r5, r6, r7, r5
END

REGION mul_umull_sdiv
    movs r5, #7
    movs r6, #3
    mul r7, r5, r6
    mla r7, r5, r6, r7
    umull r8, r9, r5, r6
    smlal r8, r9, r5, r6
    sdiv r7, r5, r6
    udiv r7, r5, r6
END

/* 8 independent ALU instructions, then a dependent chain of 8. */
REGION alu_independent
    adds r0, r0, #1
    adds r1, r1, #1
    adds r2, r2, #1
    adds r3, r3, #1
    add r5, r5, #1
    add r6, r6, #1
    add r7, r7, #1
    add r8, r8, #1
END

REGION alu_chain
    adds r0, r0, #1
    adds r0, r0, #1
    adds r0, r0, #1
    adds r0, r0, #1
    adds r0, r0, #1
    adds r0, r0, #1
    adds r0, r0, #1
    adds r0, r0, #1
END

/* Straight-line code from flash: 32 add.w (4 bytes each: 4 a 16-byte line). */
REGION flash_fetch
    .rept 32
    add.w r5, r5, #1
    .endr
END

/* 8 loads of constants in flash (r4: 16-byte aligned), 2 lines of 16 bytes, twice. */
REGION flash_data
    .rept 2
    ldr r5, [r4, #0]
    ldr r6, [r4, #4]
    ldr r7, [r4, #8]
    ldr r8, [r4, #12]
    ldr r9, [r4, #16]
    ldr r10, [r4, #20]
    ldr r11, [r4, #24]
    ldr r0, [r4, #28]
    .endr
END

/* 4 stores with an immediate offset, then 4 with a register offset (r6 = 0). */
REGION str_immediate
    str r5, [r4, #0]
    str r5, [r4, #4]
    str r5, [r4, #8]
    str r5, [r4, #12]
END

REGION str_register
    movs r6, #0
    str r5, [r4, r6]
    str r5, [r4, r6]
    str r5, [r4, r6]
    str r5, [r4, r6]
END

#if defined(__ARM_FEATURE_MVE)
/* Helium: 32 int8 values widened to int16, multiplied and accumulated, 8 a vector: 4 iterations
 * of a tail-predicated low-overhead loop. With overlap: VLDRB then VMLADAVA (two classes); without:
 * a scalar instruction between them. */
REGION helium_overlap
    movs r1, #32
    movs r2, #0
    dlstp.16 lr, r1
    .p2align 2
1:  vldrb.s16 q0, [r4], #8
    vmladava.s16 r2, q0, q0
    letp lr, 1b
END

REGION helium_no_overlap
    movs r1, #32
    movs r2, #0
    dlstp.16 lr, r1
    .p2align 2
1:  vldrb.s16 q0, [r4], #8
    add.w r6, r6, #1
    vmladava.s16 r2, q0, q0
    letp lr, 1b
END

/* Straight-line: 4 loads back to back (one class), then 4 load/multiply-accumulate pairs. */
REGION helium_straight
    vldrb.s16 q0, [r4]
    vldrb.s16 q1, [r4, #8]
    vldrb.s16 q2, [r4, #16]
    vldrb.s16 q3, [r4, #24]
    vldrb.s16 q0, [r4]
    vmladava.s16 r2, q0, q1
    vldrb.s16 q1, [r4, #8]
    vmladava.s16 r2, q1, q2
    vldrb.s16 q2, [r4, #16]
    vmladava.s16 r2, q2, q3
    vldrb.s16 q3, [r4, #24]
    vmladava.s16 r2, q3, q0
END
#endif
