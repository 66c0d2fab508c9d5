/* Row softmax, AVX2 + FMA (8 lanes): the body is shared with AVX-512 in softmax_body.h. */
#include <math.h>

#include "kernels/kernels_internal.h"
#include "kernels/simd_avx2.h"
#include "kernels/softmax_body.h"
