/* ts__attn_avx512_qk_diag_dot: the diagonal items' Q K^T of attn_kern_diag_avx512.c from bf16 pairs
 * by vdpbf16ps, compiled here with AVX-512 BF16 (CMakeLists.txt: files named *_bf16_avx512.c);
 * the callers choose it only on CPUs that have it (attn_kern_avx512.c). */
#define TS_DIAG_BF16 1
#include "attn_kern_diag_avx512.c"
