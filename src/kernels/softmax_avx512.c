/* Row softmax, AVX-512 (16 lanes): the body is shared with AVX2 in softmax_body.h. */
#include <math.h>

#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"
#include "kernels/softmax_body.h"
