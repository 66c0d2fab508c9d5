/* Plot tests: PNG files re-parsed chunk by chunk (signature, IHDR fields, CRC-32 computed here
 * bitwise, independent of zlib's table, IEND last), IDAT inflated with zlib and unfiltered here
 * to compare every pixel; the 5x7 font; the colormap; density grids on known patterns (with and
 * without permutations, bad inputs); rendered spy pictures (a diagonal gives dark diagonal pixels
 * and white elsewhere, panels side by side); SVG text; writing by extension. */
#include <zlib.h>

#include "tessera/plot.h"
#include "tst.h"

/* ---- an independent PNG reader: just enough for 8-bit RGB files ---------------------------- */

static uint32_t crc32_bitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  return (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
}

static unsigned filters_seen; /* bit f set when a parsed row used filter type f */

/* Parses png[0..len) into *img (rgb malloc'd). Returns 0 on success, else a reason code and
 * a CHECK failure message. */
static int png_parse(const uint8_t *png, size_t len, ts_image *img) {
  static const uint8_t sig[8] = {0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A};
  CHECK(len >= 8 && memcmp(png, sig, 8) == 0, "PNG signature");
  if (len < 8 || memcmp(png, sig, 8)) return 1;
  size_t pos = 8, zlen = 0;
  uint8_t *z = NULL;
  uint32_t w = 0, h = 0;
  int nchunk = 0, saw_iend = 0;
  while (pos + 12 <= len && !saw_iend) {
    uint32_t n = be32(png + pos);
    if (pos + 12 + (size_t)n > len) break;
    const uint8_t *type = png + pos + 4, *data = png + pos + 8;
    uint32_t crc = be32(png + pos + 8 + n);
    CHECK(crc == crc32_bitwise(type, 4 + (size_t)n), "chunk %d (%.4s) CRC %08x != computed %08x", nchunk,
          (const char *)type, crc, crc32_bitwise(type, 4 + (size_t)n));
    if (nchunk == 0) {
      CHECK(memcmp(type, "IHDR", 4) == 0 && n == 13, "first chunk must be a 13-byte IHDR");
      if (memcmp(type, "IHDR", 4) || n != 13) break;
      w = be32(data);
      h = be32(data + 4);
      CHECK(data[8] == 8 && data[9] == 2 && data[10] == 0 && data[11] == 0 && data[12] == 0,
            "IHDR depth/color/compression/filter/interlace = %d/%d/%d/%d/%d", data[8], data[9], data[10], data[11],
            data[12]);
    } else if (memcmp(type, "IDAT", 4) == 0) {
      uint8_t *nz = realloc(z, zlen + n + 1);
      if (!nz) break;
      z = nz;
      memcpy(z + zlen, data, n);
      zlen += n;
    } else if (memcmp(type, "IEND", 4) == 0) {
      CHECK(n == 0, "IEND length %u", n);
      saw_iend = 1;
    }
    pos += 12 + (size_t)n;
    nchunk++;
  }
  CHECK(saw_iend && pos == len, "IEND must be the last chunk (pos %zu of %zu)", pos, len);
  int rc = 2;
  if (saw_iend && w && h && z) {
    size_t rowbytes = (size_t)w * 3;
    uLongf rawlen = (uLongf)((rowbytes + 1) * h);
    uint8_t *raw = malloc(rawlen + 1);
    uLongf got = rawlen + 1;
    int zr = uncompress(raw, &got, z, (uLong)zlen);
    CHECK(zr == Z_OK && got == rawlen, "inflate: zlib %d, %lu bytes, expected %lu", zr, (unsigned long)got,
          (unsigned long)rawlen);
    if (zr == Z_OK && got == rawlen) {
      img->w = (int32_t)w;
      img->h = (int32_t)h;
      img->rgb = malloc(rowbytes * h);
      rc = 0;
      for (uint32_t y = 0; y < h && rc == 0; y++) {
        const uint8_t *f = raw + y * (rowbytes + 1);
        uint8_t *cur = img->rgb + y * rowbytes, *prev = y ? cur - rowbytes : NULL;
        CHECK(f[0] <= 4, "row %u filter type %d", y, f[0]);
        if (f[0] > 4) rc = 3;
        else filters_seen |= 1u << f[0];
        for (size_t i = 0; i < rowbytes && rc == 0; i++) {
          int a = i >= 3 ? cur[i - 3] : 0, b = prev ? prev[i] : 0, c = (prev && i >= 3) ? prev[i - 3] : 0, p = 0;
          if (f[0] == 1) p = a;
          if (f[0] == 2) p = b;
          if (f[0] == 3) p = (a + b) >> 1;
          if (f[0] == 4) p = paeth(a, b, c);
          cur[i] = (uint8_t)(f[1 + i] + p);
        }
      }
    }
    free(raw);
  }
  free(z);
  return rc;
}

static uint32_t px(const ts_image *img, int32_t x, int32_t y) {
  const uint8_t *p = img->rgb + ((size_t)y * (size_t)img->w + (size_t)x) * 3;
  return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static void test_png_roundtrip(void) {
  const int32_t sizes[][2] = {{1, 1}, {3, 2}, {17, 13}, {64, 1}, {1, 40}, {301, 203}};
  ts_rng r;
  ts_rng_seed(&r, 42);
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    ts_image img;
    CHECK_OK(ts_image_alloc(&img, sizes[s][0], sizes[s][1], 0xFFFFFF));
    /* a mix of noise, flat areas and gradients so every filter type gets chosen somewhere */
    for (int32_t y = 0; y < img.h; y++)
      for (int32_t x = 0; x < img.w; x++) {
        uint8_t *p = img.rgb + ((size_t)y * img.w + x) * 3;
        int region = (x / 7 + y / 5) % 3;
        for (int k = 0; k < 3; k++)
          p[k] = region == 0 ? (uint8_t)ts_rng_below(&r, 256) : region == 1 ? (uint8_t)(x * 3 + y * k) : 200;
      }
    uint8_t *png = NULL;
    size_t len = 0;
    CHECK_OK(ts_png_encode(&img, &png, &len));
    ts_image back = {0};
    if (png && png_parse(png, len, &back) == 0) {
      CHECK(back.w == img.w && back.h == img.h, "size %dx%d != %dx%d", back.w, back.h, img.w, img.h);
      CHECK(back.w == img.w && back.h == img.h && memcmp(back.rgb, img.rgb, (size_t)img.w * img.h * 3) == 0,
            "pixels differ after roundtrip of %dx%d", img.w, img.h);
    }
    free(png);
    ts_image_free(&back);
    ts_image_free(&img);
  }
  /* the encoder keeps the smaller of all-None and per-row heuristic filtering: the gradients
   * above must have taken the heuristic somewhere */
  CHECK(filters_seen & ~1u, "no row used a predicting filter (seen mask %x)", filters_seen);
  /* a noisy image needs more than one IDAT chunk */
  ts_image big;
  CHECK_OK(ts_image_alloc(&big, 700, 600, 0));
  for (size_t i = 0; i < (size_t)700 * 600 * 3; i++) big.rgb[i] = (uint8_t)ts_rng_next(&r);
  uint8_t *png = NULL;
  size_t len = 0;
  CHECK_OK(ts_png_encode(&big, &png, &len));
  CHECK(len > (1u << 20), "noise image should need more than one 1 MiB IDAT chunk, got %zu bytes", len);
  ts_image back = {0};
  if (png && png_parse(png, len, &back) == 0)
    CHECK(memcmp(back.rgb, big.rgb, (size_t)700 * 600 * 3) == 0, "multi-IDAT roundtrip pixels differ");
  free(png);
  ts_image_free(&back);
  ts_image_free(&big);

  ts_image bad = {.w = 0, .h = 5, .rgb = (uint8_t *)"x"};
  CHECK_STATUS(ts_png_encode(&bad, &png, &len), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_image_alloc(&bad, 0, 10, 0), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_image_alloc(&bad, 10, TS_IMAGE_MAX_SIDE + 1, 0), TS_ERR_INVALID_ARG);
}

static void test_png_file(void) {
  char path[1100];
  tst_tmp_path(path, sizeof path, "plot_test.png");
  ts_image img;
  CHECK_OK(ts_image_alloc(&img, 5, 4, 0x123456));
  CHECK_OK(ts_png_write(path, &img));
  char *data = NULL;
  size_t len = 0;
  CHECK_OK(ts_read_file(path, &data, &len));
  ts_image back = {0};
  if (data && png_parse((const uint8_t *)data, len, &back) == 0) CHECK(px(&back, 4, 3) == 0x123456, "pixel color");
  ts_image_free(&back);
  free(data);
  ts_image_free(&img);
  CHECK_STATUS(ts_png_write("/nonexistent-dir/x.png", &img), TS_ERR_INVALID_ARG); /* freed image */
  CHECK_OK(ts_image_alloc(&img, 2, 2, 0));
  CHECK(ts_png_write("/nonexistent-dir/x.png", &img) == TS_ERR_IO, "unwritable path is an I/O error");
  ts_image_free(&img);
}

static void test_text(void) {
  CHECK(ts_text_width("", 1) == 0 && ts_text_width("A", 1) == 5 && ts_text_width("AB", 2) == 22, "text widths");
  ts_image img;
  CHECK_OK(ts_image_alloc(&img, 40, 20, 0xFFFFFF));
  int32_t w = ts_image_text(&img, 3, 4, "H1", 1, 0);
  CHECK(w == 11, "drawn width %d", w);
  int ink = 0, outside = 0;
  for (int32_t y = 0; y < img.h; y++)
    for (int32_t x = 0; x < img.w; x++)
      if (px(&img, x, y) == 0) {
        ink++;
        if (x < 3 || x >= 3 + 11 || y < 4 || y >= 4 + 7) outside++;
      }
  /* 'H' has 2*6 + 5 = 17 ink cells, '1' has 1 + 2 + 4 + 3 = 10 */
  CHECK(ink == 27 && outside == 0, "ink %d (expected 27), outside the box %d", ink, outside);
  /* clipping: partly and fully outside, huge scale, non-ASCII -> no crash */
  ts_image_text(&img, -7, -3, "clip\x01\xff", 3, 0x00FF00);
  ts_image_text(&img, 39, 19, "xyz", 8, 0x00FF00);
  ts_image_text(&img, 1000, 1000, "far", 1, 0x00FF00);
  ts_image_free(&img);
}

static double luma(uint32_t c) { return 0.2126 * (c >> 16) + 0.7152 * ((c >> 8) & 255) + 0.0722 * (c & 255); }

static void test_colormap(void) {
  CHECK(ts_spy_color(0) == 0xFFFFFF, "empty is white");
  CHECK(ts_spy_color(1e-9) != 0xFFFFFF && luma(ts_spy_color(1e-9)) < 235, "tiny density must stand out from white");
  double prev = 256;
  int monotone = 1;
  for (int i = 0; i <= 100; i++) {
    double l = luma(ts_plot_colormap(i / 100.0));
    if (l > prev + 1e-9) monotone = 0;
    prev = l;
  }
  CHECK(monotone, "colormap lightness must fall monotonically");
  CHECK(luma(ts_plot_colormap(1)) < 30, "full is dark");
  CHECK(ts_plot_colormap(-1) == ts_plot_colormap(0) && ts_plot_colormap(2) == ts_plot_colormap(1) &&
            ts_plot_colormap(NAN) == ts_plot_colormap(0),
        "clamping");
}

/* Pattern builders: n x n diagonal, and a general one from (row, col) pairs sorted by row. */
typedef struct owned_csr {
  ts_csr m;
  int64_t rp[130];
  int32_t col[256];
} owned_csr;

static void make_diag(owned_csr *o, int n) {
  o->m = (ts_csr){.rows = n, .cols = n, .nnz = n, .rowptr = o->rp, .col = o->col};
  for (int i = 0; i <= n; i++) o->rp[i] = i;
  for (int i = 0; i < n; i++) o->col[i] = i;
}

static void test_density(void) {
  owned_csr d;
  make_diag(&d, 64);
  float g[64 * 64];
  for (int i = 0; i < 64 * 64; i++) g[i] = NAN;
  CHECK_OK(ts_spy_density(&d.m, NULL, NULL, 64, 64, g));
  int ok = 1;
  for (int y = 0; y < 64; y++)
    for (int x = 0; x < 64; x++) ok &= g[y * 64 + x] == (x == y ? 1.0f : 0.0f);
  CHECK(ok, "64x64 diagonal on a 64x64 grid");
  CHECK_OK(ts_spy_density(&d.m, NULL, NULL, 8, 8, g));
  ok = 1;
  for (int y = 0; y < 8; y++)
    for (int x = 0; x < 8; x++) ok &= g[y * 8 + x] == (x == y ? 8.0f / 64 : 0.0f);
  CHECK(ok, "diagonal on an 8x8 grid: each diagonal cell holds 8 of 64 entries");
  /* uneven cells: 64 rows over 5 grid rows -> 12/13 rows each; cells still sum to nnz */
  CHECK_OK(ts_spy_density(&d.m, NULL, NULL, 5, 3, g));
  double total = 0;
  for (int y = 0; y < 5; y++)
    for (int x = 0; x < 3; x++) {
      int64_t rows = 0, cols = 0;
      for (int r = 0; r < 64; r++) rows += r * 5 / 64 == y, cols += r * 3 / 64 == x;
      total += g[y * 3 + x] * (double)rows * (double)cols;
    }
  CHECK(fabs(total - 64) < 1e-3, "cell densities times areas sum to nnz: %g", total);

  /* one entry at (2, 5) of an 8x8; perm[new] = old moves it to (inv[2], inv[5]) */
  owned_csr e = {0};
  e.m = (ts_csr){.rows = 8, .cols = 8, .nnz = 1, .rowptr = e.rp, .col = e.col};
  for (int i = 0; i <= 8; i++) e.rp[i] = i > 2;
  e.col[0] = 5;
  const int32_t perm[8] = {7, 5, 6, 4, 2, 3, 1, 0}; /* inv[2] = 4, inv[5] = 1 */
  CHECK_OK(ts_spy_density(&e.m, perm, perm, 8, 8, g));
  int nonzero = 0;
  for (int i = 0; i < 64; i++) nonzero += g[i] != 0;
  CHECK(nonzero == 1 && g[4 * 8 + 1] == 1.0f, "permuted entry lands at (4, 1)");

  int32_t dup[8] = {0, 1, 2, 3, 4, 5, 6, 6}, oob[8] = {0, 1, 2, 3, 4, 5, 6, 8};
  CHECK_ERR_CONTAINS(ts_spy_density(&e.m, NULL, dup, 8, 8, g), "column permutation: index 6 appears twice");
  CHECK_ERR_CONTAINS(ts_spy_density(&e.m, oob, NULL, 8, 8, g), "row permutation: perm[7] = 8");
  /* rows and columns ordered independently: only the row moves, (2, 5) -> (inv[2], 5) = (4, 5) */
  CHECK_OK(ts_spy_density(&e.m, perm, NULL, 8, 8, g));
  CHECK(g[4 * 8 + 5] == 1.0f, "row-only permutation moves the entry to (4, 5)");
  /* rectangular 3x5, entry (0, 4): rows {2,0,1} (inv[0] = 1), columns reversed (inv[4] = 0) */
  owned_csr rc = {0};
  rc.m = (ts_csr){.rows = 3, .cols = 5, .nnz = 1, .rowptr = rc.rp, .col = rc.col};
  rc.rp[0] = 0, rc.rp[1] = rc.rp[2] = rc.rp[3] = 1;
  rc.col[0] = 4;
  const int32_t rp3[3] = {2, 0, 1}, cp5[5] = {4, 3, 2, 1, 0};
  CHECK_OK(ts_spy_density(&rc.m, rp3, cp5, 3, 5, g));
  CHECK(g[1 * 5 + 0] == 1.0f, "rectangular entry lands at (1, 0)");
  CHECK_STATUS(ts_spy_density(&e.m, NULL, NULL, 9, 8, g), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_spy_density(&e.m, NULL, NULL, 0, 8, g), TS_ERR_INVALID_ARG);
  e.col[0] = 8;
  CHECK_ERR_CONTAINS(ts_spy_density(&e.m, NULL, NULL, 8, 8, g), "column 8");
  e.col[0] = 5;
  e.rp[1] = 1; /* rowptr goes down from row 1 to row 2 */
  CHECK_ERR_CONTAINS(ts_spy_density(&e.m, NULL, NULL, 8, 8, g), "not monotone");
  e.rp[1] = 0;
}

/* Finds the diagonal of dark (density 1) pixels: returns the count and its top-left corner. */
static int find_dark(const ts_image *img, int32_t xlo, int32_t xhi, int32_t *x0, int32_t *y0) {
  uint32_t dark = ts_spy_color(1.0);
  int n = 0;
  *x0 = *y0 = -1;
  for (int32_t y = 0; y < img->h; y++)
    for (int32_t x = xlo; x < xhi && x < img->w; x++)
      if (px(img, x, y) == dark) {
        if (!n) *x0 = x, *y0 = y;
        n++;
      }
  return n;
}

static void test_render(void) {
  owned_csr d;
  make_diag(&d, 64);
  ts_spy_panel p = {.m = &d.m, .title = "identity", .subtitle = "bandwidth 0"};
  ts_spy_options o = {.size = 64, .heading = "diag:n=64"};
  ts_image one;
  CHECK_OK(ts_spy_render(&p, 1, &o, &one));
  int32_t x0, y0;
  int n = find_dark(&one, 0, one.w, &x0, &y0);
  CHECK(n == 64, "64 dark pixels for a 64-entry diagonal at 1 px per entry, got %d", n);
  if (n == 64) {
    int diag = 1, white = 1;
    for (int32_t y = 0; y < 64; y++)
      for (int32_t x = 0; x < 64; x++) {
        uint32_t c = px(&one, x0 + x, y0 + y);
        if (x == y) diag &= c == ts_spy_color(1.0);
        else white &= c == 0xFFFFFF;
      }
    CHECK(diag && white, "plot area: dark diagonal, white elsewhere");
    CHECK(px(&one, x0 - 1, y0 - 1) != 0xFFFFFF && px(&one, x0 + 64, y0 + 64) != 0xFFFFFF, "frame around the plot");
  }
  /* size 128: each entry becomes a 2x2 block */
  o.size = 128;
  ts_image two;
  CHECK_OK(ts_spy_render(&p, 1, &o, &two));
  CHECK(find_dark(&two, 0, two.w, &x0, &y0) == 4 * 64, "2x2 pixels per entry at size 128");
  ts_image_free(&two);

  /* two panels side by side at 4x4 pixels per entry (wide enough that the panels, not the
   * legend, set the width): same height, one more panel block wide, both diagonals drawn */
  o.size = 256;
  ts_image_free(&one);
  CHECK_OK(ts_spy_render(&p, 1, &o, &one));
  CHECK(find_dark(&one, 0, one.w, &x0, &y0) == 16 * 64, "4x4 pixels per entry at size 256");
  int32_t rev[64];
  for (int i = 0; i < 64; i++) rev[i] = 63 - i; /* P I P^T = I: still a diagonal */
  ts_spy_panel pp[2] = {p, {.m = &d.m, .row_perm = rev, .col_perm = rev, .title = "reversed", .subtitle = "bandwidth 0"}};
  CHECK_OK(ts_spy_render(pp, 2, &o, &two));
  CHECK(two.h == one.h && two.w >= one.w + 256 && two.w <= one.w + 256 + 80, "2 panels: %dx%d vs 1 panel %dx%d",
        two.w, two.h, one.w, one.h);
  int32_t xa, ya, xb, yb;
  int na = find_dark(&two, 0, x0 + 256, &xa, &ya), nb = find_dark(&two, x0 + 256, two.w, &xb, &yb);
  CHECK(na == 16 * 64 && nb == 16 * 64 && ya == yb && xb >= xa + 256 + 8,
        "panels: %d and %d dark pixels at x %d / %d", na, nb, xa, xb);
  ts_image_free(&two);
  ts_image_free(&one);

  /* rectangular, empty, 1x1, size 512 (font scale 2) and bad arguments */
  owned_csr r = {0};
  r.m = (ts_csr){.rows = 3, .cols = 100, .nnz = 0, .rowptr = r.rp, .col = r.col};
  ts_image img;
  CHECK_OK(ts_spy_render(&(ts_spy_panel){.m = &r.m}, 1, NULL, &img));
  CHECK(find_dark(&img, 0, img.w, &x0, &y0) == 0, "an empty pattern has no dark pixels");
  ts_image_free(&img);
  make_diag(&d, 1);
  CHECK_OK(ts_spy_render(&p, 1, &(ts_spy_options){.size = 512}, &img));
  CHECK(find_dark(&img, 0, img.w, &x0, &y0) == 512 * 512, "1x1 full pattern fills the plot");
  ts_image_free(&img);
  CHECK_STATUS(ts_spy_render(&p, 0, NULL, &img), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_spy_render(pp, TS_SPY_MAX_PANELS + 1, NULL, &img), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_spy_render(&p, 1, &(ts_spy_options){.size = 8}, &img), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_spy_render(&(ts_spy_panel){0}, 1, NULL, &img), TS_ERR_INVALID_ARG);
  CHECK(img.rgb == NULL, "no image left behind on error");
}

static void test_svg(void) {
  owned_csr d;
  make_diag(&d, 100);
  ts_spy_panel p = {.m = &d.m, .title = "a<b & \"c\"", .subtitle = "x>y"};
  char *svg = NULL;
  size_t len = 0;
  CHECK_OK(ts_spy_render_svg(&p, 1, &(ts_spy_options){.svg_cells = 10}, &svg, &len));
  if (svg) {
    CHECK(strncmp(svg, "<?xml", 5) == 0 && strstr(svg, "<svg ") && len == strlen(svg) &&
              strcmp(svg + len - 7, "</svg>\n") == 0,
          "SVG document shape");
    CHECK(strstr(svg, "a&lt;b &amp; &quot;c&quot;") && strstr(svg, "x&gt;y"), "title escaped");
    /* a 10x10 grid over a diagonal: 10 diagonal cells of density 0.1 -> 10 runs in the path
     * of ramp step 10 of 32 (sqrt(0.1) * 32 = 10.1), the cells at (i, i) in cell units */
    char head[64];
    snprintf(head, sizeof head, "<path fill=\"#%06x\" d=\"", (unsigned)ts_plot_colormap(10.0 / 32));
    const char *path = strstr(svg, head);
    CHECK(path != NULL, "heat map path %s", head);
    if (path) {
      path += strlen(head);
      int runs = 0, at_diag = 0;
      for (const char *c = path; *c && *c != '"'; c++)
        if (*c == 'M') {
          int x, y;
          runs++;
          if (sscanf(c, "M%d %dh1v1h-1z", &x, &y) == 2 && x == y) at_diag++;
        }
      CHECK(runs == 10 && at_diag == 10, "%d runs, %d on the diagonal (expected 10, 10)", runs, at_diag);
      CHECK(strstr(svg, "<path fill=") == strstr(svg, head), "no other heat color");
    }
  }
  free(svg);

  ts_svg *s;
  CHECK_OK(ts_svg_create(&s, 10, 10));
  ts_svg_text(s, 1, 2, 3, 'm', 0, "ctl\x01\xc3");
  char *text;
  CHECK_OK(ts_svg_finish(s, &text, &len));
  CHECK(strstr(text, ">ctl?\?</text>") != NULL, "control and non-ASCII bytes replaced");
  free(text);
  CHECK_STATUS(ts_svg_finish(s, &text, &len), TS_ERR_INVALID_ARG);
  ts_svg_destroy(s);
  CHECK_STATUS(ts_svg_create(&s, 0, 10), TS_ERR_INVALID_ARG);
}

static void test_write(void) {
  ts_plot_format f;
  CHECK(ts_plot_format_from_path("a/b.png", &f) == TS_OK && f == TS_PLOT_PNG, ".png");
  CHECK(ts_plot_format_from_path("B.SVG", &f) == TS_OK && f == TS_PLOT_SVG, ".SVG");
  CHECK_ERR_CONTAINS(ts_plot_format_from_path("spy.jpg", &f), "'.jpg'");
  CHECK_ERR_CONTAINS(ts_plot_format_from_path("dir.png/spy", &f), "no image extension");
  CHECK_ERR_CONTAINS(ts_plot_format_from_path("spy.", &f), "no image extension");

  owned_csr d;
  make_diag(&d, 50);
  ts_spy_panel p = {.m = &d.m, .title = "t"};
  char path[1100];
  const char *names[2] = {"plot_test_spy.png", "plot_test_spy.svg"};
  const char *magic[2] = {"\x89PNG\r\n\x1a\n", "<?xml"};
  for (int i = 0; i < 2; i++) {
    tst_tmp_path(path, sizeof path, names[i]);
    CHECK_OK(ts_spy_write(path, &p, 1, NULL));
    char *data = NULL;
    size_t len = 0;
    CHECK_OK(ts_read_file(path, &data, &len));
    CHECK(data && len > 8 && memcmp(data, magic[i], strlen(magic[i])) == 0, "%s magic", names[i]);
    free(data);
  }
  tst_tmp_path(path, sizeof path, "plot_test_spy.gif");
  remove(path);
  CHECK_STATUS(ts_spy_write(path, &p, 1, NULL), TS_ERR_UNSUPPORTED);
  FILE *fp = fopen(path, "rb");
  CHECK(fp == NULL, "nothing written for an unknown extension");
  if (fp) fclose(fp);
}

int main(void) {
  test_png_roundtrip();
  test_png_file();
  test_text();
  test_colormap();
  test_density();
  test_render();
  test_svg();
  test_write();
  return tst_finish();
}
