# ampscope: build, test, run the cases.
#   make              bin/ampscope (CPU) and, when the CUDA toolkit is found, lib/libampscope_cuda.so
#   make test         the Criterion suite (GPU tests skip themselves without a GPU)
#   make run-cases    every case in cases/, the loss-scale sweep and the precision matrix of
#                     question 000's small model, then the plots, compared with docs/reference-run;
#                     fails when a case did not pass or the run is not the reference's
#   make reference-run  docs/reference-run made again from a fresh run-cases (commit and date in
#                     its README.md)
#   make gpu-bundle   the build to carry to a GPU machine (build/gpu-bundle/, docs/gpu-check.md)
#   make gpu-rehearsal  scripts/gpu-check.sh --quick --carried here, as on a GPU machine
#   make plots | bench | fuzz | conformance | clean
# OpenMP threads wait passively (OMP_WAIT_POLICY=passive, which bin/ampscope also sets for
# itself, with OpenBLAS's kernels: harness/core/libenv.c): spinning threads of the two libraries
# slow each other down on few cores.
# Options: CUDA=0 (skip the GPU library), CUDA=1 (require it), CUDA_ARCH=NN (default: the GPU's,
# from nvidia-smi, else 90), SAN=1 (ASan+UBSan), MPI=0 (build without Open MPI: a case with
# [distributed] world_size > 1 then fails with a message), MPI=1 (require it), DNNL=0 (build
# without oneDNN: bfloat16 GEMMs always widen to float32 for sgemm), DNNL=1 (require it).

CC      ?= cc
CFLAGS  ?= -O3 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Iharness -Wall -Wextra -Wno-unused-parameter -fopenmp -fno-math-errno \
           -Werror=incompatible-pointer-types -Werror=implicit-function-declaration -Werror=int-conversion
LDLIBS  := -lopenblas -lm -ldl -lpthread
PYTHON  := /usr/bin/python3
CASES   ?= $(wildcard cases/*.case)

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
BUILD   := build/san
else
BUILD   := build/rel
endif

# ---- what the build finds ----
NVCC := $(shell command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(CUDA),0)
WITH_CUDA :=
$(info CUDA toolkit: skipped (CUDA=0), CPU only)
else ifneq ($(NVCC),)
WITH_CUDA := 1
CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
$(info CUDA toolkit: found ($(NVCC)), building the GPU backend)
else ifeq ($(CUDA),1)
$(error CUDA=1 but no CUDA toolkit found (nvcc not on PATH nor in /usr/local/cuda/bin))
else
$(info CUDA toolkit: not found, CPU only)
endif
# the GPU architecture built for: CUDA_ARCH=NN given, else the first GPU's compute
# capability as nvidia-smi reports it (9.0 -> 90), else 90 (H100 / H200)
ifneq ($(WITH_CUDA),)
ifneq ($(origin CUDA_ARCH),undefined)
CUDA_ARCH_FROM := given as CUDA_ARCH
else
GPU_CAP := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' | grep -E '^[0-9]+$$')
ifneq ($(GPU_CAP),)
CUDA_ARCH := $(GPU_CAP)
CUDA_ARCH_FROM := this machine's GPU, from nvidia-smi
else
CUDA_ARCH := 90
CUDA_ARCH_FROM := the default: no GPU seen by nvidia-smi
endif
endif
$(info CUDA architecture: sm_$(CUDA_ARCH) ($(CUDA_ARCH_FROM)))
endif

# Open MPI (Debian's libopenmpi-dev and openmpi-bin, which scripts/install-deps.sh installs,
# here at once when they are missing so that a clean clone builds with them): only
# harness/distributed/mpi.c is compiled against it
ifneq ($(MPI),0)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
ifeq ($(MPI_CFLAGS),)
MPI_INSTALLED := $(shell scripts/install-deps.sh libopenmpi-dev openmpi-bin 1>&2)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
endif
endif
ifeq ($(MPI),0)
WITH_MPI :=
$(info MPI: skipped (MPI=0), distributed cases refused)
else ifneq ($(MPI_CFLAGS),)
WITH_MPI := 1
MPI_LIBS := $(shell mpicc --showme:link)
$(info MPI: found ($(shell command -v mpicc)), distributed cases run over mpirun)
else ifeq ($(MPI),1)
$(error MPI=1 but no Open MPI found (mpicc); scripts/install-deps.sh installs it)
else
$(info MPI: not found, distributed cases refused (scripts/install-deps.sh installs Open MPI))
endif
LDLIBS += $(MPI_LIBS)
# oneDNN (Debian's libdnnl-dev, its v2 API), for bfloat16 GEMMs on avx512_bf16 where they are
# provably exact (harness/ops/cpu/gemm_bf16.c); scripts/install-deps.sh installs it
DNNL_FIND = $(shell test -f /usr/include/oneapi/dnnl/dnnl.h && echo /usr/include/oneapi/dnnl/dnnl.h)
ifneq ($(DNNL),0)
DNNL_HEADER := $(DNNL_FIND)
ifeq ($(DNNL_HEADER),)
DNNL_INSTALLED := $(shell scripts/install-deps.sh libdnnl-dev 1>&2)
DNNL_HEADER := $(DNNL_FIND)
endif
endif
ifeq ($(DNNL),0)
WITH_DNNL :=
$(info oneDNN: skipped (DNNL=0), bfloat16 GEMMs widened to float32 for sgemm)
else ifneq ($(DNNL_HEADER),)
WITH_DNNL := 1
LDLIBS += -ldnnl
$(info oneDNN: found ($(DNNL_HEADER)), exact bfloat16 GEMMs on avx512_bf16 where the processor has it)
else ifeq ($(DNNL),1)
$(error DNNL=1 but no oneDNN found (/usr/include/oneapi/dnnl/dnnl.h); scripts/install-deps.sh installs libdnnl-dev)
else
$(info oneDNN: not found, bfloat16 GEMMs widened to float32 for sgemm (scripts/install-deps.sh installs libdnnl-dev))
endif
export AMPSCOPE_NO_DNNL := $(if $(WITH_DNNL),,1)
# NCCL, for distributed cases on GPUs (lib/libampscope_nccl.so, below)
NCCL_LIB := lib/libampscope_nccl.so
ifneq ($(WITH_CUDA),)
NCCL_HOME := $(firstword $(foreach d,$(CUDA_HOME) $(CUDA_HOME)/targets/x86_64-linux,$(if $(wildcard $(d)/include/nccl.h),$(d))))
endif
ifneq ($(NCCL_HOME),)
WITH_NCCL := 1
$(info NCCL: found ($(NCCL_HOME)/include/nccl.h), building $(NCCL_LIB))
else ifneq ($(WITH_CUDA),)
$(info NCCL: not found beside the CUDA toolkit, distributed cases run on the CPU only)
endif
export AMPSCOPE_NO_MPI := $(if $(WITH_MPI),,1)

HARNESS_SRC := $(wildcard harness/*/*.c harness/*/*/*.c)
HARNESS_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(HARNESS_SRC))
LIB_OBJ     := $(filter-out $(BUILD)/harness/cli/main.o,$(HARNESS_OBJ))
TEST_SRC    := $(wildcard tests/*.c)
TEST_OBJ    := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))
CUDA_SRC    := $(wildcard kernels/*.cu)
CUDA_OBJ    := $(patsubst %.cu,build/cuda/%.o,$(CUDA_SRC))
CUDA_C_OBJ  := build/cuda/harness/core/stats.o build/cuda/harness/core/dtype.o build/cuda/harness/core/format.o \
               build/cuda/harness/core/memory.o build/cuda/harness/ops/pointwise.o build/cuda/harness/ops/reduce.o
CUDA_LIB    := lib/libampscope_cuda.so
AMPSCOPE    := bin/ampscope$(if $(filter 1,$(SAN)),-san)
TESTS_BIN   := bin/tests$(if $(filter 1,$(SAN)),-san)

.PHONY: FORCE all deps test run-cases reference-run plots bench fuzz conformance valgrind portable gpu-bundle gpu-rehearsal clean
all: $(AMPSCOPE) $(if $(WITH_CUDA),$(CUDA_LIB)) $(if $(WITH_NCCL),$(NCCL_LIB))

deps:
	@scripts/install-deps.sh

$(BUILD)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/test_half.o: CFLAGS += -mf16c
# distributed/mpi.o is rebuilt when MPI is switched on or off (the stamp holds the setting)
$(BUILD)/harness/distributed/mpi.o: CFLAGS += $(if $(WITH_MPI),-DAMPSCOPE_MPI $(MPI_CFLAGS))
$(BUILD)/harness/distributed/mpi.o $(BUILD)/tests/test_distributed.o $(BUILD)/tests/test_hosts.o: $(BUILD)/mpi.stamp
$(BUILD)/mpi.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(WITH_MPI) $(MPI_CFLAGS)' | cmp -s - $@ || echo '$(WITH_MPI) $(MPI_CFLAGS)' > $@
FORCE:
# ops/cpu/gemm_bf16.o likewise with oneDNN
$(BUILD)/harness/ops/cpu/gemm_bf16.o: CFLAGS += $(if $(WITH_DNNL),-DAMPSCOPE_DNNL)
$(BUILD)/harness/ops/cpu/gemm_bf16.o: $(BUILD)/dnnl.stamp
$(BUILD)/dnnl.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(WITH_DNNL)' | cmp -s - $@ || echo '$(WITH_DNNL)' > $@
# the GPU bundle runs where no Open MPI nor oneDNN is installed: it is built without them
$(BUILD)/harness/distributed/mpi_nompi.o: harness/distributed/mpi.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/harness/ops/cpu/gemm_bf16_nodnnl.o: harness/ops/cpu/gemm_bf16.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
BUNDLE_OBJ := $(patsubst $(BUILD)/harness/distributed/mpi.o,$(BUILD)/harness/distributed/mpi_nompi.o,\
              $(patsubst $(BUILD)/harness/ops/cpu/gemm_bf16.o,$(BUILD)/harness/ops/cpu/gemm_bf16_nodnnl.o,$(HARNESS_OBJ)))
# the GPU path's tests read cuDNN's enums and the toolkit's place (they skip without them)
$(BUILD)/tests/test_gpu_path.o: CFLAGS += $(if $(WITH_CUDA),-I$(CUDA_HOME)/include -DAMPSCOPE_CUDA_HOME='"$(CUDA_HOME)"')

$(AMPSCOPE): $(HARNESS_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# CUDA backend libraries built from other sources, which tests/test_backend.c loads
TEST_LIBS := $(BUILD)/tests/other-abi/libampscope_cuda.so $(BUILD)/tests/no-abi/libampscope_cuda.so \
             $(BUILD)/tests/other-rows/libampscope_cuda.so
# with MPI, the engine's one-value all-reduce that tests/test_distributed.c runs under mpirun
MPI_CHECK := $(BUILD)/tests/allreduce_check
$(MPI_CHECK): tests/fixtures/distributed/allreduce_check.c $(BUILD)/harness/distributed/mpi.o \
              $(BUILD)/harness/distributed/policy.o $(BUILD)/harness/core/dtype.o $(BUILD)/harness/core/format.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/tests/test_distributed.o: CFLAGS += $(if $(WITH_MPI),-DTEST_MPI_CHECK='"$(MPI_CHECK)"')
$(BUILD)/tests/test_hosts.o: CFLAGS += $(if $(WITH_MPI),-DTEST_WITH_MPI)
$(TESTS_BIN): $(LIB_OBJ) $(TEST_OBJ) | $(TEST_LIBS) $(if $(WITH_MPI),$(MPI_CHECK))
	@mkdir -p bin
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lcriterion $(LDLIBS)

$(BUILD)/tests/test_backend.o: CFLAGS += -DTEST_LIB_DIR='"$(BUILD)/tests"'
$(BUILD)/tests/other-abi/libampscope_cuda.so: tests/fixtures/backend/other_abi.c harness/ops/backend.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Iharness -fPIC -shared $< -o $@
$(BUILD)/tests/no-abi/libampscope_cuda.so: tests/fixtures/backend/other_abi.c harness/ops/backend.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Iharness -fPIC -shared -DWITHOUT_ABI $< -o $@
$(BUILD)/tests/other-rows/libampscope_cuda.so: tests/fixtures/backend/other_abi.c harness/ops/backend.h harness/ops/pointwise.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Iharness -fPIC -shared -DOTHER_ROWS $< -o $@

# ---- the CUDA backend: a shared library bin/ampscope dlopens ----
# its run path: the toolkit it was linked against (found where no ld.so.conf entry names it),
# then its own folder (CUDA libraries carried beside it)
CUDA_RUNPATH := -Xlinker --enable-new-dtags -Xlinker -rpath='$(CUDA_HOME)/lib64:$$ORIGIN'
# -fmad=false: no a*b+c contracted into an FMA, so kernels round as the CPU backend does
NVCCFLAGS := -O2 -std=c++17 -fmad=false -Xcompiler -fPIC,-Wall,-Wextra -gencode arch=compute_$(CUDA_ARCH),code=[sm_$(CUDA_ARCH),compute_$(CUDA_ARCH)]
build/cuda/%.o: %.cu $(wildcard kernels/*.cuh kernels/*.h harness/*/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Iharness -c $< -o $@
build/cuda/harness/%.o: harness/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 -fPIC -Iharness -c $< -o $@
$(CUDA_LIB): $(CUDA_OBJ) $(CUDA_C_OBJ)
	@mkdir -p lib
	$(NVCC) -shared $^ -o $@ -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudnn -lcudart -Xlinker --no-undefined $(CUDA_RUNPATH)

# ---- NCCL for distributed cases on GPUs: its own library, dlopened by harness/distributed/nccl.c
# only when a distributed case runs on the CUDA backend (built where the toolkit has nccl.h) ----
$(NCCL_LIB): kernels/nccl.c harness/distributed/nccl_abi.h harness/core/dtype.h
	@mkdir -p lib
	$(CC) -O2 -std=c11 -Wall -Wextra -fPIC -shared -Iharness -I$(NCCL_HOME)/include $< -o $@ \
	    -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -lnccl -lcudart -Wl,--no-undefined \
	    -Wl,--enable-new-dtags,-rpath,'$(CUDA_HOME)/lib64:$(CUDA_HOME)/lib:$$ORIGIN'

# ---- the bundle to carry to a GPU machine without Debian's packages (scripts/gpu-check.sh
# --carried): the binary with OpenBLAS, libgomp and libgfortran linked statically, the CUDA
# library with the CUDA runtime linked in (cuBLAS and cuDNN found there), the commit and the
# digest of the sources they were built from, and FILES, the list of what to carry ----
BUNDLE := build/gpu-bundle
gpu-bundle: $(BUNDLE_OBJ) $(CUDA_OBJ) $(CUDA_C_OBJ)
	$(if $(WITH_CUDA),,$(error gpu-bundle needs the CUDA toolkit (nvcc), none found))
	@rm -rf $(BUNDLE) && mkdir -p $(BUNDLE)/bin $(BUNDLE)/lib
	$(CC) $(CFLAGS) $(BUNDLE_OBJ) -o $(BUNDLE)/bin/ampscope -static-libgcc \
	    -Wl,-Bstatic -lopenblas -lgfortran -lquadmath -lgomp -Wl,-Bdynamic -lm -ldl -lpthread
	$(NVCC) -shared -cudart=static $(CUDA_OBJ) $(CUDA_C_OBJ) -o $(BUNDLE)/lib/libampscope_cuda.so \
	    -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudnn -Xlinker --no-undefined $(CUDA_RUNPATH)
	@{ git rev-parse HEAD 2>/dev/null || echo unknown; } | tr -d '\n' > $(BUNDLE)/COMMIT
	@git diff --quiet HEAD -- Makefile harness kernels 2>/dev/null || printf ' with uncommitted changes' >> $(BUNDLE)/COMMIT
	@scripts/gpu-check.sh --source-digest > $(BUNDLE)/SOURCES
	@printf '%s\n' $(BUNDLE)/bin/ampscope $(BUNDLE)/lib/libampscope_cuda.so $(BUNDLE)/COMMIT \
	    $(BUNDLE)/SOURCES $(BUNDLE)/FILES > $(BUNDLE)/FILES
	@echo "gpu-bundle: carry $(BUNDLE)/ ($$(du -sh $(BUNDLE) | cut -f1)), built from $$(cat $(BUNDLE)/COMMIT); its files: $(BUNDLE)/FILES"
portable: gpu-bundle

# ---- scripts/gpu-check.sh --quick --carried here, in a GPU machine's environment: no
# compilers, no make, no Debian development packages, the bundle only; every phase before
# the first GPU call must run and the missing GPU be reported in one line ----
gpu-rehearsal: $(if $(WITH_CUDA),gpu-bundle)
	@$(if $(WITH_CUDA),scripts/gpu-rehearsal.sh,echo "gpu-rehearsal: skipped: no CUDA toolkit to build the bundle")

# ---- running ----
test: $(TESTS_BIN) $(AMPSCOPE) bin/ampscope-bench $(if $(WITH_CUDA),$(CUDA_LIB))
	AMPSCOPE=$(AMPSCOPE) OMP_WAIT_POLICY=passive LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	    $(TESTS_BIN) --jobs 2

# and the loss-scale sweep and the precision matrix of question 000's small model
# (tests/cases/, seconds), the plots, into results/ (or OUT=DIR), then, when every case of
# cases/ ran, the comparison with docs/reference-run (tools/compare_reference.py: the same
# cases, tensors, dtypes and shapes, else a failure; the values that depend on the CPU's
# float32 sums counted); the last line says what passed and where to start reading
# (scripts/run-cases.sh)
SWEEP_CASE := tests/cases/small-autocast-fp16-scaler.case
RESULTS    := $(or $(OUT),results)
REFERENCE  := docs/reference-run
run-cases: all
	@AMPSCOPE=$(AMPSCOPE) PYTHON=$(PYTHON) RESULTS=$(RESULTS) SWEEP_CASE=$(SWEEP_CASE) \
	    REFERENCE=$(if $(filter file,$(origin CASES)),$(REFERENCE)) scripts/run-cases.sh $(CASES)

# docs/reference-run made again: a fresh run-cases of every case into build/reference-run, copied
# over the folder's files but its README.md, whose "Made by" line gets the commit, the date
# and the machine (the CPU's float32 sums, through OpenBLAS's kernels, shape the values)
reference-run: all
	$(if $(filter file,$(origin CASES)),,$(error reference-run runs every case of cases/: leave CASES out))
	rm -rf build/reference-run
	AMPSCOPE=$(AMPSCOPE) PYTHON=$(PYTHON) RESULTS=build/reference-run SWEEP_CASE=$(SWEEP_CASE) \
	    REFERENCE= scripts/run-cases.sh $(CASES)
	find $(REFERENCE) -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
	cp -R build/reference-run/. $(REFERENCE)/
	@commit=$$(git rev-parse --short HEAD)$$(git diff --quiet HEAD -- Makefile harness kernels \
	    cases tests/cases || echo ' with uncommitted changes'); \
	cpu=$$(LC_ALL=C lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/[&|\]/\\&/g'); \
	blas=$$($(AMPSCOPE) --version | sed -n 's/.*(\(.*\))/\1/p'); \
	devices=$$(awk -F, 'NR > 1 { print $$2 }' build/reference-run/summary.csv | sort -u | paste -sd' '); \
	sed -i "s|^Made by .*|Made by \`make reference-run\` at commit $$commit, $$(date -u +%Y-%m-%d), on \
	$$cpu ($$(nproc) cores, $$blas), devices: $$devices.|" $(REFERENCE)/README.md
	@grep '^Made by' $(REFERENCE)/README.md
	$(PYTHON) tools/compare_reference.py --self-check $(REFERENCE)

plots: $(AMPSCOPE) | deps
	$(PYTHON) plot/plot.py --ampscope $(AMPSCOPE) $(RESULTS)

# ---- the benchmark: figures and ratios, never a pass/fail on speed ----
# BENCH=quick|all|counting|graph (counting: the counting's cost alone, seconds; graph: the GPT-2,
# ResNet and Llama block cases against PyTorch's CPU step on the same model, which all also
# runs, into results/bench-graph.md); PyTorch's own steps
# are timed with $(PYTHON) where it imports torch (make bench PYTHON=/path/to/venv/bin/python),
# instructions counted by perf or valgrind. ISA=avx2|x86-64 runs it all at that level
# (AMPSCOPE_CPU_ISA, harness/ops/cpu/cpu.h: an emulation of such a processor on this one) with
# OpenBLAS on such a processor's kernels (harness/core/libenv.c: Zen or Haswell, Prescott) whatever
# OPENBLAS_CORETYPE the environment holds, or BLAS_CORE's; the first line printed says which
# level and kernels ran.
BENCH ?= all
ISA ?=
BLAS_CORE ?=
BENCH_ENV := $(if $(ISA),env $(if $(BLAS_CORE),OPENBLAS_CORETYPE=$(BLAS_CORE),-u OPENBLAS_CORETYPE) AMPSCOPE_CPU_ISA=$(ISA))
bin/ampscope-bench: tools/bench.c $(LIB_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
bench: bin/ampscope-bench $(AMPSCOPE)
	@mkdir -p results
	$(BENCH_ENV) bin/ampscope-bench $(BENCH) --python $(PYTHON) --ampscope $(AMPSCOPE)
	@if [ "$(BENCH)" = counting ]; then :; \
	elif nvidia-smi -L >/dev/null 2>&1 && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then \
	    python3 tools/gpu_bench.py $(if $(filter quick,$(BENCH)),--quick) --ampscope $(AMPSCOPE); \
	else echo "bench: no GPU that PyTorch can use here: the GPU part (tools/gpu_bench.py) skipped"; fi

# ---- a small case under valgrind's memcheck: no invalid access, no definite leak ----
valgrind: $(AMPSCOPE)
	OMP_WAIT_POLICY=passive valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite -q \
	    $(AMPSCOPE) run tests/cases/small-autocast-fp16-scaler.case tests/cases/small-conv.case \
	    --device cpu --out build/valgrind-results --quiet

# ---- fuzzing (clang's libFuzzer with ASan and UBSan); corpora start from the repo's files ----
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -Iharness -fsanitize=fuzzer,address,undefined
# the case parser reads the kinds from the layer registry, whose forwards need the run's core
FUZZ_CASE_SRC := tools/fuzz/fuzz_case.c $(wildcard harness/case/*.c harness/layers/*.c) \
    harness/core/npy.c harness/core/dtype.c harness/core/format.c harness/train/optimizers.c harness/autograd/autocast.c harness/autograd/tape.c harness/autograd/run.c \
    harness/autograd/observe.c harness/record/record.c harness/ops/tensor.c harness/ops/dtype_reason.c harness/autograd/dump.c harness/core/stats.c harness/core/interrupt.c \
    harness/distributed/policy.c harness/distributed/mpi.c \
    harness/ops/fp8_recipe.c harness/ops/fp4_recipe.c harness/ops/backend.c harness/ops/pointwise.c \
    harness/ops/reduce.c harness/autograd/host_values.c
build/fuzz/fuzz_case: $(FUZZ_CASE_SRC)
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) $^ -o $@ -lm
build/fuzz/fuzz_npy: tools/fuzz/fuzz_npy.c harness/core/npy.c harness/core/dtype.c harness/core/format.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) $^ -o $@ -lm
fuzz: build/fuzz/fuzz_case build/fuzz/fuzz_npy
	@mkdir -p build/fuzz/corpus-case build/fuzz/corpus-npy
	cp cases/*.case tests/cases/*.case tests/bad-cases/*.case build/fuzz/corpus-case/
	cp tests/fixtures/npy/*.npy build/fuzz/corpus-npy/
	cd build/fuzz && for t in case npy; do \
	    ./fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 \
	        -print_final_stats=1 corpus-$$t > fuzz_$$t.log 2>&1; rc=$$?; \
	    grep -E "^(Done|stat::number_of_executed|==[0-9]+==ERROR|SUMMARY)" fuzz_$$t.log; \
	    [ $$rc -eq 0 ] || { echo "fuzz_$$t found a crash: build/fuzz/fuzz_$$t.log"; exit 1; }; \
	done

# ---- the harness against the installed PyTorch: fresh references, then the conformance test
# on them (tests/test_conformance.c); skipped when python3 cannot import torch ----
conformance: $(TESTS_BIN) $(AMPSCOPE)
	@if ! python3 -c 'import torch' 2>/dev/null; then \
	    echo "conformance: skipped (python3 cannot import torch)"; exit 0; fi; \
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	AMPSCOPE=$(AMPSCOPE) tools/make_references.sh "$$tmp" && \
	AMPSCOPE_CONFORMANCE_DIR="$$tmp" $(TESTS_BIN) --filter 'conformance/*' && \
	AMPSCOPE_IMPORT_LIVE=1 $(TESTS_BIN) --filter 'import_live/*' && \
	if diff -rq "$$tmp" tests/references/conformance >/dev/null; then \
	    echo "conformance: passed; tests/references/conformance is what this PyTorch makes"; \
	else \
	    echo "conformance: passed; tests/references/conformance differs from this PyTorch's" \
	         "references (tools/make_references.sh remakes it)"; \
	fi

clean:
	rm -rf build bin lib

-include $(HARNESS_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
