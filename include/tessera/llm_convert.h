/* tessera LLM conversion: a GGUF model file from a safetensors file of weights plus a metadata JSON,
 * written by tessera's own GGUF writer and quantizers (no llama.cpp or Python in the path).
 *
 * Inputs (docs/FORMATS.md, "safetensors and the metadata JSON"):
 *   - a safetensors file of F32, F16 or BF16 tensors already named and laid out as GGUF wants
 *     (token_embd.weight [vocab][d], blk.N.ffn_gate.weight [n_ff][d], 1-D norm vectors, ...);
 *     a shape [rows][cols] becomes GGUF ne {cols, rows} (dims reversed);
 *   - a metadata JSON {"kv": [[key, type, value], ...]}: every pair becomes one GGUF kv, in order.
 *     Types: "str", "bool", "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64",
 *     and arrays of each ("str[]", "i32[]", "f32[]", ...). Integers must be integral and in the
 *     type's range (64-bit ones at most 2^53 in magnitude: JSON numbers are doubles).
 *
 * Tensor types: a 2-D tensor whose rows (ne[0]) are a multiple of wtype's block size is stored in
 * wtype; everything else (1-D norms, odd rows, empty tensors, 3-D and 4-D tensors) stays F32.
 * wtype is one of TS_QT_F32, TS_QT_F16, TS_QT_Q8_0, TS_QT_Q4_0, TS_QT_Q4_1 (the quantizers are
 * ts_quant_quantize_row's round-to-nearest reference ones). Unless the metadata sets them, the
 * file also gets general.file_type (llama.cpp's ftype of wtype) and, for the block types,
 * general.quantization_version = 2, as llama.cpp's converter writes them; general.alignment in the
 * metadata sets the file's alignment.
 *
 * The image is built in memory, parsed back with ts_gguf_open_mem (tensor count, names, types and
 * shapes compared with what was added) and only then written to out_path atomically (temporary
 * file + rename): a failed conversion leaves no file and never a partial one. Errors name the file
 * and the field (a kv entry by index and key, a tensor by name). */
#ifndef TESSERA_LLM_CONVERT_H
#define TESSERA_LLM_CONVERT_H

#include <stdint.h>

#include "tessera/core.h"
#include "tessera/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Slots of the per-type tables below, indexed by ts_qtype id. */
#define TS_LLM_CONVERT_TYPES 40

typedef struct ts_llm_convert_report {
  int64_t tensors;                              /* tensors written */
  int64_t kv;                                   /* metadata pairs written (with those the converter adds) */
  int64_t params;                               /* elements over all tensors */
  uint64_t bytes;                               /* size of the written file */
  int64_t type_tensors[TS_LLM_CONVERT_TYPES];   /* tensors stored in each ts_qtype */
  uint64_t type_bytes[TS_LLM_CONVERT_TYPES];    /* their data bytes */
  double seconds;                               /* wall time of the whole conversion */
} ts_llm_convert_report;

/* Converts st_path + meta_path into the GGUF out_path with matrices in wtype (see above). rep may
 * be NULL. TS_ERR_INVALID_ARG for a wtype outside the five, TS_ERR_NOT_FOUND / TS_ERR_IO / TS_ERR_FORMAT /
 * TS_ERR_TRUNCATED / TS_ERR_SHAPE / TS_ERR_UNSUPPORTED from the inputs, TS_ERR_OOM. */
ts_status ts_llm_convert(const char *st_path, const char *meta_path, uint32_t wtype, const char *out_path,
                         ts_llm_convert_report *rep);

#ifdef __cplusplus
}
#endif
#endif
