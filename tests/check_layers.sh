#!/usr/bin/env bash
# check_layers.sh — every layer of meshtrain includes only itself and the
# layers below it. The layers, bottom up, are listed here and nowhere else;
# CMakeLists.txt builds each folder of src/ named below.
#
#   bash tests/check_layers.sh [SOURCE_DIR]      (ctest runs it as `layers`)
#
# A layer is a folder src/<layer>/ and the public headers include/meshtrain/
# mapped to it below. A file may include "<layer>/..." internal headers and
# "meshtrain/<header>.h" public ones of its own layer or lower; only the top
# layer (cli) includes the umbrella "meshtrain.h". Prints every violation,
# then a summary; exits 1 if there is any.
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root"

# ---- the layers, bottom up -------------------------------------------------
# base      status codes, messages, RNG, clock, CPUs, the kernel thread pool, the kernel level
# vec       the vector kernels, one table per kernel level (on SLEEF's exp)
# mesh      device meshes: axes, coordinates, groups (no data, no tensors)
# tensor    dtypes, the tensor record, shardings over a mesh
# profile   trace events and the Chrome trace writer; the machine file (probe figures)
# comm      SPMD launch, device contexts, transports, collectives, host arrays.
#           Below ops: the partitioner's collective nodes run on it.
# ops       the op table {name, arity, cost, cost class, run} and the kernels: pure
#           math on host arrays
# backend   the backend table (allocation, copies, conversions, parameter init,
#           the optimizer's update, bf16 product plans, streams; running an op's
#           kernel on its memory), the CPU's (oneDNN's bf16 products) and
#           shape-only. Above comm, so that a backend can own the stream a
#           transport runs on (NCCL's on CUDA's); nothing in comm includes it.
# graph     graphs, op builders, autodiff with the gradient and sharding rules, collective
#           nodes, buffer plan
# partition global program + mesh -> the device's program with collectives inserted
# optim     SGD, AdamW, clipping, learning-rate schedule
# pipeline  pipeline schedules as data: generate, validate, simulate, JSON, SVG
# models    GPT-2, MLP, linear regression
# io        datasets, llm.c files, checkpoints
# train     the training loop, sampling
# plan      the planner: hardware descriptions, memory and step-time models
# examples  worked examples (the pmap linear regression)
# cli       the meshtrain program
LAYERS=(base vec mesh tensor profile comm ops backend graph partition optim pipeline models io train plan examples cli)

# public header -> layer
declare -A PUBLIC=(
    [base]=base [files]=base [mesh]=mesh [tensor]=tensor [sharding]=tensor [profile]=profile [report]=profile
    [comm]=comm [backend]=backend [graph]=graph [graph_spmd]=graph [graph_inspect]=graph [graph_moe]=graph [partition]=partition
    [optim]=optim [pipeline]=pipeline [models]=models [io]=io [tokenizer]=io [train]=train [plan]=plan [examples]=examples
)

declare -A LEVEL
for i in "${!LAYERS[@]}"; do LEVEL[${LAYERS[$i]}]=$i; done
top=${LAYERS[${#LAYERS[@]}-1]}

bad=0 files=0
violation() { echo "layers: $1"; bad=$((bad + 1)); }

# Checks the includes of one file belonging to `layer`.
check_file() {
    local file=$1 layer=$2 mine=${LEVEL[$2]} inc dep
    files=$((files + 1))
    while IFS= read -r inc; do
        if [[ $inc == meshtrain.h ]]; then
            [[ $layer == "$top" ]] || violation "$file includes the umbrella \"meshtrain.h\"; a layer includes its own meshtrain/<layer>.h"
            continue
        elif [[ $inc == meshtrain/*.h ]]; then
            dep=${inc#meshtrain/}; dep=${dep%.h}
            if [[ -z ${PUBLIC[$dep]:-} ]]; then
                violation "$file includes \"$inc\", a public header this script does not map to a layer"
                continue
            fi
            dep=${PUBLIC[$dep]}
        elif [[ $inc == */* ]]; then
            dep=${inc%%/*}
            [[ -n ${LEVEL[$dep]:-} ]] || continue   # not a layer (e.g. a test's own header)
        else
            continue                                # same folder, or a system header in quotes
        fi
        if (( ${LEVEL[$dep]} > mine )); then
            violation "$file ($layer) includes \"$inc\" from the layer above it: $dep"
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
}

for dir in src/*/; do
    layer=$(basename "$dir")
    if [[ -z ${LEVEL[$layer]:-} ]]; then
        violation "src/$layer/ is not a layer; add it to LAYERS in tests/check_layers.sh"
        continue
    fi
    while IFS= read -r -d '' f; do check_file "$f" "$layer"; done \
        < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' \) -print0)
done
for h in include/meshtrain/*.h; do
    name=$(basename "$h" .h)
    if [[ -z ${PUBLIC[$name]:-} ]]; then
        violation "$h is not mapped to a layer; add it to PUBLIC in tests/check_layers.sh"
        continue
    fi
    check_file "$h" "${PUBLIC[$name]}"
done

if (( bad )); then
    echo "layers: $bad violation(s) in $files files (layers bottom up: ${LAYERS[*]})"
    exit 1
fi
echo "layers: $files files, every include looks down (${LAYERS[*]})"
