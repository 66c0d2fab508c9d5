/* tessera: one include for the whole public API. */
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
#endif
