# ampscope: build, test, run the cases.
#   make              bin/ampscope (CPU) and, when the CUDA toolkit is found, lib/libampscope_cuda.so
#   make test         the Criterion suite (GPU tests skip themselves without a GPU)
#   make run-cases    every case in cases/, then the plots; fails when a case did not pass
#   make plots | bench | fuzz | conformance | clean
# Options: CUDA=0 (skip the GPU library), CUDA=1 (require it), CUDA_ARCH=90, SAN=1 (ASan+UBSan).

CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Iharness -Wall -Wextra -Wno-unused-parameter -fopenmp
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
CUDA_ARCH ?= 90

HARNESS_SRC := $(wildcard harness/*.c harness/cpu/*.c harness/layers/*.c)
HARNESS_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(HARNESS_SRC))
LIB_OBJ     := $(filter-out $(BUILD)/harness/main.o,$(HARNESS_OBJ))
TEST_SRC    := $(wildcard tests/*.c)
TEST_OBJ    := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))
CUDA_SRC    := $(wildcard kernels/*.cu)
CUDA_OBJ    := $(patsubst %.cu,build/cuda/%.o,$(CUDA_SRC))
CUDA_C_OBJ  := build/cuda/harness/stats.o build/cuda/harness/dtype.o build/cuda/harness/memory.o
CUDA_LIB    := lib/libampscope_cuda.so
AMPSCOPE    := bin/ampscope$(if $(filter 1,$(SAN)),-san)
TESTS_BIN   := bin/tests$(if $(filter 1,$(SAN)),-san)

.PHONY: all deps test run-cases plots bench fuzz conformance clean
all: $(AMPSCOPE) $(if $(WITH_CUDA),$(CUDA_LIB))

deps:
	@scripts/install-deps.sh

$(BUILD)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/test_half.o: CFLAGS += -mf16c

$(AMPSCOPE): $(HARNESS_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(TESTS_BIN): $(LIB_OBJ) $(TEST_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lcriterion $(LDLIBS)

# ---- the CUDA backend: a shared library bin/ampscope dlopens ----
# -fmad=false: no a*b+c contracted into an FMA, so kernels round as the CPU backend does
NVCCFLAGS := -O2 -std=c++17 -fmad=false -Xcompiler -fPIC,-Wall,-Wextra -gencode arch=compute_$(CUDA_ARCH),code=[sm_$(CUDA_ARCH),compute_$(CUDA_ARCH)]
build/cuda/%.o: %.cu $(wildcard kernels/*.cuh harness/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Iharness -c $< -o $@
build/cuda/harness/%.o: harness/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 -fPIC -c $< -o $@
$(CUDA_LIB): $(CUDA_OBJ) $(CUDA_C_OBJ)
	@mkdir -p lib
	$(NVCC) -shared $^ -o $@ -L$(CUDA_HOME)/lib64 -lcublas -lcudnn -lcudart

# ---- running ----
test: $(TESTS_BIN) $(AMPSCOPE) $(if $(WITH_CUDA),$(CUDA_LIB))
	AMPSCOPE=$(AMPSCOPE) $(TESTS_BIN) --jobs 2

run-cases: all
	$(AMPSCOPE) run $(CASES); rc=$$?; $(MAKE) --no-print-directory plots || rc=1; exit $$rc

plots: | deps
	$(PYTHON) plot/plot.py results

clean:
	rm -rf build bin lib

-include $(HARNESS_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
