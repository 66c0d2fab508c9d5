/* tessera plots: RGB images with a built-in 5x7 bitmap font, a PNG writer (8-bit RGB, zlib),
 * a small SVG builder, and "spy" pictures of sparsity patterns: each pixel shows the fraction
 * of nonzeros in the block of entries it covers, white = empty, dark = full, panels side by side
 * (e.g. a mask before and after reordering).
 *
 * Colors are 0xRRGGBB. Every writer writes a temporary file and renames it (never half-written). */
#ifndef TESSERA_PLOT_H
#define TESSERA_PLOT_H

#include "tessera/core.h"
#include "tessera/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- images ------------------------------------------------------------------------------- */

#define TS_IMAGE_MAX_SIDE 16384

/* w x h pixels, rgb: [h][w][3] bytes, row-major, top row first. */
typedef struct ts_image {
  int32_t w, h;
  uint8_t *rgb;
} ts_image;

/* Allocates a w x h image (1..TS_IMAGE_MAX_SIDE each side) filled with `fill`. */
ts_status ts_image_alloc(ts_image *img, int32_t w, int32_t h, uint32_t fill);
void ts_image_free(ts_image *img);
/* Fills the rectangle [x, x+w) x [y, y+h), clipped to the image. */
void ts_image_fill_rect(ts_image *img, int32_t x, int32_t y, int32_t w, int32_t h, uint32_t color);
/* One-pixel outline of the rectangle [x, x+w) x [y, y+h), clipped. */
void ts_image_frame(ts_image *img, int32_t x, int32_t y, int32_t w, int32_t h, uint32_t color);

/* Text in the built-in 5x7 font: printable ASCII (others drawn as '?'), each glyph magnified
 * `scale` times (1..8) in a (6*scale) x (8*scale) cell; (x, y) is the cell's top-left corner.
 * Returns the width drawn in pixels. Clipped to the image. */
int32_t ts_image_text(ts_image *img, int32_t x, int32_t y, const char *text, int scale, uint32_t color);
/* Width in pixels ts_image_text would use (6*scale per character, no trailing gap). */
int32_t ts_text_width(const char *text, int scale);

/* ---- PNG ---------------------------------------------------------------------------------- */

/* Encodes img as a PNG (8-bit RGB, per-row adaptive filter, zlib deflate). *png is malloc'd;
 * free() it. */
ts_status ts_png_encode(const ts_image *img, uint8_t **png, size_t *len);
/* Encodes and writes atomically. */
ts_status ts_png_write(const char *path, const ts_image *img);

/* ---- SVG ---------------------------------------------------------------------------------- */

/* An SVG document being built. Drawing calls never fail: an allocation failure is remembered
 * and returned by ts_svg_finish / ts_svg_write. Opaque.
 * Thread safety: every call writes the document: one thread at a time per document. */
typedef struct ts_svg ts_svg;

ts_status ts_svg_create(ts_svg **svg, double w, double h);
void ts_svg_destroy(ts_svg *svg);
void ts_svg_rect(ts_svg *svg, double x, double y, double w, double h, uint32_t fill);
/* Unfilled outline. */
void ts_svg_frame(ts_svg *svg, double x, double y, double w, double h, uint32_t stroke, double width);
void ts_svg_line(ts_svg *svg, double x1, double y1, double x2, double y2, uint32_t stroke, double width);
/* A filled path; d is SVG path data (characters that could break the XML are dropped). */
void ts_svg_path(ts_svg *svg, const char *d, uint32_t fill);
/* Content until ts_svg_group_end is drawn translated by (tx, ty), then scaled by (sx, sy):
 * lets dense grids be written in small integer cell units. */
void ts_svg_group_begin(ts_svg *svg, double tx, double ty, double sx, double sy);
void ts_svg_group_end(ts_svg *svg);
/* anchor: 's' start, 'm' middle, 'e' end; (x, y) is the baseline point. Text is XML-escaped. */
void ts_svg_text(ts_svg *svg, double x, double y, double size, char anchor, uint32_t color, const char *text);
/* Closes the document and hands over the text (NUL-terminated, malloc'd: free() it). The
 * builder can then only be destroyed. */
ts_status ts_svg_finish(ts_svg *svg, char **text, size_t *len);
/* Finishes and writes atomically. */
ts_status ts_svg_write(ts_svg *svg, const char *path);

/* ---- spy pictures of patterns ------------------------------------------------------------- */

/* Colormap for t in [0,1]: a pale yellow -> orange -> red -> purple -> near-black ramp whose
 * lightness falls monotonically (t outside [0,1] is clamped). */
uint32_t ts_plot_colormap(double t);
/* Color of a cell with nonzero fraction `density`: white for 0, else ts_plot_colormap(sqrt(d)).
 * The square root spreads the low densities that dominate sparse masks over the ramp. */
uint32_t ts_spy_color(double density);

/* Nonzero fraction of each cell of a gh x gw grid over the pattern m (rows x cols) seen through
 * permutations: out(i, j) = m(row_perm[i], col_perm[j]) (perm[new] = old, as in sparse.h; NULL =
 * identity; pass the same array twice for the symmetric relabelling P A P^T; nothing is
 * materialized). Row i falls in grid row i*gh/rows, so cells differ in size by at most one entry
 * a side; 1 <= gh <= rows, 1 <= gw <= cols. density: [gh][gw]. Validates m (rowptr monotone,
 * columns in range) and the permutations (row_perm of 0..rows-1, col_perm of 0..cols-1). */
ts_status ts_spy_density(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm, int32_t gh, int32_t gw,
                         float *density);

#define TS_SPY_MAX_PANELS 8

typedef struct ts_spy_panel {
  const ts_csr *m;          /* the pattern */
  const int32_t *row_perm;  /* optional orders (perm[new] = old), NULL = as stored; the same */
  const int32_t *col_perm;  /* array twice for a symmetric relabelling */
  const char *title;    /* first line above the panel, e.g. "rcm" (NULL = none) */
  const char *subtitle; /* second line, e.g. "bandwidth 96, tiles16 412" (NULL = none) */
} ts_spy_panel;

typedef struct ts_spy_options {
  int32_t size;        /* longest side of each panel's plot area in pixels, 16..4096 (0 = 512) */
  const char *heading; /* optional line above all panels (e.g. the pattern spec) */
  int32_t svg_cells;   /* SVG heat maps are coarsened to at most this many cells a side (0 = 128) */
} ts_spy_options;

/* Renders 1..TS_SPY_MAX_PANELS panels side by side: titles, a framed density heat map per
 * panel with index ticks (0, middle, end), and a legend (white = empty, the ramp with density
 * ticks, the entries each cell covers). opts may be NULL. */
ts_status ts_spy_render(const ts_spy_panel *panels, int npanels, const ts_spy_options *opts, ts_image *out);
/* Same picture as SVG text (cells as rects, runs of equal color merged). free() *svg. */
ts_status ts_spy_render_svg(const ts_spy_panel *panels, int npanels, const ts_spy_options *opts, char **svg,
                            size_t *len);

typedef enum ts_plot_format { TS_PLOT_PNG = 0, TS_PLOT_SVG = 1 } ts_plot_format;
/* Format from the file name's extension (.png / .svg, any case); TS_ERR_UNSUPPORTED naming the
 * extension otherwise. */
ts_status ts_plot_format_from_path(const char *path, ts_plot_format *fmt);
/* Renders and writes atomically as PNG or SVG by the extension of `path`. */
ts_status ts_spy_write(const char *path, const ts_spy_panel *panels, int npanels, const ts_spy_options *opts);

#ifdef __cplusplus
}
#endif
#endif
