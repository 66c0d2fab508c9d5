/* RGB images for plots: allocation, filled rectangles, outlines, bitmap-font text, and the
 * colormap the spy pictures use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/plot_internal.h"

ts_status ts_image_alloc(ts_image *img, int32_t w, int32_t h, uint32_t fill) {
  if (!img) return ts_error(TS_ERR_INVALID_ARG, "ts_image_alloc: img is NULL");
  img->w = img->h = 0;
  img->rgb = NULL;
  if (w < 1 || h < 1 || w > TS_IMAGE_MAX_SIDE || h > TS_IMAGE_MAX_SIDE)
    return ts_error(TS_ERR_INVALID_ARG, "image size %dx%d outside 1..%d per side", (int)w, (int)h,
                    TS_IMAGE_MAX_SIDE);
  size_t bytes = (size_t)w * (size_t)h * 3; /* <= 16384^2 * 3: no overflow on 64-bit */
  img->rgb = malloc(bytes);
  if (!img->rgb) return ts_error(TS_ERR_OOM, "image %dx%d: cannot allocate %zu bytes", (int)w, (int)h, bytes);
  img->w = w;
  img->h = h;
  ts_image_fill_rect(img, 0, 0, w, h, fill);
  return TS_OK;
}

void ts_image_free(ts_image *img) {
  if (!img) return;
  free(img->rgb);
  img->rgb = NULL;
  img->w = img->h = 0;
}

void ts_image_fill_rect(ts_image *img, int32_t x, int32_t y, int32_t w, int32_t h, uint32_t color) {
  if (!img || !img->rgb || w <= 0 || h <= 0) return;
  /* clip in 64-bit so x + w cannot overflow */
  int64_t x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
  int64_t x1 = (int64_t)x + w, y1 = (int64_t)y + h;
  if (x1 > img->w) x1 = img->w;
  if (y1 > img->h) y1 = img->h;
  if (x0 >= x1 || y0 >= y1) return;
  uint8_t r = (uint8_t)(color >> 16), g = (uint8_t)(color >> 8), b = (uint8_t)color;
  for (int64_t yy = y0; yy < y1; yy++) {
    uint8_t *p = img->rgb + ((size_t)yy * (size_t)img->w + (size_t)x0) * 3;
    for (int64_t xx = x0; xx < x1; xx++, p += 3) {
      p[0] = r;
      p[1] = g;
      p[2] = b;
    }
  }
}

void ts_image_frame(ts_image *img, int32_t x, int32_t y, int32_t w, int32_t h, uint32_t color) {
  if (w <= 0 || h <= 0) return;
  ts_image_fill_rect(img, x, y, w, 1, color);
  ts_image_fill_rect(img, x, y + h - 1, w, 1, color);
  ts_image_fill_rect(img, x, y, 1, h, color);
  ts_image_fill_rect(img, x + w - 1, y, 1, h, color);
}

int32_t ts_text_width(const char *text, int scale) {
  if (!text || !*text) return 0;
  if (scale < 1) scale = 1;
  if (scale > 8) scale = 8;
  size_t n = strlen(text);
  if (n > 100000) n = 100000; /* keeps the product in range; such text is clipped anyway */
  return (int32_t)(n * 6 * (size_t)scale - (size_t)scale);
}

int32_t ts_image_text(ts_image *img, int32_t x, int32_t y, const char *text, int scale, uint32_t color) {
  if (!text) return 0;
  if (scale < 1) scale = 1;
  if (scale > 8) scale = 8;
  int64_t cx = x;
  for (const unsigned char *c = (const unsigned char *)text; *c; c++, cx += 6 * scale) {
    if (cx >= (img ? img->w : 0)) break; /* clipped: the rest cannot show */
    const char *g = ts__font_glyph(*c);
    for (int row = 0; row < 7; row++)
      for (int col = 0; col < 5; col++)
        if (g[row * 5 + col] == '#')
          ts_image_fill_rect(img, (int32_t)(cx + col * scale), y + row * scale, scale, scale, color);
  }
  return ts_text_width(text, scale);
}

/* Control points of the ramp (sRGB), chosen so lightness falls monotonically from a pale
 * yellow that still stands out against white to a near-black indigo. */
static const uint8_t ramp[5][3] = {
    {250, 226, 140}, /* t = 0.00 pale yellow */
    {248, 164, 86},  /* t = 0.25 orange */
    {222, 82, 96},   /* t = 0.50 coral red */
    {134, 38, 126},  /* t = 0.75 purple */
    {28, 12, 58},    /* t = 1.00 near-black indigo */
};

uint32_t ts_plot_colormap(double t) {
  if (!(t > 0)) t = 0; /* also maps NaN to 0 */
  if (t > 1) t = 1;
  double s = t * 4;
  int i = (int)s;
  if (i > 3) i = 3;
  double f = s - i;
  uint32_t c = 0;
  for (int k = 0; k < 3; k++) {
    double v = ramp[i][k] + f * (ramp[i + 1][k] - ramp[i][k]);
    c = (c << 8) | (uint32_t)lround(v);
  }
  return c;
}

uint32_t ts_spy_color(double density) {
  if (!(density > 0)) return 0xFFFFFF;
  return ts_plot_colormap(sqrt(density));
}
