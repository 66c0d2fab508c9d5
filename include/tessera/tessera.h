/* tessera: one include for the whole public API: every header in include/tessera/ but one.
 * tessera/attn_cuda.h (the CUDA entry points) stays separate on purpose: its functions live in the
 * ts_cuda library, built only where nvcc exists (cmake/cuda.cmake), so only code that links
 * ts_cuda includes it; a CPU-only build would otherwise declare functions it cannot link. */
#ifndef TESSERA_H
#define TESSERA_H
#include "tessera/core.h"
#include "tessera/measure.h"
#include "tessera/artifact.h"
#include "tessera/hwinfo.h"
#include "tessera/io.h"
#include "tessera/kernels.h"
#include "tessera/solve.h"
#include "tessera/sparse.h"
#include "tessera/reorder.h"
#include "tessera/plot.h"
#include "tessera/attn.h"
#include "tessera/attn_profile.h"
#include "tessera/attn_sched.h"
#include "tessera/attn_train.h"
#include "tessera/nn.h"
#include "tessera/conv.h"
#include "tessera/cnn.h"
#include "tessera/gconv.h"
#include "tessera/gguf.h"
#include "tessera/quant.h"
#include "tessera/llm.h"
#include "tessera/llm_sparse.h"
#include "tessera/plan3d.h"
#include "tessera/pipe.h"
#include "tessera/hybrid.h"
#endif
