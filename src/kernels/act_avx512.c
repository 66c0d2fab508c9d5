/* Activations and exp, AVX-512 (16 lanes): the body is shared in act_body.h. */
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"
#include "kernels/act_body.h"
