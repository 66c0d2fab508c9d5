/* Throwaway measurement for docs/notes/avx2-llm-gap.md (not built by CMake): gcc -O2 -std=c17
 * -D_GNU_SOURCE -mavx2 -mfma -mf16c [-fopenmp + omp pragmas on the timed loops] avx2-llm-gap-q41-4row.c */
/* Microbench: AVX2 Q4_1 x Q8_1 dot, current 1-row kernel (copy of quant_avx2.c) vs a 4-row tile on
 * a packed group layout (per block: d[4] m[4] fp16, qs[4][16]); bit-exact check per row. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef struct __attribute__((packed)) { uint16_t d, m; uint8_t qs[16]; } blk;
typedef struct { uint16_t d[4], m[4]; uint8_t qs[4][16]; } gblk; /* 80 B = 4 x 20 */
static inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
static inline __m256 lanes(__m256i u, __m256i s) {
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
static inline __m256i nib_one(const uint8_t *qa) {
  __m128i a = _mm_loadu_si128((const __m128i *)qa);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(a, 4), a), _mm256_set1_epi8(0x0F));
}
__attribute__((noinline)) float dot1(int nb, const blk *b, const int8_t *xq, const float *xd, const float *xs) {
  __m256 acc = _mm256_setzero_ps(); float summs = 0;
  for (int k = 0; k < nb; k++) {
    summs += _cvtsh_ss(b[k].m) * xs[k];
    acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[k].d) * xd[k]), lanes(nib_one(b[k].qs), _mm256_loadu_si256((const __m256i *)(xq + 32 * k))), acc);
  }
  return hsum256(acc) + summs;
}
/* 4 rows: two 32-byte loads hold rows (0,1) and (2,3); lo nibbles pair with [x0..15|x0..15], hi with
 * [x16..31|x16..31]; the int32 group sums are regrouped per row with vperm2i128 (exact). */
__attribute__((noinline)) void dot4(int nb, const gblk *g, const int8_t *xq, const float *xd, const float *xs, float *y) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  __m128 sm = _mm_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi16(1);
  for (int k = 0; k < nb; k++) {
    const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + 32 * k));
    const __m256i xl = _mm256_permute2x128_si256(x, x, 0x00), xh = _mm256_permute2x128_si256(x, x, 0x11);
    const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g[k].d)); /* d0..3 m0..3 */
    const __m128 sc = _mm_mul_ps(_mm256_castps256_ps128(dm), _mm_set1_ps(xd[k]));
    sm = _mm_add_ps(sm, _mm_mul_ps(_mm256_extractf128_ps(dm, 1), _mm_set1_ps(xs[k])));
    const __m256 sc8 = _mm256_castps128_ps256(sc);
    const __m256i v01 = _mm256_loadu_si256((const __m256i *)g[k].qs[0]), v23 = _mm256_loadu_si256((const __m256i *)g[k].qs[2]);
    const __m256i l01 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v01, m4), xl), one);
    const __m256i h01 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v01, 4), m4), xh), one);
    const __m256i l23 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v23, m4), xl), one);
    const __m256i h23 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v23, 4), m4), xh), one);
    a0 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(sc8, _mm256_set1_epi32(0)), _mm256_cvtepi32_ps(_mm256_permute2x128_si256(l01, h01, 0x20)), a0);
    a1 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(sc8, _mm256_set1_epi32(1)), _mm256_cvtepi32_ps(_mm256_permute2x128_si256(l01, h01, 0x31)), a1);
    a2 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(sc8, _mm256_set1_epi32(2)), _mm256_cvtepi32_ps(_mm256_permute2x128_si256(l23, h23, 0x20)), a2);
    a3 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(sc8, _mm256_set1_epi32(3)), _mm256_cvtepi32_ps(_mm256_permute2x128_si256(l23, h23, 0x31)), a3);
  }
  float s[4]; _mm_storeu_ps(s, sm);
  y[0] = hsum256(a0) + s[0]; y[1] = hsum256(a1) + s[1]; y[2] = hsum256(a2) + s[2]; y[3] = hsum256(a3) + s[3];
}
/* dot4b: no per-block regrouping: accumulators hold [row a groups 0-3 | row b groups 0-3] (lo) and
 * [.. groups 4-7 ..] (hi), scale vector [s_a x4 | s_b x4]; each lane runs the per-row lane's exact
 * fma sequence, so the bits equal; regrouped once at the end. Activation pre-expanded: xe[k] =
 * [x0..15|x0..15][x16..31|x16..31] (once per token). */
__attribute__((noinline)) void dot4b(int nb, const gblk *g, const int8_t *xe, const float *xd, const float *xs, float *y) {
  __m256 l01 = _mm256_setzero_ps(), h01 = l01, l23 = l01, h23 = l01;
  __m128 sm = _mm_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi16(1);
  const __m256i i01 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), i23 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  for (int k = 0; k < nb; k++) {
    const __m256i xl = _mm256_load_si256((const __m256i *)(xe + 64 * k)), xh = _mm256_load_si256((const __m256i *)(xe + 64 * k + 32));
    const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g[k].d));
    const __m128 sc = _mm_mul_ps(_mm256_castps256_ps128(dm), _mm_set1_ps(xd[k]));
    sm = _mm_add_ps(sm, _mm_mul_ps(_mm256_extractf128_ps(dm, 1), _mm_set1_ps(xs[k])));
    const __m256 sc8 = _mm256_castps128_ps256(sc), s01 = _mm256_permutevar8x32_ps(sc8, i01), s23 = _mm256_permutevar8x32_ps(sc8, i23);
    const __m256i v01 = _mm256_loadu_si256((const __m256i *)g[k].qs[0]), v23 = _mm256_loadu_si256((const __m256i *)g[k].qs[2]);
    l01 = _mm256_fmadd_ps(s01, _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v01, m4), xl), one)), l01);
    h01 = _mm256_fmadd_ps(s01, _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v01, 4), m4), xh), one)), h01);
    l23 = _mm256_fmadd_ps(s23, _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v23, m4), xl), one)), l23);
    h23 = _mm256_fmadd_ps(s23, _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v23, 4), m4), xh), one)), h23);
  }
  float s[4]; _mm_storeu_ps(s, sm);
  y[0] = hsum256(_mm256_permute2f128_ps(l01, h01, 0x20)) + s[0]; y[1] = hsum256(_mm256_permute2f128_ps(l01, h01, 0x31)) + s[1];
  y[2] = hsum256(_mm256_permute2f128_ps(l23, h23, 0x20)) + s[2]; y[3] = hsum256(_mm256_permute2f128_ps(l23, h23, 0x31)) + s[3];
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
  const int cols = 576, nb = cols / 32;
  const size_t rows_warm = 1536, rows_stream = (size_t)256 << 20 / 1, rs = rows_stream / (nb * 20) / 4 * 4;
  (void)rows_warm;
  blk *W = aligned_alloc(64, rs * nb * sizeof(blk)); gblk *G = aligned_alloc(64, rs / 4 * nb * sizeof(gblk));
  srand(1);
  for (size_t i = 0; i < rs * nb; i++) {
    W[i].d = _cvtss_sh((rand() % 1000 - 500) * 1e-5f, 0); W[i].m = _cvtss_sh((rand() % 1000 - 500) * 1e-4f, 0);
    for (int j = 0; j < 16; j++) W[i].qs[j] = rand();
  }
  for (size_t r = 0; r < rs; r++) for (int k = 0; k < nb; k++) {
    gblk *g = &G[(r / 4) * nb + k]; const blk *b = &W[r * nb + k];
    g->d[r % 4] = b->d; g->m[r % 4] = b->m; memcpy(g->qs[r % 4], b->qs, 16);
  }
  int8_t xq[576]; float xd[18], xs[18];
  for (int i = 0; i < 576; i++) xq[i] = rand() % 255 - 127;
  for (int k = 0; k < nb; k++) { xd[k] = _cvtsh_ss(_cvtss_sh((rand() % 100 + 1) * 1e-3f, 0)); xs[k] = _cvtsh_ss(_cvtss_sh((rand() % 2000 - 1000) * 1e-2f, 0)); }
  float *y1 = malloc(rs * 4), *y4 = malloc(rs * 4), *y5 = malloc(rs * 4);
  _Alignas(32) int8_t xe[64 * 48];
  for (int k = 0; k < nb; k++) { memcpy(xe + 64 * k, xq + 32 * k, 16); memcpy(xe + 64 * k + 16, xq + 32 * k, 16); memcpy(xe + 64 * k + 32, xq + 32 * k + 16, 16); memcpy(xe + 64 * k + 48, xq + 32 * k + 16, 16); }
  for (size_t r = 0; r < rs; r += 4) dot4b(nb, G + (r / 4) * nb, xe, xd, xs, y5 + r);
  for (size_t r = 0; r < rs; r++) y1[r] = dot1(nb, W + r * nb, xq, xd, xs);
  for (size_t r = 0; r < rs; r += 4) dot4(nb, G + (r / 4) * nb, xq, xd, xs, y4 + r);
  size_t bad = 0; for (size_t r = 0; r < rs; r++) bad += memcmp(&y1[r], &y4[r], 4) != 0;
  printf("rows %zu, bit mismatches %zu\n", rs, bad);
  { size_t bad5 = 0; for (size_t r = 0; r < rs; r++) bad5 += memcmp(&y1[r], &y5[r], 4) != 0; printf("dot4b mismatches %zu\n", bad5); }
  size_t wr = 1536; /* warm: 1536 x 576 (553 KB) repeated */
  for (int mode = 0; mode < 2; mode++) {
    size_t R = mode ? rs : wr; int reps = mode ? 3 : 400;
    double b1 = 1e9, b4 = 1e9, b5 = 1e9;
    for (int rep = 0; rep < 5; rep++) {
      double t = now();
      for (int i = 0; i < reps; i++) for (size_t r = 0; r < R; r++) y1[r] = dot1(nb, W + r * nb, xq, xd, xs);
      t = now() - t; if (t < b1) b1 = t;
      t = now();
      for (int i = 0; i < reps; i++) for (size_t r = 0; r < R; r += 4) dot4(nb, G + (r / 4) * nb, xq, xd, xs, y4 + r);
      t = now() - t; if (t < b4) b4 = t;
      t = now();
      for (int i = 0; i < reps; i++) for (size_t r = 0; r < R; r += 4) dot4b(nb, G + (r / 4) * nb, xe, xd, xs, y5 + r);
      t = now() - t; if (t < b5) b5 = t;
    }
    printf("   4-row no-regroup: %.2f GB/s (%.2f Gblk/s) x%.2f\n", (double)R * nb * 20 * reps / b5 / 1e9, (double)R * nb * reps / b5 / 1e9, b1 / b5);
    double bytes = (double)R * nb * 20 * reps;
    printf("%s %zu rows: 1-row %.2f GB/s (%.2f Gblk/s)  4-row %.2f GB/s (%.2f Gblk/s)  x%.2f\n", mode ? "stream" : "warm  ", R, bytes / b1 / 1e9,
           bytes / 20 / b1 / 1e9, bytes / b4 / 1e9, bytes / 20 / b4 / 1e9, b1 / b4);
  }
  return 0;
}
