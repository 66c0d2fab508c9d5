/* The packed Q4_0 / Q4_1 kernels of quant_pgemm_vnni_avx512.c compiled once more with GFNI, which
 * takes the high nibbles of a 64-byte vector in one instruction (vgf2p8affineqb) instead of a
 * shift and a mask: the same bits, ~8 fewer of the ~100 vector instructions of a decode step of 4
 * blocks x 8 rows. Chosen at run time where the CPU has GFNI (quant_dispatch.c); built with -mgfni
 * (CMakeLists.txt: files named *_gfni_avx512.c). */
#define TS_PGEMM_GFNI 1
#include "quant_pgemm_vnni_avx512.c"
