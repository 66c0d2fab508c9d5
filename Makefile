# tessera: the README's commands. CMake does the building; this file is the front door.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 60
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DTS_WERROR=ON
endif

.PHONY: all deps build test test-levels demo sanitize tsan fuzz bench results peer-vit-train peer-attn-bwd peer-plan3d check-plan3d-engines bench-plan3d bench-pipe peer-pipe bench-hybrid integration relu-model bench-relu clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)/tessera

# The whole suite again with the kernels capped at AVX2 and at the scalar references (TESSERA_ISA):
# the end-to-end paths (model logits, plans, CLI) at each level an x86-64 machine may run, on any
# machine (a level above the CPU's is refused, so on an AVX2-only CPU the first run repeats the
# native one). Artifacts made at another level are re-made (their provenance names the kernels).
# CI runs it.
test-levels: build
	@for isa in avx2 scalar; do \
	  echo "== ctest with TESSERA_ISA=$$isa"; \
	  (cd $(BUILD) && TESSERA_ISA=$$isa ctest --output-on-failure -j $(JOBS)) || exit 1; \
	done

# AddressSanitizer + UndefinedBehaviorSanitizer build, whole suite again.
sanitize: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  TESSERA_SANITIZE=1 ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer build running the concurrency tests (tests/test_concurrency.c: two threads on what
# the headers say may be shared), the pipeline runtime's (tests/test_pipe.c: its own pthread
# workers, deques, counters and the termination stress runs) and the hybrid room's (tests/test_hybrid.c:
# containers as threads, the controller, the modelled device and its monitor thread). OpenMP runs one thread (OMP_NUM_THREADS=1, and the tests' contexts
# have one), so only the test's own pthreads run at once: libgomp is not instrumented and its
# barriers would show as false races, while a suppression of libgomp would hide every race inside
# an OpenMP region (its frames are on their stacks). No suppressions are needed.
tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTS_TSAN=ON -DTS_CUDA=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_concurrency test_pipe test_hybrid
	@cd $(TSAN_BUILD) && OMP_NUM_THREADS=1 TESSERA_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure -R '^(test_concurrency|test_pipe|test_hybrid)$$'

# libFuzzer harnesses for the file readers, each run for FUZZ_SECONDS.
fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DTS_FUZZ=ON -DTS_CUDA=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	@bash scripts/fuzz.sh $(FUZZ_BUILD)/fuzz $(FUZZ_SECONDS)

bench: build
	@bash scripts/bench.sh $(BUILD)

# The benchmark set behind docs/RESULTS.md: JSON under results/<date>-<host>/, then the page and its
# charts (docs/img/results-*.svg). RESULTS_MODE=--full for every workload at full repeats.
RESULTS_MODE ?= --short
results: build
	@bash scripts/results.sh $(RESULTS_MODE) --tessera $(BUILD)/tessera

# One ViT training step against PyTorch autograd (not in CI: torch is heavy). tessera writes the
# step with the scheduled backend (weights before and after SGD, gradients, images, labels, mask,
# token order: `vit train-bench --dump`); bench/peers/vit_train_torch.py builds the same model from
# the weights (torch from the current interpreter, else bench/peers/.venv-torch), repeats the step
# with autograd and compares every updated parameter within its stated tolerance (exit 1 otherwise).
VIT_DUMP ?= $(BUILD)/vit-train-dump
peer-vit-train: build
	@$(BUILD)/tessera vit train-bench --model deit-s --res 224 --pattern window2d:k=7 --batch 2 --cost analytic \
	  --repeats 1 --warmup 0 --lr 0.5 --dump $(VIT_DUMP) >/dev/null
	@python3 bench/peers/vit_train_torch.py $(VIT_DUMP)

# The attention backward against PyTorch's SDPA backward (boolean mask) and FlexAttention's (where
# the installed torch runs it on CPU; torch 2.15 does not, and the reason is recorded), on the
# issue 34 masks at 64^2 tokens, 8 heads, d = 64; tessera's side is `attn bench --pass backward`.
peer-attn-bwd: build
	@python3 bench/peers/attn_bwd_torch.py $(BUILD)/tessera

# The planner's launch files checked by the engines' own code: Megatron-Core's TransformerConfig and
# layout parser, DeepSpeed's config and PipelineModule partition, torch's launcher (a venv made once
# in bench/peers/.venv-engines; exit 77 = skipped when it cannot be made).
PLAN3D_IN = --model bench/plan3d/gpt2-xl.model.json --cluster bench/plan3d/aws-1xp4d-6xg5.cluster.json \
	--profile bench/plan3d/gpt2-xl-a100-a10g.profile.json
check-plan3d-engines: build
	@$(BUILD)/tessera plan3d search $(PLAN3D_IN) --uniform-tp --top 1 --out $(BUILD)/plan3d-best.json >/dev/null
	@python3 tests/plan3d_engines.py --test-bin $(BUILD)/tests/test_plan3d_emit --tessera $(BUILD)/tessera \
	  --plan $(BUILD)/plan3d-best.json

# FASOP's paper-scale figures, simulated (GPT-2 1.5B on 8 A100 + 24 A10G; inputs derived from
# datasheets by bench/plan3d/make_inputs.py): partitioner speed and quality, search, Pareto front.
PLAN3D_OUT ?= results/$(shell date -u +%F)-plan3d
bench-plan3d: build
	@$(BUILD)/bench/bench_plan3d --out $(PLAN3D_OUT)

# The planner's estimates against real multi-process pipeline-parallel training (torch.distributed,
# gloo, 2 processes on this machine; torch from bench/peers/.venv-torch), >= 10 plans.
peer-plan3d: build
	@python3 bench/peers/plan3d_gloo.py --tessera $(BUILD)/tessera --out results/$(shell date -u +%F)-plan3d-gloo

# The pipeline runtime's targets (issue 37): auto granularity vs the offline best fixed tile at a
# small and a large frame size, the three queues at the finest granularity, lazy vs eager copies,
# 10^4 termination stress runs (bench/bench_pipe.c; about 15 minutes on 2 cores).
PIPE_OUT ?= results/$(shell date -u +%F)-pipe
bench-pipe: build
	@$(BUILD)/bench/bench_pipe --out $(PIPE_OUT)

# The same six apps with OpenMP tasks (depend clauses) and a oneTBB flow graph, each at its best
# tile, interleaved with tessera's auto granularity (bench/peers/pipe_peers.py).
peer-pipe: build
	@python3 bench/peers/pipe_peers.py --build $(BUILD) --out results/$(shell date -u +%F)-pipe-peers/peers.json

# The hybrid MapReduce controller's targets (issue 38) on the local engine: four jobs and three with
# task costs that change over time, every mode interleaved (cpu, gpu, each static split, auto), the
# oracle split, the tail (bench/hybrid/bench_hybrid.py; about 10 minutes on 2 cores).
HYBRID_OUT ?= results/$(shell date -u +%F)-hybrid
bench-hybrid: build
	@python3 bench/hybrid/bench_hybrid.py --tessera $(BUILD)/tessera --out $(HYBRID_OUT)

# The hybrid MapReduce controller (issue 38) driving a real Apache Spark, standalone on this machine
# (scripts/spark-cluster.sh: a master and two one-core workers; pyspark 4.3.0 from PyPI in
# bench/peers/.venv-spark and openjdk-17, installed when missing): `tessera hybrid run --engine
# spark` for WordCount, Grep, KMeans and the GEMM job in modes auto and cpu (JSON under
# results/<date>-hybrid-spark/), then a worker killed mid-job (tests/hybrid_spark_fault.sh). The
# cluster is stopped even when a run fails. Not in `make test` or CI: those use the local engine.
integration: build
	@bash scripts/hybrid-integration.sh $(BUILD)/tessera

# The ReLU test model and its SiLU twin (issue 39), trained again from scratch on Shakespeare
# (models/relu/make.sh: PyTorch on the CPU from PyPI, about 85 minutes on 2 cores); the committed
# models/relu/*.gguf are its output.
relu-model: build
	@TESSERA=$(BUILD)/tessera bash models/relu/make.sh

# The activation predictors (sign-bit, Grasp, learned, oracle) on the ReLU model: calibration,
# quality on Hamlet, interleaved decode timing, the page (scripts/relu_pred_sweep.sh; ~15 minutes).
RELU_OUT ?= results/$(shell date -u +%F)-relu-pred
bench-relu: build
	@TESSERA=$(BUILD)/tessera bash scripts/relu_pred_sweep.sh $(RELU_OUT)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(TSAN_BUILD)
