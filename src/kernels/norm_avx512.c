/* LayerNorm / RMSNorm, AVX-512 (16 lanes): the body is shared in norm_body.h. */
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"
#include "kernels/norm_body.h"
