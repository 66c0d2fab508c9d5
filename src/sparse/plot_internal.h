/* Internal helpers shared by the plot files of the sparse room (font, growable text buffer,
 * spy layout pieces). Not public API. */
#ifndef TS_PLOT_INTERNAL_H
#define TS_PLOT_INTERNAL_H

#include <stdarg.h>

#include "tessera/plot.h"

/* The 5x7 glyph of printable ASCII c (others map to '?'): 35 chars, row-major, '#' = ink. */
const char *ts__font_glyph(int c);

/* Growable NUL-terminated text; appends never fail, the first allocation failure sticks in
 * `failed` and later appends are dropped. */
typedef struct ts__strbuf {
  char *s;
  size_t len, cap;
  bool failed;
} ts__strbuf;

void ts__strbuf_printf(ts__strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ts__strbuf_vprintf(ts__strbuf *b, const char *fmt, va_list ap);
void ts__strbuf_append(ts__strbuf *b, const char *s, size_t n);
void ts__strbuf_free(ts__strbuf *b);

/* Checks panels/opts and resolves defaults (size, svg_cells); fills rows/cols of the common
 * grid of each panel. Shared by the PNG and SVG spy renderers. */
typedef struct ts__spy_layout {
  int32_t size, svg_cells;
  int32_t pw[TS_SPY_MAX_PANELS], ph[TS_SPY_MAX_PANELS]; /* plot area of each panel, pixels */
} ts__spy_layout;
ts_status ts__spy_check(const ts_spy_panel *panels, int npanels, const ts_spy_options *opts, ts__spy_layout *lay);

/* The legend's density ticks, as (fraction, label) pairs. */
#define TS__SPY_TICKS 4
extern const double ts__spy_tick_d[TS__SPY_TICKS];
extern const char *const ts__spy_tick_label[TS__SPY_TICKS];

/* The legend's note on what a cell's color means, for a rows x cols pattern on a gh x gw grid:
 * "color = nonzero fraction of each cell of 8x8 entries (sqrt scale)" ("~6.5" for uneven cells),
 * or "one cell per entry: dark = nonzero, white = zero" when nothing is aggregated. */
void ts__spy_note(int64_t rows, int64_t cols, int32_t gh, int32_t gw, char *buf, size_t cap);

#endif
