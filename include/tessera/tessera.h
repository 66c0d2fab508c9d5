/* tessera: one include for the whole public API (CUDA entry points: tessera/attn_cuda.h). */
#ifndef TESSERA_H
#define TESSERA_H
#include "tessera/core.h"
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
#include "tessera/nn.h"
#include "tessera/conv.h"
#include "tessera/cnn.h"
#include "tessera/gconv.h"
#include "tessera/gguf.h"
#include "tessera/quant.h"
#endif
