/* Internal pieces of the baselines (gconv_base.c, gconv_base_dnnl.c). */
#ifndef TS_GCONV_BASE_H
#define TS_GCONV_BASE_H

#include "gconv/gconv_internal.h"

/* A oneDNN forward-inference convolution of l's geometry with `cin` input channels (the gathered
 * count for grouped use), `groups` groups; weights [cout][cin/groups][k][k] (goihw/oihw). */
typedef struct ts__gconv_dnnl ts__gconv_dnnl;
ts_status ts__gconv_dnnl_create(ts__gconv_dnnl **out, int threads, const ts_gconv_layer *l, int cin, int groups,
                                const float *weights);
/* src [n][cin][h][w] -> dst [n][cout][ho][wo]. */
ts_status ts__gconv_dnnl_run(const ts__gconv_dnnl *d, const float *src, float *dst);
void ts__gconv_dnnl_destroy(ts__gconv_dnnl *d);

#endif
