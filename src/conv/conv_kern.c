/* The convolution room's kernel tables, one per level, on the core dispatcher (core/dispatch.h):
 *   scalar  column loops of conv_direct.c, Winograd with per-tile transforms and ts_sgemm;
 *   avx2    output channels in the lanes for direct (conv_direct_oc_avx2.c), columns in the
 *           lanes for depthwise (conv_direct_avx2.c), Winograd with channels in the lanes
 *           (conv_winograd_cl_avx2.c);
 *   avx512  output channels in the lanes for direct (conv_direct_oc_avx512.c), depthwise
 *           (conv_direct_avx512.c), Winograd's tile-lane and channel-lane schedules
 *           (conv_winograd_avx512.c, conv_winograd_cl_avx512.c). */
#include "conv/conv_internal.h"

static const ts__conv_kern k_scalar = {
    .isa = TS_ISA_SCALAR,
    .direct_kb = TS__CONV_KB_SCALAR,
    .direct_rows = ts__conv_direct_rows_scalar,
    .dw_rows = ts__conv_dw_rows_scalar,
    .wino_kalign = 1,
};
static const ts__conv_kern k_avx2 = {
    .isa = TS_ISA_AVX2,
    .direct_kb = TS__CONV_KB_OC_AVX2,
    .dconv_rows = ts__dconv_rows_avx2,
    .dconv_flat = ts__dconv_flat_avx2,
    .dconv_chunk = 48, /* 8 full tiles of 6 */
    .dconv_l2_group = 1,
    .dw_rows = ts__conv_dw_rows_avx2,
    .wino_kalign = 8,
    .wino_setup = ts__wino_setup_avx2,
    .wino_execute = ts__wino_execute_avx2,
};
static const ts__conv_kern k_avx512 = {
    .isa = TS_ISA_AVX512,
    .direct_kb = TS__CONV_KB_AVX512,
    .dconv_rows = ts__dconv_rows_avx512,
    .dconv_flat = ts__dconv_flat_avx512,
    .dconv_chunk = 56, /* 4 full tiles of 14 */
    .dw_rows = ts__conv_dw_rows_avx512,
    .wino_kalign = 16,
    .wino_setup = ts__wino_setup_avx512,
    .wino_execute = ts__wino_execute_avx512,
};

static const ts__variant variants[] = {{TS__LV_SCALAR, &k_scalar}, {TS__LV_AVX2, &k_avx2}, {TS__LV_AVX512, &k_avx512}};
ts__dispatch ts__conv_dispatch = TS__DISPATCH("conv", variants);

const ts__conv_kern *ts__conv_kern_active(void) { return ts__dispatch_table(&ts__conv_dispatch); }
