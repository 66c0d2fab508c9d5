/* FFT convolution (stride 1) through FFTW, overlap-save tiles.
 * Each output tile of mh x mw (m = F - kernel extent + 1) is the valid part of the circular
 * correlation of an Fh x Fw input patch with the zero-padded kernel: Y = X . conj(W) per bin.
 * The sum over channels is one real GEMM per frequency bin f (nbins = Fh * (Fw/2 + 1)):
 *   [Yr | Yi] (kg x 2T) = [Wr | Wi] (kg x 2cg) x [[Xr, Xi], [Xi, -Xr]] (2cg x 2T)
 * since (Xr + iXi)(Wr - iWi) = (Xr Wr + Xi Wi) + i (Xi Wr - Xr Wi).
 * F: the whole padded input when it fits in the tile (smooth size 2^a 3^b 5^c 7^d), else 16 for
 * kernel extents <= 5 and the power of two >= 4x the extent above. Kernel spectra
 * [groups][nbins][kg][2cg] are made at set_weights; FFTW plans (FFTW_ESTIMATE, unaligned, executed
 * with fftwf_execute_dft_* on per-thread buffers, which FFTW allows concurrently) at plan time. */
#include <fftw3.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "tessera/kernels.h"

static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER; /* the FFTW planner is not thread-safe */

enum { WS_BUDGET = 64 << 20 }; /* bytes for the spectra of one tile block */

typedef struct fft_state {
  int fh, fw, mh, mw, th, tw, tiles, tb, nbins;
  float *W;       /* [groups][nbins][kg][2cg] */
  fftwf_plan fwd, inv;
  size_t x_bytes, y_bytes, buf_bytes;
} fft_state;

static ts_status fft_check(const ts_conv_desc *d) {
  if (d->stride_h != 1 || d->stride_w != 1)
    return ts_error(TS_ERR_UNSUPPORTED, "fft: needs stride 1, got stride %dx%d", d->stride_h, d->stride_w);
  return TS_OK;
}

static int smooth_size(int x) {
  for (int n = x;; n++) {
    int v = n;
    for (int f = 2; f <= 7; f++)
      while (v % f == 0) v /= f;
    if (v == 1) return n;
  }
}

static int fft_len(int padded, int extent) {
  int f = 16;
  if (extent > 5)
    for (f = 16; f < 4 * extent; f *= 2) {
    }
  return padded <= f ? smooth_size(padded) : f;
}

static void fft_destroy(ts_conv_plan *pl) {
  fft_state *st = pl->state;
  if (!st) return;
  pthread_mutex_lock(&planner_lock);
  if (st->fwd) fftwf_destroy_plan(st->fwd);
  if (st->inv) fftwf_destroy_plan(st->inv);
  pthread_mutex_unlock(&planner_lock);
  ts_free(st->W);
  free(st);
  pl->state = NULL;
}

static ts_status fft_init(ts_conv_plan *pl) {
  const ts_conv_desc *d = &pl->d;
  fft_state *st = calloc(1, sizeof *st);
  if (!st) return ts_error(TS_ERR_OOM, "fft: out of memory");
  pl->state = st;
  const int eh = (d->r - 1) * d->dilation_h + 1, ew = (d->s - 1) * d->dilation_w + 1;
  st->fh = fft_len(d->h + d->pad_top + d->pad_bottom, eh);
  st->fw = fft_len(d->w + d->pad_left + d->pad_right, ew);
  st->mh = st->fh - eh + 1, st->mw = st->fw - ew + 1;
  st->th = (pl->p + st->mh - 1) / st->mh, st->tw = (pl->q + st->mw - 1) / st->mw;
  st->tiles = d->n * st->th * st->tw;
  st->nbins = st->fh * (st->fw / 2 + 1);
  const size_t per_tile = (size_t)st->nbins * (4 * pl->cg + 2 * pl->kg) * sizeof(float);
  st->tb = (int)(WS_BUDGET / per_tile);
  if (st->tb < 1) st->tb = 1;
  if (st->tb > st->tiles) st->tb = st->tiles;
  st->x_bytes = ts__conv_align((size_t)st->nbins * 2 * pl->cg * 2 * st->tb * sizeof(float));
  st->y_bytes = ts__conv_align((size_t)st->nbins * pl->kg * 2 * st->tb * sizeof(float));
  st->buf_bytes = ts__conv_align((size_t)st->fh * st->fw * sizeof(float)) + ts__conv_align((size_t)st->nbins * sizeof(fftwf_complex));
  pl->workspace = st->x_bytes + st->y_bytes + (size_t)pl->threads * st->buf_bytes;
  pl->state_bytes = (size_t)st->nbins * d->k * 2 * pl->cg * sizeof(float);
  st->W = ts_malloc(pl->state_bytes);
  float *rb = fftwf_alloc_real((size_t)st->fh * st->fw);
  fftwf_complex *cb = fftwf_alloc_complex((size_t)st->nbins);
  if (!st->W || !rb || !cb) {
    fftwf_free(rb), fftwf_free(cb);
    return ts_error(TS_ERR_OOM, "fft: out of memory for %d bins x %d x %d kernel spectra", st->nbins, d->k, pl->cg);
  }
  pthread_mutex_lock(&planner_lock);
  st->fwd = fftwf_plan_dft_r2c_2d(st->fh, st->fw, rb, cb, FFTW_ESTIMATE | FFTW_UNALIGNED);
  st->inv = fftwf_plan_dft_c2r_2d(st->fh, st->fw, cb, rb, FFTW_ESTIMATE | FFTW_UNALIGNED);
  pthread_mutex_unlock(&planner_lock);
  fftwf_free(rb), fftwf_free(cb);
  if (!st->fwd || !st->inv) return ts_error(TS_ERR_INTERNAL, "fft: FFTW could not plan a %dx%d transform", st->fh, st->fw);
  return TS_OK;
}

static ts_status fft_weights(ts_conv_plan *pl) {
  const ts_conv_desc *d = &pl->d;
  fft_state *st = pl->state;
  const int cg = pl->cg, kg = pl->kg, rs = d->r * d->s;
  int failed = 0;
#pragma omp parallel num_threads(pl->threads)
  {
    float *rb = fftwf_alloc_real((size_t)st->fh * st->fw);
    fftwf_complex *cb = fftwf_alloc_complex((size_t)st->nbins);
    if (!rb || !cb) {
#pragma omp atomic write
      failed = 1;
    } else {
#pragma omp for schedule(static)
      for (int kc = 0; kc < d->k * cg; kc++) {
        const int k = kc / cg, c = kc % cg, grp = k / kg, kl = k % kg;
        memset(rb, 0, (size_t)st->fh * st->fw * sizeof(float));
        for (int t = 0; t < rs; t++)
          rb[(size_t)(t / d->s) * d->dilation_h * st->fw + (t % d->s) * d->dilation_w] = pl->weights[(size_t)kc * rs + t];
        fftwf_execute_dft_r2c(st->fwd, rb, cb);
        for (int f = 0; f < st->nbins; f++) {
          float *w = st->W + (((size_t)grp * st->nbins + f) * kg + kl) * 2 * cg;
          w[c] = cb[f][0], w[cg + c] = cb[f][1];
        }
      }
    }
    fftwf_free(rb), fftwf_free(cb);
  }
  if (failed) return ts_error(TS_ERR_OOM, "fft: out of memory for transform buffers");
  return TS_OK;
}

static ts_status fft_execute(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  const ts_conv_desc *d = &pl->d;
  const fft_state *st = pl->state;
  const int cg = pl->cg, kg = pl->kg, per_img = st->th * st->tw, fh = st->fh, fw = st->fw, nbins = st->nbins;
  const size_t pq = (size_t)pl->p * pl->q;
  const float scale = 1.0f / ((float)fh * fw);
  float *X = (float *)ws, *Y = (float *)(ws + st->x_bytes);
  unsigned char *bufs = ws + st->x_bytes + st->y_bytes;
  const size_t rbytes = ts__conv_align((size_t)fh * fw * sizeof(float));
  int failed = 0;
  for (int g = 0; g < d->groups; g++)
    for (int t0 = 0; t0 < st->tiles; t0 += st->tb) {
      const int nb = st->tiles - t0 < st->tb ? st->tiles - t0 : st->tb, ldx = 2 * nb;
#pragma omp parallel num_threads(pl->threads)
      {
        float *rb = (float *)(bufs + (size_t)omp_get_thread_num() * st->buf_bytes);
        fftwf_complex *cb = (fftwf_complex *)((unsigned char *)rb + rbytes);
        /* input spectra: X[f] [2cg][2nb] */
#pragma omp for schedule(static) collapse(2)
        for (int c = 0; c < cg; c++)
          for (int j = 0; j < nb; j++) {
            const int t = t0 + j, n = t / per_img, y0 = ((t % per_img) / st->tw) * st->mh - d->pad_top,
                      x0 = (t % st->tw) * st->mw - d->pad_left;
            const float *x = in + ((size_t)n * d->c + (size_t)g * cg + c) * d->h * d->w;
            for (int i = 0; i < fh; i++)
              for (int jj = 0; jj < fw; jj++) {
                const int ih = y0 + i, iw = x0 + jj;
                rb[i * fw + jj] = (ih >= 0 && ih < d->h && iw >= 0 && iw < d->w) ? x[(size_t)ih * d->w + iw] : 0.0f;
              }
            fftwf_execute_dft_r2c(st->fwd, rb, cb);
            for (int f = 0; f < nbins; f++) {
              float *xf = X + (size_t)f * 2 * cg * ldx;
              const float re = cb[f][0], im = cb[f][1];
              xf[(size_t)c * ldx + j] = re, xf[(size_t)c * ldx + nb + j] = im;
              xf[(size_t)(cg + c) * ldx + j] = im, xf[(size_t)(cg + c) * ldx + nb + j] = -re;
            }
          }
        /* one GEMM per bin; inside the parallel region ts_sgemm runs on the calling thread */
#pragma omp for schedule(dynamic)
        for (int f = 0; f < nbins; f++)
          if (ts_sgemm(pl->ctx, TS_NO_TRANS, TS_NO_TRANS, kg, ldx, 2 * cg, 1.0f,
                       st->W + ((size_t)g * nbins + f) * kg * 2 * cg, 2 * cg, X + (size_t)f * 2 * cg * ldx, ldx, 0.0f,
                       Y + (size_t)f * kg * ldx, ldx) != TS_OK) {
#pragma omp atomic write
            failed = 1;
          }
#pragma omp for schedule(static) collapse(2)
        for (int k = 0; k < kg; k++)
          for (int j = 0; j < nb; j++) {
            const int t = t0 + j, n = t / per_img, y0 = ((t % per_img) / st->tw) * st->mh,
                      x0 = (t % st->tw) * st->mw, kk = g * kg + k;
            for (int f = 0; f < nbins; f++) {
              const float *yf = Y + ((size_t)f * kg + k) * ldx;
              cb[f][0] = yf[j], cb[f][1] = yf[nb + j];
            }
            fftwf_execute_dft_c2r(st->inv, cb, rb);
            float *o = out + ((size_t)n * d->k + kk) * pq;
            const float b = pl->bias[kk];
            for (int i = 0; i < st->mh && y0 + i < pl->p; i++)
              for (int jj = 0; jj < st->mw && x0 + jj < pl->q; jj++) {
                const float v = rb[i * fw + jj] * scale + b;
                o[(size_t)(y0 + i) * pl->q + x0 + jj] = d->relu && v < 0.0f ? 0.0f : v;
              }
          }
      }
      if (failed) return ts_error(TS_ERR_INTERNAL, "fft: ts_sgemm failed on a frequency bin");
    }
  return TS_OK;
}

const ts__conv_algo_ops ts__conv_ops_fft = {fft_check, fft_init, fft_weights, fft_execute, fft_destroy};
