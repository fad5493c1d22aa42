#!/usr/bin/env bash
# make_references.sh: the conformance references, made by PyTorch.
#
# For each configuration below (a case file and --set overrides), runs the harness once on
# the CPU only to write the case's initial parameters, input and target (`--dump`), then
# runs the same steps in PyTorch with tools/torch_reference.py from those values, and writes
#   OUT/<name>.csv     the reference (kind,step,tensor,dtype,zeros,norm,value)
#   OUT/manifest.csv   name,case,sets,steps,torch_version,device (sets joined with ';')
# tests/test_conformance.c runs the harness on every manifest row and compares.
#
# Usage: tools/make_references.sh [OUT]     (default tests/references/conformance)
# Environment: AMPSCOPE (default bin/ampscope), PYTHON (default python3, which must import
# torch), DEVICE (cpu, the default, or cuda: where PyTorch runs).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-tests/references/conformance}
AMPSCOPE=${AMPSCOPE:-bin/ampscope}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cpu}

# name | case | sets, ';'-separated (no commas: the manifest is a CSV file)
CONFIGS=(
    "fp32-adam|tests/cases/small-fp32.case|train.steps=3"
    "fp16-autocast-scaler|tests/cases/small-autocast-fp16-scaler.case|"
    "fp16-autocast|tests/cases/small-autocast-fp16.case|train.steps=3"
    "fp16-half-autocast-adam-nan|tests/cases/small-half.case|train.steps=2"
    "fp16-conv-mse-none-rmsprop-cosine|tests/cases/small-conv.case|train.steps=3"
    "fp16-conv-flatten-sgd|tests/cases/small-conv-flatten.case|precision.autocast=float16"
    "fp16-sgd-nesterov-scaler-growth|tests/cases/small-sgd-nesterov-scaler.case|"
    "fp16-scaler-backoff|tests/cases/small-scaler-backoff.case|"
    "fp16-half-no-autocast-sgd|tests/cases/small-half-sgd.case|"
    "fp16-mse-in-autocast-adam|tests/cases/small-mse-autocast.case|"
    "bf16-autocast-scaler|tests/cases/small-autocast-fp16-scaler.case|precision.autocast=bfloat16"
    "bf16-autocast|tests/cases/small-autocast-fp16.case|precision.autocast=bfloat16;train.steps=3"
    "bf16-conv-mse-none-rmsprop-cosine|tests/cases/small-conv.case|precision.autocast=bfloat16;train.steps=3"
    "bf16-conv-flatten-sgd|tests/cases/small-conv-flatten.case|"
    "bf16-sgd-nesterov-scaler-growth|tests/cases/small-sgd-nesterov-scaler.case|precision.autocast=bfloat16"
    "bf16-rmsprop-centered-cosine|tests/cases/small-rmsprop-centered.case|"
    "bf16-params-autocast-adam|tests/cases/small-half.case|precision.params=bfloat16;precision.autocast=bfloat16;train.steps=3"
    "bf16-params-no-autocast-sgd|tests/cases/small-half-sgd.case|precision.params=bfloat16;data.input_dtype=bfloat16"
    "bf16-mse-in-autocast-adam|tests/cases/small-mse-autocast.case|precision.autocast=bfloat16"
    "bf16-autocast-adamw|tests/cases/small-adamw.case|"
    "bf16-params-adamw|tests/cases/small-adamw.case|precision.params=bfloat16"
    "fp16-bce-autocast-sgd|tests/cases/small-bce-autocast.case|"
    "bf16-bce-autocast-sgd|tests/cases/small-bce-autocast.case|precision.autocast=bfloat16"
    "fp16-l1-half-adam|tests/cases/small-l1-half.case|"
    "fp32-l1-adam|tests/cases/small-l1-half.case|precision.params=float32;data.input_dtype=float32"
    # graph models
    "graph-fp32-sgd|tests/cases/small-graph-tokens-autocast.case|precision.autocast=off"
    "graph-fp16-autocast-sgd|tests/cases/small-graph-tokens-autocast.case|"
    "graph-bf16-autocast-adam|tests/cases/small-graph-tokens-autocast.case|precision.autocast=bfloat16;train.optimizer=adam lr=1e-2;train.steps=3"
    "graph-attention-fp32-sgd|tests/cases/small-graph-attention-autocast.case|precision.autocast=off"
    "graph-attention-fp16-autocast-sgd|tests/cases/small-graph-attention-autocast.case|"
    "graph-attention-bf16-autocast-sgd|tests/cases/small-graph-attention-autocast.case|precision.autocast=bfloat16"
    "graph-token-file-fp32-adam|tests/cases/small-graph-token-file.case|precision.autocast=off"
    "graph-token-file-fp16-autocast-adam|tests/cases/small-graph-token-file.case|"
    # explicit casts (to), softmax dtype= and autocast=no layers
    "graph-casts-fp16-autocast-sgd|tests/cases/small-graph-casts-autocast.case|"
    "graph-casts-bf16-autocast-sgd|tests/cases/small-graph-casts-autocast.case|precision.autocast=bfloat16"
    "graph-casts-fp32-sgd|tests/cases/small-graph-casts-autocast.case|precision.autocast=off"
    # the blocks: layer_norm, softmax (CUDA's float32 policy cast explicitly), gelu,
    # causal_mask, scaled_dot_product_attention (math path), batch_norm2d, pools
    "gpt-block-fp32-adamw|tests/cases/small-gpt-block.case|precision.autocast=off"
    "gpt-block-fp16-autocast-adamw|tests/cases/small-gpt-block.case|"
    "gpt-block-fp16-autocast-scaler-adamw|tests/cases/small-gpt-block.case|scaler.enabled=yes"
    "gpt-block-bf16-autocast-adamw|tests/cases/small-gpt-block.case|precision.autocast=bfloat16"
    "gpt-block-sdpa-fp32-adamw|tests/cases/small-gpt-block-sdpa.case|precision.autocast=off"
    "gpt-block-sdpa-fp16-autocast-adamw|tests/cases/small-gpt-block-sdpa.case|"
    "resnet-block-fp32-sgd|tests/cases/small-resnet-block.case|precision.autocast=off"
    "resnet-block-fp16-autocast-sgd|tests/cases/small-resnet-block.case|"
    "resnet-block-fp16-autocast-scaler-sgd|tests/cases/small-resnet-block.case|scaler.enabled=yes"
    "sdpa-gqa-mask-fp32-sgd|tests/cases/small-graph-sdpa-gqa-mask.case|precision.autocast=off"
    "sdpa-gqa-mask-fp16-autocast-sgd|tests/cases/small-graph-sdpa-gqa-mask.case|"
    "llama-block-fp32-adamw|tests/cases/small-llama-block.case|precision.autocast=off"
    "llama-block-fp16-autocast-adamw|tests/cases/small-llama-block.case|"
    "conv-groups-fp32-sgd|tests/cases/small-conv-groups.case|precision.autocast=off"
    "conv-groups-fp16-autocast-sgd|tests/cases/small-conv-groups.case|"
    # constants (buffers from .npy files) and parameters without a batch dim
    "constant-parameter-fp32-adamw|tests/cases/small-graph-constant-parameter-autocast.case|precision.autocast=off"
    "constant-parameter-fp16-autocast-adamw|tests/cases/small-graph-constant-parameter-autocast.case|"
    "constant-parameter-bf16-autocast-adamw|tests/cases/small-graph-constant-parameter-autocast.case|precision.autocast=bfloat16"
    # reshape (a view of a sample, one size inferred)
    "reshape-fp32-sgd|tests/cases/small-graph-reshape-autocast.case|precision.autocast=off"
    "reshape-fp16-autocast-sgd|tests/cases/small-graph-reshape-autocast.case|"
)

if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    echo "make_references.sh: $PYTHON cannot import torch" >&2
    exit 2
fi
[ -x "$AMPSCOPE" ] || { echo "make_references.sh: no $AMPSCOPE (run make)" >&2; exit 2; }
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

manifest="$work/manifest.csv"
echo "name,case,sets,steps,torch_version,device" >"$manifest"
for config in "${CONFIGS[@]}"; do
    IFS='|' read -r name case sets <<<"$config"
    case $sets in *,*) echo "make_references.sh: $name: a comma cannot go into manifest.csv" >&2; exit 2 ;; esac
    set_args=()
    IFS=';' read -r -a set_list <<<"$sets"
    for s in "${set_list[@]}"; do
        set_args+=(--set "$s")
    done
    # `none` names no tensor: only the initial values (DIR/init/) are written
    "$AMPSCOPE" run "$case" "${set_args[@]}" --device cpu --quiet --out "$work/results" \
        --dump "$work/$name" --dump-only none >/dev/null
    version=$("$PYTHON" tools/torch_reference.py "$case" "${set_args[@]}" --ampscope "$AMPSCOPE" \
        --init "$work/$name/init" --out "$OUT/$name.csv" --device "$DEVICE")
    steps=$(grep -c '^loss,' "$OUT/$name.csv")
    read -r _ torch_version _ device <<<"$version"
    echo "$name,$case,$sets,$steps,$torch_version,$device" >>"$manifest"
    echo "$name: $steps steps, $version"
done
mv "$manifest" "$OUT/manifest.csv"
