/* A small SVG builder: rects, outlines, lines and text appended to a growable buffer, then
 * finished into one document. Numbers are printed with at most 2 decimals to keep files small. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/plot_internal.h"

void ts__strbuf_append(ts__strbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) {
      b->failed = true;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

void ts__strbuf_vprintf(ts__strbuf *b, const char *fmt, va_list ap) {
  char small[512];
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  if (n < 0) {
    b->failed = true;
  } else if ((size_t)n < sizeof small) {
    ts__strbuf_append(b, small, (size_t)n);
  } else {
    char *big = malloc((size_t)n + 1);
    if (!big) {
      b->failed = true;
    } else {
      vsnprintf(big, (size_t)n + 1, fmt, ap2);
      ts__strbuf_append(b, big, (size_t)n);
      free(big);
    }
  }
  va_end(ap2);
}

void ts__strbuf_printf(ts__strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ts__strbuf_vprintf(b, fmt, ap);
  va_end(ap);
}

void ts__strbuf_free(ts__strbuf *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

struct ts_svg {
  ts__strbuf buf;
  bool finished;
};

/* "12", "12.5", "12.25": shortest of up to 2 decimals. */
static void num(char *out, size_t cap, double v) {
  snprintf(out, cap, "%.2f", v);
  char *dot = strchr(out, '.');
  if (!dot) return;
  char *e = out + strlen(out) - 1;
  while (e > dot && *e == '0') *e-- = '\0';
  if (e == dot) *e = '\0';
  if (strcmp(out, "-0") == 0) strcpy(out, "0");
}

ts_status ts_svg_create(ts_svg **svg, double w, double h) {
  if (!svg) return ts_error(TS_ERR_INVALID_ARG, "ts_svg_create: svg is NULL");
  *svg = NULL;
  if (!(w > 0 && h > 0 && w <= 1e6 && h <= 1e6))
    return ts_error(TS_ERR_INVALID_ARG, "ts_svg_create: size %gx%g outside (0, 1e6]", w, h);
  ts_svg *s = calloc(1, sizeof *s);
  if (!s) return ts_error(TS_ERR_OOM, "ts_svg_create: out of memory");
  char ws[32], hs[32];
  num(ws, sizeof ws, w);
  num(hs, sizeof hs, h);
  ts__strbuf_printf(&s->buf,
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\" "
                    "shape-rendering=\"crispEdges\" font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\">\n",
                    ws, hs, ws, hs);
  *svg = s;
  return TS_OK;
}

void ts_svg_destroy(ts_svg *svg) {
  if (!svg) return;
  ts__strbuf_free(&svg->buf);
  free(svg);
}

void ts_svg_rect(ts_svg *svg, double x, double y, double w, double h, uint32_t fill) {
  if (!svg || svg->finished) return;
  char a[32], b[32], c[32], d[32];
  num(a, sizeof a, x);
  num(b, sizeof b, y);
  num(c, sizeof c, w);
  num(d, sizeof d, h);
  ts__strbuf_printf(&svg->buf, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"#%06x\"/>\n", a, b, c, d,
                    (unsigned)(fill & 0xFFFFFF));
}

void ts_svg_frame(ts_svg *svg, double x, double y, double w, double h, uint32_t stroke, double width) {
  if (!svg || svg->finished) return;
  char a[32], b[32], c[32], d[32], e[32];
  num(a, sizeof a, x);
  num(b, sizeof b, y);
  num(c, sizeof c, w);
  num(d, sizeof d, h);
  num(e, sizeof e, width);
  ts__strbuf_printf(&svg->buf,
                    "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"none\" stroke=\"#%06x\" "
                    "stroke-width=\"%s\"/>\n",
                    a, b, c, d, (unsigned)(stroke & 0xFFFFFF), e);
}

void ts_svg_line(ts_svg *svg, double x1, double y1, double x2, double y2, uint32_t stroke, double width) {
  if (!svg || svg->finished) return;
  char a[32], b[32], c[32], d[32], e[32];
  num(a, sizeof a, x1);
  num(b, sizeof b, y1);
  num(c, sizeof c, x2);
  num(d, sizeof d, y2);
  num(e, sizeof e, width);
  ts__strbuf_printf(&svg->buf, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#%06x\" stroke-width=\"%s\"/>\n",
                    a, b, c, d, (unsigned)(stroke & 0xFFFFFF), e);
}

void ts_svg_path(ts_svg *svg, const char *d, uint32_t fill) {
  if (!svg || svg->finished || !d) return;
  ts__strbuf_printf(&svg->buf, "<path fill=\"#%06x\" d=\"", (unsigned)(fill & 0xFFFFFF));
  for (const char *p = d; *p;) {
    size_t n = strcspn(p, "<>&\"");
    ts__strbuf_append(&svg->buf, p, n);
    p += n;
    if (*p) p++;
  }
  ts__strbuf_append(&svg->buf, "\"/>\n", 4);
}

void ts_svg_group_begin(ts_svg *svg, double tx, double ty, double sx, double sy) {
  if (!svg || svg->finished) return;
  char a[32], b[32], c[32], d[32];
  num(a, sizeof a, tx);
  num(b, sizeof b, ty);
  /* scales need more digits than coordinates: a 2-decimal scale error grows with the grid */
  snprintf(c, sizeof c, "%.6g", sx);
  snprintf(d, sizeof d, "%.6g", sy);
  ts__strbuf_printf(&svg->buf, "<g transform=\"translate(%s %s) scale(%s %s)\">\n", a, b, c, d);
}

void ts_svg_group_end(ts_svg *svg) {
  if (!svg || svg->finished) return;
  ts__strbuf_append(&svg->buf, "</g>\n", 5);
}

void ts_svg_text(ts_svg *svg, double x, double y, double size, char anchor, uint32_t color, const char *text) {
  if (!svg || svg->finished || !text) return;
  char a[32], b[32], c[32];
  num(a, sizeof a, x);
  num(b, sizeof b, y);
  num(c, sizeof c, size);
  const char *anc = anchor == 'm' ? "middle" : anchor == 'e' ? "end" : "start";
  ts__strbuf_printf(&svg->buf, "<text x=\"%s\" y=\"%s\" font-size=\"%s\" text-anchor=\"%s\" fill=\"#%06x\">", a, b, c,
                    anc, (unsigned)(color & 0xFFFFFF));
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    switch (*p) {
      case '&': ts__strbuf_append(&svg->buf, "&amp;", 5); break;
      case '<': ts__strbuf_append(&svg->buf, "&lt;", 4); break;
      case '>': ts__strbuf_append(&svg->buf, "&gt;", 4); break;
      case '"': ts__strbuf_append(&svg->buf, "&quot;", 6); break;
      default:
        /* control characters are not allowed in XML 1.0, and a stray non-ASCII byte could make
         * the document invalid UTF-8: show both as '?' */
        ts__strbuf_append(&svg->buf, (*p < 0x20 || *p > 0x7E) ? "?" : (const char *)p, 1);
        break;
    }
  }
  ts__strbuf_append(&svg->buf, "</text>\n", 8);
}

ts_status ts_svg_finish(ts_svg *svg, char **text, size_t *len) {
  if (!svg || !text || !len) return ts_error(TS_ERR_INVALID_ARG, "ts_svg_finish: NULL argument");
  *text = NULL;
  *len = 0;
  if (svg->finished) return ts_error(TS_ERR_INVALID_ARG, "ts_svg_finish: document already finished");
  ts__strbuf_append(&svg->buf, "</svg>\n", 7);
  svg->finished = true;
  if (svg->buf.failed) return ts_error(TS_ERR_OOM, "SVG document: out of memory after %zu bytes", svg->buf.len);
  *text = svg->buf.s;
  *len = svg->buf.len;
  memset(&svg->buf, 0, sizeof svg->buf);
  return TS_OK;
}

ts_status ts_svg_write(ts_svg *svg, const char *path) {
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "ts_svg_write: path is NULL");
  char *text;
  size_t len;
  TS_TRY(ts_svg_finish(svg, &text, &len));
  ts_status st = ts_write_file_atomic(path, text, len);
  free(text);
  if (st != TS_OK) ts_error_prefix("writing SVG %s: ", path);
  return st;
}
