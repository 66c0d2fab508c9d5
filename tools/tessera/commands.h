/* The CLI's subcommands: one X-macro line each, implemented as `int cmd_NAME(int argc, char **argv)`
 * in tools/tessera/cmd_NAME.c. The order here is the order `tessera --help` shows. */
TS_CMD(hwinfo, "measure peak FLOP/s, bandwidth, caches and ISA; save the machine profile")
TS_CMD(version, "print the version, the detected CPU and the active kernel level")
TS_CMD(pattern, "generate a sparsity pattern from a spec (window2d, swin, random, condense, ...)")
TS_CMD(spy, "draw a pattern as a density heat map (PNG/SVG), before and after reordering")
TS_CMD(reorder, "reorder a pattern (rcm, hc, ic, metis, morton, hilbert, raster, auto) and report its locality")
TS_CMD(blocks, "cover a (reordered) pattern with dense blocks plus a residue; fill ratio, densities")
TS_CMD(vit, "Vision Transformer end to end with dense-flash, fixed-tile and scheduled sparse attention")
TS_CMD(gguf, "inspect a GGUF file: metadata and tensors")
TS_CMD(llm, "GGUF LLM runtime: generate, perplexity, bench, tokenize, logits, info")
TS_CMD(attn, "tile-aware sparse attention: plan (reorder, blocks, ILP/greedy schedule, plan cache) and bench")
TS_CMD(conv, "convolution algorithms with per-layer selection on VGG16, ResNet-101, Inception-v4: bench, plan")
TS_CMD(gconv, "unstructured group convolution: plan (reorder, knapsack sizes, ILP assignment), bench, export")
