/* Activations and exp, AVX2 + FMA (8 lanes): the body is shared in act_body.h. */
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx2.h"
#include "kernels/act_body.h"
