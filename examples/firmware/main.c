/*
 * digits firmware example: classifies one bundled 8x8 handwritten digit with the model edgec
 * generated, as an application would, and prints the predicted digit and the true label over
 * semihosting. sample.h (written by make_sample.py) holds the float pixels and the label.
 */
#include <stdint.h>

#include "digits.h"
#include "sample.h"
#include "semihost.h"

/* The class with the highest int8 score: dequantizing is monotonic, so no floats are needed. */
static int argmax(const int8_t *scores, int count)
{
    int best = 0;
    int i;
    for (i = 1; i < count; ++i) {
        if (scores[i] > scores[best]) {
            best = i;
        }
    }
    return best;
}

int main(void)
{
    digits_quantize_input(sample_pixels);
    if (digits_invoke() != 0) {
        semihost_write0("digits_invoke failed\n");
        return 1;
    }
    semihost_write0("predicted digit ");
    semihost_write_int(argmax(digits_output(), DIGITS_OUTPUT_SIZE));
    semihost_write0(", label ");
    semihost_write_int(SAMPLE_LABEL);
    semihost_write0("\n");
    return 0;
}
