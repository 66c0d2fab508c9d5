/* Streaming atomic writes: write "<path>.tmp.<pid>.<tid>", fsync, rename over <path>. The same
 * contract as ts_write_file_atomic, for writers that produce their output piece by piece. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "io/io_internal.h"

ts_status ts__atomic_open(ts__atomic_file *af, const char *path) {
  af->f = NULL;
  if (!path || !*path) return ts_error(TS_ERR_INVALID_ARG, "empty output path");
  size_t n = strlen(path);
  if (n >= sizeof af->path) return ts_error(TS_ERR_INVALID_ARG, "output path is too long: '%.200s...'", path);
  memcpy(af->path, path, n + 1);
  int k = snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld.%ld", path, (long)getpid(), (long)gettid());
  if (k < 0 || (size_t)k >= sizeof af->tmp) return ts_error(TS_ERR_INVALID_ARG, "output path is too long: '%.200s...'", path);
  af->f = fopen(af->tmp, "wb");
  if (!af->f) return ts_error(TS_ERR_IO, "cannot create '%s': %s", af->tmp, strerror(errno));
  return TS_OK;
}

ts_status ts__atomic_commit(ts__atomic_file *af) {
  if (!af->f) return ts_error(TS_ERR_INTERNAL, "atomic commit without an open file");
  errno = 0;
  int ok = !ferror(af->f) && fflush(af->f) == 0;
  int e = errno;
  if (ok && fsync(fileno(af->f)) != 0 && errno != EINVAL) { /* EINVAL: e.g. a pipe or /dev/null */
    ok = 0;
    e = errno;
  }
  if (fclose(af->f) != 0 && ok) {
    ok = 0;
    e = errno;
  }
  af->f = NULL;
  if (!ok) {
    unlink(af->tmp);
    return ts_error(TS_ERR_IO, "cannot write '%s': %s", af->path, e ? strerror(e) : "write error");
  }
  if (rename(af->tmp, af->path) != 0) {
    e = errno;
    unlink(af->tmp);
    return ts_error(TS_ERR_IO, "cannot rename onto '%s': %s", af->path, strerror(e));
  }
  return TS_OK;
}

void ts__atomic_abort(ts__atomic_file *af) {
  if (!af->f) return;
  fclose(af->f);
  af->f = NULL;
  unlink(af->tmp);
}
