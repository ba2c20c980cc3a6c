#!/usr/bin/env bash
# The GPU check: one short run (< 10 minutes on one GPU) on a machine WITHOUT internet that has torch (CUDA),
# transformers, accelerate and peft, but not trl or datasets.
#
#   bash scripts/gpu_wheels.sh /tmp/wheels        # beforehand, on a machine with internet; copy the folder
#   bash benchmarks/gpu_check.sh /tmp/wheels         # on the GPU machine, from the repository root
#   bash benchmarks/gpu_check.sh - --cpu-smoke       # this machine: tiny shapes on the CPU, no install
#
# 0. installs what is missing from WHEELS_DIR (pip --no-index: the list is `python scripts/gpu_wheels.py
#    --specs`: trl, datasets and their dependencies pyarrow, dill, xxhash, multiprocess, fsspec, pandas, ...;
#    requirements already satisfied are left alone, torch is never touched); lakeshift runs from src/.
# 1. generates the paper suite's id-train (1000 maps, images, every format);
# 2. (a) the tiny study model on the GPU: grid x none, --prompt map-only, 60 s: tokens/s against the CPU
#    number of benchmarks/README.md (the same command on the 2-core development machine);
# 3. (b) a Qwen2.5-VL with Qwen2.5-VL-7B's published shape and random weights (no download), the paper recipe
#    (batch 1, bf16, gradient checkpointing, AdamW lr 1e-5) for a few steps on real image records: seconds
#    per step, peak memory, and the GPU-hours configs/studies/paper-table1.yaml would take (benchmarks/gpu_recipe.py).
# Results: $WORK/gpu_check.json and the printed summary (WORK defaults to /tmp/lakeshift-gpu-check).
set -euo pipefail
wheels=${1:?usage: gpu_check.sh WHEELS_DIR|- [--cpu-smoke]}
mode=${2:-gpu}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/lakeshift-gpu-check}
cd "$repo"
mkdir -p "$work"
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The CPU reference of step 2: benchmarks/README.md ("GPU check" row), same command on the development machine.
CPU_TOKENS_PER_S=${CPU_TOKENS_PER_S:-1120}
t_start=$(date +%s)
say() { echo "gpu_check [$(($(date +%s) - t_start)) s]: $*"; }
# Some GPU images have only `python3` (a virtual environment's: a symbolic link to it named `python` loses the
# environment, so call it, never link it).
PYTHON_BIN=${PYTHON:-$(command -v python || command -v python3)}
python() { "$PYTHON_BIN" "$@"; }

# 0. Wheels.
python scripts/gpu_wheels.py --specs >"$work/specs.txt"
say "needs: $(tr '\n' ' ' <"$work/specs.txt")"
if [ "$wheels" != "-" ]; then
    [ -d "$wheels" ] || { echo "gpu_check: $wheels: no such folder (make it with scripts/gpu_wheels.sh)" >&2; exit 2; }
    python -m pip install --no-index --find-links "$wheels" -r "$work/specs.txt" | grep -v "^Requirement already satisfied" || true
fi
python - <<'EOF'
import importlib.util, sys
missing = [m for m in ("torch", "transformers", "accelerate", "peft", "trl", "datasets", "gymnasium", "pygame")
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu_check: still missing after the install: {', '.join(missing)}")
EOF
if [ "$mode" = "--cpu-smoke" ]; then
    device=cpu; shape=tiny; gen=(--split id-train --train --sizes 3 4 --count 6); tiny=(--max-steps 8 --logging-steps 1); steps=3
else
    say "probing CUDA (at most 180 s)"
    timeout 180 "$PYTHON_BIN" -c "import torch, sys; torch.cuda.is_available() or sys.exit('gpu_check: no CUDA device (torch ' + torch.__version__ + ')'); print('cuda:', torch.cuda.get_device_name(0))" \
        || { echo "gpu_check: the CUDA probe failed or did not answer in 180 s" >&2; exit 1; }
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    device=cuda; shape=7b; gen=(--suite paper); tiny=(--max-minutes 1 --logging-steps 10); steps=${STEPS:-8}
fi
python -c "import torch, transformers, trl, datasets, accelerate, peft; print('versions: torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__, 'accelerate', accelerate.__version__, 'peft', peft.__version__)"

# 1. Data (the paper suite writes every split; id-train is what both checks read).
say "generating data"
python -m lakeshift.cli generate --out "$work/data" "${gen[@]}" --workers 8 --no-progress
say "data ready"

# 2. (a) The tiny model: real (non-pad) tokens per second from metrics.jsonl, after the first 5 logs (warm-up).
say "training the tiny model"
rm -rf "$work/tiny"
python -m lakeshift.cli train --data "$work/data" --input grid --cot none --model tiny --prompt map-only \
    --out "$work/tiny" "${tiny[@]}" 2>"$work/tiny.log" || { tail -20 "$work/tiny.log"; exit 1; }
python - "$work/tiny/metrics.jsonl" "$CPU_TOKENS_PER_S" "$work/tiny.json" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if "tokens_per_s" in line]
rates = [r["tokens_per_s"] for r in rows[5:] or rows] or [0.0]
rate, cpu = statistics.median(rates), float(sys.argv[2])
print(f"(a) tiny model, grid x none, map-only: {rate:,.0f} tokens/s (median of {len(rates)} logs); "
      f"CPU (benchmarks/README.md): {cpu:,.0f} tokens/s; x{rate / cpu:.1f}")
json.dump({"tokens_per_s": rate, "cpu_tokens_per_s": cpu, "steps": rows[-1]["step"] if rows else 0},
          open(sys.argv[3], "w"))
EOF
say "tiny model done"

# 3. (b) The 7B-shaped Qwen2.5-VL with the paper recipe.
say "building the 7B-shaped model"
python benchmarks/gpu_recipe.py --data "$work/data" --shape "$shape" --device "$device" --steps "$steps" \
    --out "$work/recipe" --json "$work/recipe.json" 2> >(grep -v "it/s\]" >&2)
python - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
summary = {"tiny": json.load(open(f"{work}/tiny.json")), "recipe": json.load(open(f"{work}/recipe.json"))}
json.dump(summary, open(f"{work}/gpu_check.json", "w"), indent=2)
EOF
say "done: $work/gpu_check.json"
