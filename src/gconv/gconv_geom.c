/* B-space geometry of a layer (see ts__gconv_geom in gconv_internal.h): which of the three layouts
 * the executor uses, the offsets of B rows, filling B from an image and compacting padded-width
 * outputs. */
#include <string.h>

#include "gconv/gconv_internal.h"

void ts__gconv_geom_make(const ts_gconv_layer *l, ts__gconv_geom *g) {
  memset(g, 0, sizeof *g);
  ts_gconv_layer_out(l, &g->ho, &g->wo);
  g->taps = l->ksize * l->ksize;
  g->pad = l->ksize / 2;
  if (l->ksize == 1 && l->stride == 1) {
    g->kind = TS__GEOM_DIRECT;
    g->ncols = (int64_t)g->ho * g->wo;
  } else if (l->stride == 1) {
    g->kind = TS__GEOM_PADDED;
    g->wpad = l->w + 2 * g->pad;
    g->ncols = (int64_t)g->ho * g->wpad;
    /* the last (junk) column of the last output row reads index (h+2p)*wpad + 2p - 1 of its
     * plane: 2p floats of slack past the padded image, then planes rounded to a cache line */
    g->plane = ((int64_t)(l->h + 2 * g->pad) * g->wpad + 2 * g->pad + 15) / 16 * 16;
    g->bfloats = g->plane * l->cin;
    g->out_floats = g->ncols * l->cout;
  } else {
    g->kind = TS__GEOM_IM2COL;
    g->ncols = (int64_t)g->ho * g->wo;
    g->bfloats = g->ncols * g->taps * l->cin;
  }
}

void ts__gconv_geom_im2col(const ts_gconv_layer *l, ts__gconv_geom *g) {
  ts__gconv_geom_make(l, g);
  g->kind = TS__GEOM_IM2COL;
  g->ncols = (int64_t)g->ho * g->wo;
  g->bfloats = g->ncols * g->taps * l->cin;
  g->plane = g->wpad = g->out_floats = 0;
}

int32_t ts__gconv_off(const ts__gconv_geom *g, const ts_gconv_layer *l, int32_t c, int tap) {
  switch (g->kind) {
    case TS__GEOM_DIRECT: return (int32_t)((int64_t)c * l->h * l->w);
    case TS__GEOM_PADDED: return (int32_t)(c * g->plane + (tap / l->ksize) * g->wpad + tap % l->ksize);
    default: return (int32_t)(((int64_t)c * g->taps + tap) * g->ncols);
  }
}

void ts__gconv_fill_b(const ts__gconv_geom *g, const ts_gconv_layer *l, const float *x, float *b, int c0, int c1) {
  const int64_t hw = (int64_t)l->h * l->w;
  const int k = l->ksize, p = g->pad, s = l->stride;
  for (int c = c0; c < c1; c++) {
    const float *xc = x + c * hw;
    if (g->kind == TS__GEOM_PADDED) {
      float *bc = b + c * g->plane;
      memset(bc, 0, (size_t)g->plane * sizeof(float));
      for (int i = 0; i < l->h; i++) memcpy(bc + (int64_t)(i + p) * g->wpad + p, xc + (int64_t)i * l->w, (size_t)l->w * sizeof(float));
    } else if (g->kind == TS__GEOM_IM2COL) {
      for (int t = 0; t < g->taps; t++) {
        float *bt = b + ((int64_t)c * g->taps + t) * g->ncols;
        const int r = t / k, q = t % k;
        for (int i = 0; i < g->ho; i++) {
          const int yy = i * s - p + r;
          float *row = bt + (int64_t)i * g->wo;
          if (yy < 0 || yy >= l->h) {
            memset(row, 0, (size_t)g->wo * sizeof(float));
            continue;
          }
          for (int j = 0; j < g->wo; j++) {
            const int xx = j * s - p + q;
            row[j] = xx >= 0 && xx < l->w ? xc[(int64_t)yy * l->w + xx] : 0.0f;
          }
        }
      }
    }
  }
}

void ts__gconv_compact(const ts__gconv_geom *g, const float *yw, float *y, int o0, int o1) {
  const int64_t ohw = (int64_t)g->ho * g->wo;
  for (int o = o0; o < o1; o++)
    for (int i = 0; i < g->ho; i++)
      memcpy(y + o * ohw + (int64_t)i * g->wo, yw + o * g->ncols + (int64_t)i * g->wpad, (size_t)g->wo * sizeof(float));
}
