/* The backward's SIMD micro-kernels (contracts: attn_internal.h, ts__attn_bwd_kern), written once
 * against the vf_ layer and compiled per ISA by attn_bwd_avx2.c and attn_bwd_avx512.c, which first
 * include their vf_ layer and define
 *   BWD_LANES(mk, v): the vmask of lane vector v (rows VL v .. VL v + VL - 1) from one key's 16-bit
 *                     mask words mk (ts__attn_item's layout);
 *   BWD_CV:           the most column vectors per dK / dV register block (4 keys x BWD_CV VL
 *                     columns; the d columns are cut into as few such chunks as possible).
 *
 *   pds:      query rows in the lanes (S^T, dP^T are [key][row]): per key and lane vector, one exp2,
 *             a select by the mask, and dS = scale P (dP - Dr).
 *   kv:       key-major: 4 keys x BWD_CV vectors of columns in registers, the item's rows streamed
 *             (one row load shared by the 4 keys, P broadcast per key and row), so each key's
 *             partial row is read and written once per item (or added atomically once).
 *   kv_diag:  the same per run of consecutive offsets: keys v0 + s (v0 = row0 + first offset) meet
 *             row i at offset s - i, so 4 consecutive keys share each row load. */
#include <string.h>

#define UNROLL _Pragma("GCC unroll 16")
#define AI static inline __attribute__((always_inline))

/* 2^x for x clamped to [-151, 128] (2^-151 underflows to 0), degree-7 Taylor polynomial of 2^f,
 * |f| <= 1/2, scaled by 2^n: the forward kernels' exp2. */
AI vf bwd_exp2(vf x) {
  x = vf_min(vf_set1(128.0f), vf_max(vf_set1(-151.0f), x));
  const vf nn = vf_round(x), f = vf_sub(x, nn);
  vf p = vf_set1(1.525273380405984e-05f);
  p = vf_fmadd(p, f, vf_set1(1.5403530393381606e-04f));
  p = vf_fmadd(p, f, vf_set1(1.3333558146428443e-03f));
  p = vf_fmadd(p, f, vf_set1(9.618129107628477e-03f));
  p = vf_fmadd(p, f, vf_set1(5.550410866482158e-02f));
  p = vf_fmadd(p, f, vf_set1(2.402265069591007e-01f));
  p = vf_fmadd(p, f, vf_set1(6.931471805599453e-01f));
  p = vf_fmadd(p, f, vf_set1(1.0f));
  return vf_ldexp(p, nn);
}

static void bwd_pds(const float *s, int64_t lds_s, float *pt, float *dpt, int64_t lds, int bc, int br, const uint16_t *mask,
                    float c, const float *lse2, const float *dr, float scale) {
  const int nv = (br + VL - 1) / VL, nw = (br + 15) / 16;
  const vf vc = vf_set1(c), vs = vf_set1(scale), zero = vf_zero();
  for (int v = 0; v < nv; v++) {
    const vf nl = vf_sub(zero, vf_loadu(lse2 + VL * v)), vdr = vf_loadu(dr + VL * v);
    for (int64_t j = 0; j < bc; j++) {
      vf p = bwd_exp2(vf_fmadd(vf_loadu(s + j * lds_s + VL * v), vc, nl));
      vf ds = vf_mul(vf_mul(p, vs), vf_sub(vf_loadu(dpt + j * lds + VL * v), vdr));
      if (mask) { /* exact zeros off the mask (S and dP may be stale there) */
        const vmask m = BWD_LANES(mask + j * nw, v);
        p = vf_select(m, p, zero);
        ds = vf_select(m, ds, zero);
      }
      vf_storeu(pt + j * lds + VL * v, p);
      vf_storeu(dpt + j * lds + VL * v, ds);
    }
  }
}

/* Keys dk[u] (u < U; NULL: outside the head, nothing stored) x columns [e0, e0 + cnt), cnt <= CV VL:
 * dk[u][e] += sum over rows i in [i0, i1) of P(u, i) rows[i][e] with P(u, i) = pt[pidx[u] + i step]
 * (tiles: step 1, every row; DIAG: step 1 - lds, rows [lo[u], hi[u]) only). full: cnt == CV VL. */
AI void kv_block(const float *pt, const int64_t *pidx, int64_t step, const int *lo, const int *hi, int U, const float *rows,
                 int64_t ldr, int i0, int i1, float *const *dk, const bool *fresh, int64_t e0, int cnt, const int CV, bool full,
                 bool atomic, bool diag) {
  vf acc[4][BWD_CV];
  int cc[BWD_CV]; /* columns of each vector */
  UNROLL for (int x = 0; x < CV; x++) cc[x] = full ? VL : cnt - VL * x > VL ? VL : cnt - VL * x > 0 ? cnt - VL * x : 0;
  UNROLL for (int u = 0; u < 4; u++) UNROLL for (int x = 0; x < CV; x++) {
    if (u >= U || atomic || !dk[u] || fresh[u]) acc[u][x] = vf_zero();
    else acc[u][x] = full ? vf_loadu(dk[u] + e0 + VL * x) : vf_load_part(dk[u] + e0 + VL * x, cc[x], 0.0f);
  }
  for (int i = i0; i < i1; i++) {
    vf r[BWD_CV];
    const float *ri = rows + (int64_t)i * ldr + e0;
    UNROLL for (int x = 0; x < CV; x++) r[x] = full ? vf_loadu(ri + VL * x) : vf_load_part(ri + VL * x, cc[x], 0.0f);
    UNROLL for (int u = 0; u < 4; u++) {
      if (u >= U || (diag && (i < lo[u] || i >= hi[u]))) continue;
      const vf p = vf_set1(pt[pidx[u] + i * step]);
      UNROLL for (int x = 0; x < CV; x++) acc[u][x] = vf_fmadd(p, r[x], acc[u][x]);
    }
  }
  UNROLL for (int u = 0; u < 4; u++) {
    if (u >= U || !dk[u]) continue;
    if (atomic) {
      float tmp[BWD_CV * VL];
      UNROLL for (int x = 0; x < CV; x++) vf_storeu(tmp + VL * x, acc[u][x]);
      ts__attn_atomic_add(dk[u] + e0, tmp, cnt);
    } else {
      UNROLL for (int x = 0; x < CV; x++) {
        if (full) vf_storeu(dk[u] + e0 + VL * x, acc[u][x]);
        else if (cc[x] > 0) vf_store_part(dk[u] + e0 + VL * x, acc[u][x], cc[x]);
      }
    }
  }
}

/* All d columns of up to 4 keys: the column vectors cut into as few chunks of at most BWD_CV as
 * possible, spread evenly (d = 64 on AVX2: 3 + 3 + 2 vectors); whole chunks of 4 keys run the
 * specialized blocks, the rest (a partial last vector, fewer keys) the general one. */
AI void kv_cols(const float *pt, const int64_t *pidx, int64_t step, const int *lo, const int *hi, int U, const float *rows,
                int64_t ldr, int i0, int i1, float *const *dk, const bool *fresh, int64_t d, bool atomic, bool diag) {
  const int nvec = (int)((d + VL - 1) / VL), nch = (nvec + BWD_CV - 1) / BWD_CV;
  int64_t e0 = 0;
  for (int c = 0, done = 0; c < nch; c++) {
    const int cv = (nvec - done + (nch - c) - 1) / (nch - c), cnt = d - e0 < cv * VL ? (int)(d - e0) : cv * VL;
    if (U == 4 && cnt == cv * VL) {
      switch (cv) {
        case 1: kv_block(pt, pidx, step, lo, hi, 4, rows, ldr, i0, i1, dk, fresh, e0, cnt, 1, true, atomic, diag); break;
        case 2: kv_block(pt, pidx, step, lo, hi, 4, rows, ldr, i0, i1, dk, fresh, e0, cnt, 2, true, atomic, diag); break;
#if BWD_CV >= 3
        case 3: kv_block(pt, pidx, step, lo, hi, 4, rows, ldr, i0, i1, dk, fresh, e0, cnt, 3, true, atomic, diag); break;
#endif
#if BWD_CV >= 4
        case 4: kv_block(pt, pidx, step, lo, hi, 4, rows, ldr, i0, i1, dk, fresh, e0, cnt, 4, true, atomic, diag); break;
#endif
        default: break;
      }
    } else {
      kv_block(pt, pidx, step, lo, hi, U, rows, ldr, i0, i1, dk, fresh, e0, cnt, BWD_CV, false, atomic, diag);
    }
    e0 += cnt, done += cv;
  }
}

static void bwd_kv(const float *pt, int64_t lds, const float *rows, int64_t d, int bc, int br, float *dst, int64_t key0,
                   const int32_t *runs, int rl, bool atomic, uint8_t *seen) {
  for (int j0 = 0; j0 < bc; j0 += 4) {
    const int U = bc - j0 < 4 ? bc - j0 : 4;
    float *dk[4] = {NULL, NULL, NULL, NULL};
    int64_t pidx[4] = {0, 0, 0, 0};
    bool fresh[4] = {false, false, false, false};
    for (int u = 0; u < U; u++) {
      const int j = j0 + u;
      const int64_t key = runs ? (int64_t)runs[j / rl] + j % rl : key0 + j;
      dk[u] = dst + key * d;
      pidx[u] = (int64_t)j * lds;
      if (seen) fresh[u] = !seen[key], seen[key] = 1;
    }
    if (atomic) kv_cols(pt, pidx, 1, NULL, NULL, U, rows, d, 0, br, dk, fresh, d, true, false);
    else kv_cols(pt, pidx, 1, NULL, NULL, U, rows, d, 0, br, dk, fresh, d, false, false);
  }
}

static void bwd_kv_diag(const float *pt, int64_t lds, const float *rows, int64_t d, int64_t n, int64_t row0,
                        const int32_t *offs, int nd, int br, float *dst, bool atomic, uint8_t *seen) {
  const float *rw = rows + row0 * d; /* the item's first row */
  for (int ta = 0, tb; ta < nd; ta = tb) {
    tb = ts__attn_run_end(offs, nd, ta);
    const int L = tb - ta, nk = L + br - 1;
    const int64_t v0 = row0 + offs[ta];
    for (int s0 = 0; s0 < nk; s0 += 4) {
      const int U = nk - s0 < 4 ? nk - s0 : 4;
      float *dk[4] = {NULL, NULL, NULL, NULL};
      int64_t pidx[4] = {0, 0, 0, 0};
      int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0}, i0 = br, i1 = 0;
      bool fresh[4] = {false, false, false, false};
      for (int u = 0; u < U; u++) { /* key s = s0 + u meets row i at offset ta + s - i, s - i in [0, L) */
        const int s = s0 + u;
        const int64_t key = v0 + s;
        dk[u] = key >= 0 && key < n ? dst + key * d : NULL;
        lo[u] = s - L + 1 > 0 ? s - L + 1 : 0;
        hi[u] = s + 1 < br ? s + 1 : br;
        /* P(u, i) = pt[(ta + s - i) lds + i] = pt[(ta + s) lds + i (1 - lds)] */
        pidx[u] = (int64_t)(ta + s) * lds;
        if (dk[u]) i0 = lo[u] < i0 ? lo[u] : i0, i1 = hi[u] > i1 ? hi[u] : i1;
      }
      if (i0 >= i1) continue;
      for (int u = 0; u < U; u++)
        if (seen && dk[u]) fresh[u] = !seen[v0 + s0 + u], seen[v0 + s0 + u] = 1;
      if (atomic) kv_cols(pt, pidx, 1 - lds, lo, hi, U, rw, d, i0, i1, dk, fresh, d, true, true);
      else kv_cols(pt, pidx, 1 - lds, lo, hi, U, rw, d, i0, i1, dk, fresh, d, false, true);
    }
  }
}
