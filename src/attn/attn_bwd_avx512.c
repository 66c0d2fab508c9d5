/* Backward micro-kernels, AVX-512 (16 lanes, 32 registers: dK / dV blocks of 4 keys x 64
 * columns). The body is shared with AVX2 in attn_bwd_body.h. */
#include "attn/attn_internal.h"
#include "kernels/simd_avx512.h"

#define BWD_LANES(mk, v) ((__mmask16)(mk)[v])
#define BWD_CV 4

#include "attn/attn_bwd_body.h"

const ts__attn_bwd_kern ts__attn_bwd_kern_avx512 = {.pds = bwd_pds, .kv = bwd_kv, .kv_diag = bwd_kv_diag};
