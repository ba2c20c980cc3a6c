#!/usr/bin/env bash
# Downloads, on a machine with internet, the wheels benchmarks/gpu_check.sh installs on a GPU machine without
# internet (one that has torch, transformers, accelerate and peft, but not trl or datasets).
#
#   bash scripts/gpu_wheels.sh OUT [PYTHON_VERSION]        # e.g. OUT=/tmp/wheels, PYTHON_VERSION=3.11
#
# The list is the dependency closure of what lakeshift's training needs besides torch (trl, datasets and
# theirs: pyarrow, dill, xxhash, multiprocess, fsspec, pandas, aiohttp, ...; transformers, accelerate, peft
# and tokenizers in case the GPU machine's are older than lakeshift needs; gymnasium + pygame + pillow to
# render the map images), at the versions installed HERE (the ones lakeshift is tested with), computed from
# this environment's package metadata. torch, triton and nvidia-* are never downloaded: the GPU machine's CUDA
# torch stays. `pip download --no-deps --only-binary=:all:` fetches exactly those, for CPython
# PYTHON_VERSION (default: this python's) on x86_64 manylinux.
set -euo pipefail
out=${1:?usage: gpu_wheels.sh OUT [PYTHON_VERSION]}
pyver=${2:-$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
list="$out/requirements.txt"
python "$here/gpu_wheels.py" >"$list"
echo "gpu_wheels: $(wc -l <"$list") wheels for CPython $pyver -> $out (list: $list)"
abi="cp${pyver/./}"
pip download --no-deps --only-binary=:all: --dest "$out" \
    --implementation cp --python-version "$pyver" --abi "$abi" --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64 --platform any \
    -r "$list"
echo "gpu_wheels: done; copy $out to the GPU machine and run: bash benchmarks/gpu_check.sh $out"
