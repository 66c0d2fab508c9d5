/* Pipeline descriptions: checks, plane sizes, the kernel contract's input spans, names. */
#include <string.h>

#include "tessera/pipe.h"

static int level_size(int n, int lvl) { return (int)(((int64_t)n + (1 << lvl) - 1) >> lvl); }

void ts_pipe_stage_size(const ts_pipe_desc *d, int s, int *w, int *h) {
  *w = level_size(d->width, d->stage[s].level);
  *h = level_size(d->height, d->stage[s].level);
}

/* Floor division for a possibly negative numerator. */
static int fdiv2(int a) { return a >= 0 ? a / 2 : -((1 - a) / 2); }

void ts_pipe_input_span(int lvl, int lvl_in, int halo, int n_in, int a, int b, int *lo, int *hi) {
  int l, h;
  if (lvl_in == lvl) {
    l = a - halo;
    h = b - 1 + halo;
  } else if (lvl_in == lvl - 1) { /* input finer: 2x2 downsampling */
    l = 2 * a - halo;
    h = 2 * (b - 1) + 1 + halo;
  } else { /* input coarser: nearest upsampling */
    l = fdiv2(a) - halo;
    h = fdiv2(b - 1) + halo;
  }
  if (l < 0) l = 0;
  if (h > n_in - 1) h = n_in - 1;
  if (l > n_in - 1) l = n_in - 1;
  if (h < 0) h = 0;
  *lo = l;
  *hi = h;
}

ts_status ts_pipe_desc_check(const ts_pipe_desc *d) {
  if (!d) return ts_error(TS_ERR_INVALID_ARG, "pipe: no description");
  const char *nm = d->name ? d->name : "pipeline";
  if (d->width < 1 || d->height < 1)
    return ts_error(TS_ERR_INVALID_ARG, "pipe %s: domain %dx%d (each must be >= 1)", nm, d->width, d->height);
  if (d->width > (1 << 20) || d->height > (1 << 20))
    return ts_error(TS_ERR_INVALID_ARG, "pipe %s: domain %dx%d (each must be <= 1048576)", nm, d->width, d->height);
  if (d->nstages < 1 || d->nstages > TS_PIPE_MAX_STAGES)
    return ts_error(TS_ERR_INVALID_ARG, "pipe %s: %d stages (1..%d)", nm, d->nstages, TS_PIPE_MAX_STAGES);
  const ts_pipe_stage *last = &d->stage[d->nstages - 1];
  for (int s = 0; s < d->nstages; s++) {
    const ts_pipe_stage *st = &d->stage[s];
    const char *sn = st->name ? st->name : "?";
    if (!st->run) return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d (%s) has no kernel", nm, s, sn);
    if (st->level < 0 || st->level > TS_PIPE_MAX_LEVEL)
      return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d (%s): level %d (0..%d)", nm, s, sn, st->level,
                      TS_PIPE_MAX_LEVEL);
    if (st->channels < 1 || st->channels > 256)
      return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d (%s): %d channels (1..256)", nm, s, sn, st->channels);
    if (st->nin < 0 || st->nin > TS_PIPE_MAX_IN)
      return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d (%s): %d inputs (0..%d)", nm, s, sn, st->nin,
                      TS_PIPE_MAX_IN);
    if (st->device < 0 || st->device > 1)
      return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d (%s): device %d (0 or 1)", nm, s, sn, st->device);
    for (int i = 0; i < st->nin; i++) {
      const ts_pipe_input *in = &st->in[i];
      if (in->halo < 0 || in->halo > 64)
        return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d (%s) input %d: halo %d (0..64)", nm, s, sn, i, in->halo);
      const ts_pipe_stage *src;
      if (in->from == TS_PIPE_FEEDBACK) {
        src = last;
      } else if (in->from >= 0 && in->from < s) {
        src = &d->stage[in->from];
      } else {
        return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d (%s) input %d: from %d (an earlier stage or feedback)",
                        nm, s, sn, i, in->from);
      }
      int dl = src->level - st->level;
      if (dl < -1 || dl > 1)
        return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d (%s) input %d: levels %d and %d differ by more than one",
                        nm, s, sn, i, src->level, st->level);
    }
  }
  return TS_OK;
}

static const char *const q_names[] = {"sharded", "locked", "mpmc"};
static const char *const c_names[] = {"none", "lazy", "eager"};

const char *ts_pipe_queue_name(ts_pipe_queue q) { return (unsigned)q < 3 ? q_names[q] : "?"; }
const char *ts_pipe_copy_name(ts_pipe_copy c) { return (unsigned)c < 3 ? c_names[c] : "?"; }

ts_status ts_pipe_queue_parse(const char *s, ts_pipe_queue *q) {
  for (int i = 0; i < 3; i++)
    if (s && !strcmp(s, q_names[i])) {
      *q = (ts_pipe_queue)i;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "pipe: queue '%s' (sharded, locked or mpmc)", s ? s : "");
}

ts_status ts_pipe_copy_parse(const char *s, ts_pipe_copy *c) {
  for (int i = 0; i < 3; i++)
    if (s && !strcmp(s, c_names[i])) {
      *c = (ts_pipe_copy)i;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "pipe: copy '%s' (none, lazy or eager)", s ? s : "");
}

ts_pipe_opts ts_pipe_opts_default(void) {
  ts_pipe_opts o;
  memset(&o, 0, sizeof o);
  o.frames = 1;
  o.inflight = 2;
  o.gran = TS_PIPE_GRAN_AUTO;
  o.queue = TS_PIPE_Q_SHARDED;
  o.copy = TS_PIPE_COPY_NONE;
  return o;
}
