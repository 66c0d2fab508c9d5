/* `tessera vit train-bench --dump DIR`: one training step's inputs and results as .npy files, for
 * the PyTorch peer (bench/peers/vit_train_torch.py) to repeat with autograd and compare:
 *
 *   DIR/meta.json        the configuration, batch, lr, loss, backend, strategies, parameter names
 *   DIR/images.npy       f32 [batch][in_chans][img_h][img_w]
 *   DIR/labels.npy       i32 [batch]
 *   DIR/mask.npy         u8 [n][n], grid order (token = y * w + x), 1 = query may attend key
 *   DIR/perm.npy         i32 [n], the backend's token order (perm[new] = grid token; identity if none)
 *   DIR/before/NAME.npy  every parameter before the step (NAME: ts_nn_vit_param's, [in][out] layout)
 *   DIR/after/NAME.npy   after the SGD step
 *   DIR/grad/NAME.npy    the step's gradient */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_vit.h"
#include "tessera/io.h"

static ts_status npy(const char *dir, const char *sub, const char *name, ts_dtype dt, int ndim, const int64_t *shape,
                     const void *data) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s%s/%s.npy", dir, sub[0] ? "/" : "", sub, name);
  ts_tensor t;
  TS_TRY(ts_tensor_wrap(&t, dt, ndim, shape, (void *)data));
  return ts_npy_write(path, &t);
}

static ts_status write_params(ts_nn_vit *m, const char *dir, const char *sub, int which) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, sub);
  TS_TRY(ts_mkdirs(path));
  for (int i = 0; i < ts_nn_vit_param_count(m); i++) {
    ts_nn_vit_param p;
    TS_TRY(ts_nn_vit_param_get(m, i, &p));
    TS_TRY(npy(dir, sub, p.name, TS_F32, p.ndim, p.shape, which ? (const void *)p.grad : (const void *)p.value));
  }
  return TS_OK;
}

static ts_status write_meta(ts_nn_vit *m, const ts_nn_vit_config *cfg, int64_t batch, const char *dir, const char *backend,
                            float lr, double loss) {
  const ts_nn_vit_config c = *cfg;
  int64_t gh, gw, n, hd;
  ts_nn_vit_shape(m, &gh, &gw, &n, &hd);
  cJSON *j = cJSON_CreateObject(), *names = cJSON_CreateArray(), *strat = cJSON_CreateArray();
  if (!j || !names || !strat) {
    cJSON_Delete(j), cJSON_Delete(names), cJSON_Delete(strat);
    return ts_error(TS_ERR_OOM, "vit dump: meta.json");
  }
  cJSON_AddStringToObject(j, "format", "tessera-vit-train-dump");
  const struct { const char *k; double v; } f[] = {
      {"dim", (double)c.dim},         {"heads", (double)c.heads},     {"depth", (double)c.depth},
      {"mlp", (double)c.mlp},         {"patch", (double)c.patch},     {"in_chans", (double)c.in_chans},
      {"classes", (double)c.classes}, {"img_h", (double)c.img_h},     {"img_w", (double)c.img_w},
      {"ln_eps", (double)c.ln_eps},   {"grid_h", (double)gh},         {"grid_w", (double)gw},
      {"batch", (double)batch},    {"lr", (double)lr},             {"loss", loss}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) cJSON_AddNumberToObject(j, f[i].k, f[i].v);
  cJSON_AddStringToObject(j, "backend", backend);
  ts_nn_mem_strategy *s = malloc((size_t)c.depth * sizeof *s);
  if (s) {
    ts_nn_vit_train_get_strategies(m, s);
    for (int64_t l = 0; l < c.depth; l++) cJSON_AddItemToArray(strat, cJSON_CreateString(ts_nn_mem_strategy_name(s[l])));
  }
  free(s);
  cJSON_AddItemToObject(j, "strategies", strat);
  for (int i = 0; i < ts_nn_vit_param_count(m); i++) {
    ts_nn_vit_param p;
    ts_nn_vit_param_get(m, i, &p);
    cJSON_AddItemToArray(names, cJSON_CreateString(p.name));
  }
  cJSON_AddItemToObject(j, "params", names);
  char *txt = cJSON_Print(j);
  cJSON_Delete(j);
  if (!txt) return ts_error(TS_ERR_OOM, "vit dump: meta.json");
  char path[4096];
  snprintf(path, sizeof path, "%s/meta.json", dir);
  ts_status st = ts_write_file_atomic(path, txt, strlen(txt));
  cJSON_free(txt);
  return st;
}

ts_status vit_train_dump(const char *dir, ts_nn_vit *m, const ts_nn_vit_config *cfg, int64_t batch, ts_nn_attn *a,
                         const char *backend, const ts_nn_token_mask *mask, const float *img, const int32_t *labels,
                         float lr) {
  const ts_nn_vit_config c = *cfg;
  int64_t gh, gw, n, hd;
  ts_nn_vit_shape(m, &gh, &gw, &n, &hd);
  TS_TRY(ts_mkdirs(dir));
  TS_TRY(ts_nn_vit_set_attn(m, a));
  TS_TRY(write_params(m, dir, "before", 0));
  ts_nn_vit_train_stats st;
  TS_TRY(ts_nn_vit_train_step(m, img, labels, lr, &st));
  TS_TRY(write_params(m, dir, "after", 0));
  TS_TRY(write_params(m, dir, "grad", 1));
  const int64_t ishape[4] = {batch, c.in_chans, c.img_h, c.img_w}, bshape[1] = {batch}, mshape[2] = {n, n}, pshape[1] = {n};
  TS_TRY(npy(dir, "", "images", TS_F32, 4, ishape, img));
  TS_TRY(npy(dir, "", "labels", TS_I32, 1, bshape, labels));
  uint8_t *u8 = malloc((size_t)(n * n));
  int32_t *perm = malloc((size_t)n * sizeof *perm);
  ts_status s = u8 && perm ? TS_OK : ts_error(TS_ERR_OOM, "vit dump: the mask");
  if (s == TS_OK) {
    if (mask->dense) memset(u8, 1, (size_t)(n * n));
    else s = ts_csr_to_dense_u8(&mask->csr, u8);
  }
  if (s == TS_OK) s = npy(dir, "", "mask", TS_U8, 2, mshape, u8);
  if (s == TS_OK) {
    ts_nn_attn_info info;
    ts_nn_attn_get_info(a, &info);
    for (int64_t t = 0; t < n; t++) perm[t] = info.perm ? info.perm[t] : (int32_t)t;
    s = npy(dir, "", "perm", TS_I32, 1, pshape, perm);
  }
  free(u8), free(perm);
  if (s == TS_OK) s = write_meta(m, cfg, batch, dir, backend, lr, st.loss);
  return s;
}
