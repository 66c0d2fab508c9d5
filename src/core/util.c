/* Time, PRNG, cache directory, atomic file writes, whole-file reads, terminal progress. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "tessera/core.h"

const char *ts_version(void) { return "0.1.0"; }

double ts_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t ts_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return (uint64_t)(ts_now() * 1e9);
#endif
}

size_t ts_mem_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[128];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    fclose(f);
    if (found) return kib > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kib * 1024;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

ts_cpu_mark ts_cpu_mark_now(void) {
  ts_cpu_mark m = {ts_now(), -1, -1};
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long v[8] = {0};
  const long tck = sysconf(_SC_CLK_TCK);
  if (f) { /* guest time is inside user already */
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) == 8 &&
        tck > 0)
      m.busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)tck;
    fclose(f);
  }
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0) m.own = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  return m;
}

double ts_cpu_others(ts_cpu_mark a, ts_cpu_mark b) {
  const double wall = b.wall - a.wall;
  if (a.busy < 0 || b.busy < 0 || a.own < 0 || b.own < 0 || !(wall >= 0.5)) return -1;
  const double other = ((b.busy - a.busy) - (b.own - a.own)) / wall;
  return other > 0 ? other : 0;
}

/* ---- PRNG: splitmix64 seeding, xoshiro256** stream -------------------------------------- */

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void ts_rng_seed(ts_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ts_rng_next(ts_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double ts_rng_uniform(ts_rng *r) { return (double)(ts_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

uint64_t ts_rng_below(ts_rng *r, uint64_t n) {
  if (n <= 1) return 0;
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = ts_rng_next(r); while (x >= limit);
  return x % n;
}

float ts_rng_normal(ts_rng *r) {
  double u1 = ts_rng_uniform(r), u2 = ts_rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---- files --------------------------------------------------------------------------- */

ts_status ts_mkdirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return ts_error(TS_ERR_INVALID_ARG, "bad directory path '%s'", path);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == 0) {
      char c = buf[i];
      buf[i] = 0;
      if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return ts_error(TS_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
      buf[i] = c;
    }
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return ts_error(TS_ERR_IO, "'%s' is not a directory", path);
  return TS_OK;
}

ts_status ts_cache_dir(char *buf, size_t cap) {
  const char *env = getenv("TESSERA_CACHE");
  int n;
  if (env && *env) {
    n = snprintf(buf, cap, "%s", env);
  } else {
    const char *home = getenv("HOME");
    if (!home || !*home) home = "/tmp";
    n = snprintf(buf, cap, "%s/.cache/tessera", home);
  }
  if (n < 0 || (size_t)n >= cap) return ts_error(TS_ERR_INVALID_ARG, "cache directory path is too long");
  return ts_mkdirs(buf);
}

ts_status ts_write_file_atomic(const char *path, const void *data, size_t len) {
  char tmp[4200];
  /* process and thread in the name: two threads writing one path never share a temporary file */
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%ld", path, (long)getpid(), (long)gettid());
  if (n < 0 || (size_t)n >= sizeof tmp) return ts_error(TS_ERR_INVALID_ARG, "output path is too long: '%s'", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return ts_error(TS_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
  size_t w = len ? fwrite(data, 1, len, f) : 0;
  bool ok = w == len;
  ok = fflush(f) == 0 && ok;
  ok = (fsync(fileno(f)) == 0 || errno == EINVAL) && ok;
  int e = errno;
  if (fclose(f) != 0) ok = false;
  if (!ok) {
    unlink(tmp);
    return ts_error(TS_ERR_IO, "cannot write '%s': %s", path, strerror(e));
  }
  if (rename(tmp, path) != 0) {
    e = errno;
    unlink(tmp);
    return ts_error(TS_ERR_IO, "cannot rename onto '%s': %s", path, strerror(e));
  }
  return TS_OK;
}

ts_status ts_read_file(const char *path, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return ts_error(errno == ENOENT ? TS_ERR_NOT_FOUND : TS_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) { fclose(f); return ts_error(TS_ERR_OOM, "out of memory reading '%s'", path); }
  for (;;) {
    if (n + 1 >= cap) {
      if (cap > ((size_t)1 << 40)) { free(buf); fclose(f); return ts_error(TS_ERR_OVERFLOW, "'%s' is too large", path); }
      char *nb = realloc(buf, cap * 2);
      if (!nb) { free(buf); fclose(f); return ts_error(TS_ERR_OOM, "out of memory reading '%s'", path); }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - 1 - n, f);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) { free(buf); return ts_error(TS_ERR_IO, "cannot read '%s'", path); }
  buf[n] = 0;
  *data = buf;
  if (len) *len = n;
  return TS_OK;
}

/* ---- progress ------------------------------------------------------------------------ */

void ts_progress_begin(ts_progress *p, const char *label, int64_t total) {
  memset(p, 0, sizeof *p);
  p->label = label;
  p->total = total > 0 ? total : 1;
  p->t0 = p->last = ts_now();
  p->tty = isatty(2);
  const char *q = getenv("TESSERA_QUIET");
  p->quiet = q && *q && strcmp(q, "0") != 0;
  p->last_pct = -1;
}

void ts_progress_update(ts_progress *p, int64_t done) {
  if (p->quiet) return;
  double now = ts_now();
  int pct = (int)(100 * done / p->total);
  if (p->tty) {
    if (now - p->last < 0.1 && pct != 100) return;
    double el = now - p->t0;
    double eta = done > 0 ? el * (double)(p->total - done) / (double)done : 0;
    int bar = pct / 5;
    fprintf(stderr, "\r%-24s [%.*s%*s] %3d%% %lld/%lld  %.1fs eta %.1fs ", p->label, bar, "####################",
            20 - bar, "", pct, (long long)done, (long long)p->total, el, eta);
    p->last = now;
  } else if (now - p->last >= 5.0 && pct != p->last_pct) {
    fprintf(stderr, "%s: %d%% (%lld/%lld) %.1fs\n", p->label, pct, (long long)done, (long long)p->total, now - p->t0);
    p->last = now;
    p->last_pct = pct;
  }
}

void ts_progress_end(ts_progress *p) {
  if (p->quiet) return;
  double el = ts_now() - p->t0;
  if (p->tty) fprintf(stderr, "\r%-24s done in %.2fs%*s\n", p->label, el, 40, "");
  else if (el >= 1.0) fprintf(stderr, "%s: done in %.2fs\n", p->label, el);
}
