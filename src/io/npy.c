/* .npy files: the preamble (magic, version, header length), the data block, and the file-level
 * read (whole-file read) and atomic write. Layout of a file:
 *   "\x93NUMPY" major minor | header length (u16 LE for 1.0, u32 LE for 2.0/3.0) | dict text | data
 * The dict text is parsed by npy_header.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

ts_status ts_npy_read_mem(const void *buf, size_t len, const char *name, ts_tensor *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_npy_read_mem: out is NULL");
  memset(out, 0, sizeof *out);
  if (!name) name = "<memory>";
  if (!buf && len) return ts_error(TS_ERR_INVALID_ARG, "%s: buffer is NULL", name);
  const unsigned char *b = buf;
  size_t m = len < 6 ? len : 6;
  if (len == 0) return ts_error(TS_ERR_TRUNCATED, "%s: empty file, not a .npy file", name);
  if (memcmp(b, npy_magic, m) != 0)
    return ts_error(TS_ERR_FORMAT, "%s: not a .npy file (bad magic: expected \\x93NUMPY)", name);
  if (len < 10) return ts_error(TS_ERR_TRUNCATED, "%s: .npy preamble truncated (%zu of at least 10 bytes)", name, len);
  unsigned major = b[6], minor = b[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    return ts_error(TS_ERR_UNSUPPORTED, "%s: unsupported .npy format version %u.%u (supported: 1.0, 2.0, 3.0)", name,
                    major, minor);
  size_t pre = major == 1 ? 10 : 12;
  if (len < pre) return ts_error(TS_ERR_TRUNCATED, "%s: .npy %u.0 preamble truncated (%zu of %zu bytes)", name, major, len, pre);
  size_t hlen = major == 1 ? (size_t)b[8] | (size_t)b[9] << 8
                           : (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
  if (hlen > len - pre)
    return ts_error(TS_ERR_TRUNCATED, "%s: .npy header truncated: it declares %zu bytes but only %zu follow", name, hlen,
                    len - pre);

  ts_dtype dtype = TS_F32;
  int ndim = 0;
  int64_t shape[TS_MAX_DIMS] = {0};
  TS_TRY(ts__npy_parse_dict((const char *)b + pre, hlen, name, &dtype, &ndim, shape));

  char sh[160];
  ts__npy_shape_str(ndim, shape, sh, sizeof sh);
  size_t bytes;
  ts_status s = ts_shape_check(dtype, ndim, shape, NULL, &bytes);
  if (s != TS_OK) {
    ts_error_prefix("%s: shape %s %s: ", name, sh, ts__npy_descr(dtype));
    return s;
  }
  size_t have = len - pre - hlen;
  if (have < bytes)
    return ts_error(TS_ERR_TRUNCATED, "%s: .npy data truncated: shape %s %s needs %zu bytes, file has %zu", name, sh,
                    ts__npy_descr(dtype), bytes, have);
  if (have > bytes)
    return ts_error(TS_ERR_SHAPE, "%s: .npy size mismatch: shape %s %s needs %zu data bytes, file has %zu (%zu extra)", name,
                    sh, ts__npy_descr(dtype), bytes, have, have - bytes);

  s = ts_tensor_alloc(out, dtype, ndim, shape);
  if (s != TS_OK) {
    ts_error_prefix("%s: ", name);
    return s;
  }
  const unsigned char *data = b + pre + hlen;
  if (dtype == TS_BOOL) {
    /* numpy reads any nonzero byte as True; normalize so consumers can rely on 0/1. */
    unsigned char *o = out->data;
    for (size_t i = 0; i < bytes; i++) o[i] = data[i] != 0;
  } else if (bytes) {
    memcpy(out->data, data, bytes);
  }
  return TS_OK;
}

ts_status ts_npy_read(const char *path, ts_tensor *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_npy_read: out is NULL");
  memset(out, 0, sizeof *out);
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "ts_npy_read: path is NULL");
  /* Read, not mmap: a file truncated by another process while mapped would raise SIGBUS here instead
   * of an error. The data is copied into the tensor either way, so a map saves one copy at most. */
  char *data;
  size_t n;
  TS_TRY(ts_read_file(path, &data, &n));
  ts_status s = ts_npy_read_mem(data, n, path, out);
  free(data);
  return s;
}

ts_status ts_npy_write(const char *path, const ts_tensor *t) {
  if (!path || !t) return ts_error(TS_ERR_INVALID_ARG, "ts_npy_write: %s is NULL", path ? "tensor" : "path");
  size_t bytes;
  ts_status s = ts_shape_check(t->dtype, t->ndim, t->shape, NULL, &bytes);
  if (s != TS_OK) {
    ts_error_prefix("writing '%s': ", path);
    return s;
  }
  if (bytes && !ts_tensor_is_contiguous(t)) /* an empty tensor has nothing to lay out */
    return ts_error(TS_ERR_INVALID_ARG, "writing '%s': tensor is not contiguous (.npy stores C-ordered data)", path);
  if (bytes && !t->data) return ts_error(TS_ERR_INVALID_ARG, "writing '%s': tensor has no data", path);
  char hdr[TS__NPY_HEADER_MAX];
  size_t hlen;
  s = ts__npy_format_header(t->dtype, t->ndim, t->shape, hdr, &hlen);
  if (s != TS_OK) {
    ts_error_prefix("writing '%s': ", path);
    return s;
  }
  ts__atomic_file af;
  TS_TRY(ts__atomic_open(&af, path));
  if (fwrite(hdr, 1, hlen, af.f) != hlen || (bytes && fwrite(t->data, 1, bytes, af.f) != bytes)) {
    int e = errno;
    ts__atomic_abort(&af);
    return ts_error(TS_ERR_IO, "cannot write '%s': %s", path, strerror(e));
  }
  return ts__atomic_commit(&af);
}
