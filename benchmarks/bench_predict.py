"""Prediction throughput of the ``hf`` backend's engines side by side, in one run, on the same model and
prompts: ``generate`` (transformers ``generate`` in batches of 32, the CPU default before continuous
batching), ``continuous`` (one token per slot and pass) and ``speculative`` (each greedy pass verifies a
draft per slot from the map before), with the model's batched forward throughput as the compute bound.

    python benchmarks/bench_predict.py --model RUN_DIR --data DATA [--split ood-dist] [--sizes 10]
        [--n 128] [--new 400] [--fixed 256 1024] [--engines generate continuous speculative] [--no-bound]

Workloads (each on every engine, in a fresh process each, one at a time):

- ``answers``: the model's own answers to ``--n`` maps of ``--split`` (its input and CoT format from its
  run.json), up to ``--new`` tokens: mixed lengths, where a batch of ``generate`` waits for its longest row;
- ``fixed N``: the same prompts with the end of turn never reached (no stop token), every row ``N`` tokens:
  the per-step cost alone, long traces included.

Reported per run: tokens/s, maps/s, tokens per forward pass (the continuous engines), each engine's maps/s
and greedy answers against the first engine's, and the ratio of decoding tokens/s to the forward
throughput (one batched forward pass over rows of prompt + ``N`` tokens, the rows of the continuous
engine's batch, at most :data:`FORWARD_ROWS` at a time; ``--no-bound`` skips it, e.g. for 20x20 traces).
Targets: speculative >= 10x continuous's maps/s on long redrawn-map traces; decoding >= 50% of the forward
throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

#: Rows per forward pass of the compute bound (more would only hold more attention scores at once).
FORWARD_ROWS = 32


def load_prompts(args: argparse.Namespace) -> tuple[list, str, str]:
    from lakeshift.models.data import load_sft
    from lakeshift.models.predict import items_from

    run = json.loads((Path(args.model) / "run.json").read_text())
    input_format, cot, prompt = run["input_format"], run["cot_format"], run["prompt"]
    sft = load_sft(
        args.data, args.split, input_format, cot, sizes=args.sizes or None, limit=args.n, prompt=prompt
    )
    return items_from(sft), input_format, cot


def one(args: argparse.Namespace) -> dict:
    """One engine on one workload, in this process."""
    import torch

    from lakeshift.models.backends.hf import HFBackend
    from lakeshift.models.generation import Decoding

    if args.threads:
        torch.set_num_threads(args.threads)
    items, _, _ = load_prompts(args)
    backend = HFBackend(args.model, engine=args.engine)
    backend._load()
    if args.fixed:
        backend.stop_ids = lambda: [backend._model.config.vocab_size]  # an id no model emits
    answers: dict[str, str] = {}
    tokens = passes = 0

    def emit(item, gen) -> None:
        nonlocal tokens, passes
        tokens += gen.n_output_tokens
        passes += gen.n_passes or gen.n_output_tokens
        answers[item.id] = gen.text

    start = time.perf_counter()
    backend.run(items, Decoding(max_new_tokens=args.fixed or args.new), emit)
    seconds = time.perf_counter() - start
    return {
        "engine": args.engine,
        "batch": backend.last_batch_size,
        "threads": torch.get_num_threads(),
        "maps": len(items),
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "tokens_per_pass": tokens / max(passes, 1),
        "maps_per_s": len(items) / seconds,
        "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "answers": answers,
    }


def forward_rate(args: argparse.Namespace, new: int) -> float:
    """Tokens/s of full forward passes over :data:`FORWARD_ROWS` prompts extended to ``new`` more tokens."""
    import torch

    from lakeshift.models.backends.hf import HFBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    items, _, _ = load_prompts(args)
    backend = HFBackend(args.model, engine="generate")
    backend._load()
    prompts = [backend._encode([it])["input_ids"][0].tolist() for it in items[:FORWARD_ROWS]]
    width = max(len(p) for p in prompts) + new
    ids = torch.tensor([(p * (width // len(p) + 1))[:width] for p in prompts])
    with torch.inference_mode():
        backend._model(input_ids=ids[:2, :64])  # warm-up
        start = time.perf_counter()
        backend._model(input_ids=ids, use_cache=False)
        seconds = time.perf_counter() - start
    return ids.numel() / seconds


def spawn(args: argparse.Namespace, **extra: object) -> dict:
    cmd = [sys.executable, __file__, "--model", args.model, "--data", args.data, "--split", args.split]
    cmd += ["--n", str(args.n), "--new", str(args.new), "--threads", str(args.threads or 0)]
    if args.sizes:
        cmd += ["--sizes", *map(str, args.sizes)]
    for key, value in extra.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, help="a run folder of lakeshift train")
    parser.add_argument("--data", required=True)
    parser.add_argument("--split", default="ood-dist")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--new", type=int, default=400, help="the answers' token cap")
    parser.add_argument("--fixed", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--engines", nargs="+", default=["generate", "continuous", "speculative"])
    parser.add_argument("--no-bound", action="store_true", help="skip the forward throughput")
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--forward", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.forward is not None:
        print(json.dumps({"tokens_per_s": forward_rate(args, args.forward)}))
        return
    if args.engine:
        args.fixed = args.fixed[0] or None
        print(json.dumps(one(args)))
        return
    print(
        f"load {os.getloadavg()[0]:.2f}; {args.model}, {args.split} sizes {args.sizes}, {args.n} maps, "
        f"threads {args.threads or 'default'}"
    )
    for fixed in [None, *args.fixed]:
        name = f"fixed {fixed}" if fixed else f"answers (cap {args.new})"
        runs = {}
        for engine in args.engines:
            runs[engine] = r = spawn(args, engine=engine, fixed=fixed or 0)
            print(
                f"{name:18} {engine:11} batch {r['batch']:>4}: {r['tokens']:>8} tokens in "
                f"{r['seconds']:7.1f} s = {r['tokens_per_s']:7,.0f} tok/s, {r['maps_per_s']:6.2f} maps/s, "
                f"{r['tokens_per_pass']:5.1f} tok/pass, peak {r['peak_gib']:.2f} GiB",
                flush=True,
            )
        first = runs[args.engines[0]]
        for engine in args.engines[1:]:
            r = runs[engine]
            same = sum(first["answers"][k] == r["answers"].get(k) for k in first["answers"])
            print(
                f"{name:18} {engine} / {args.engines[0]}: {r['maps_per_s'] / first['maps_per_s']:.1f}x "
                f"maps/s; identical answers {same}/{len(first['answers'])}",
                flush=True,
            )
        if not args.no_bound:
            bound = spawn(args, forward=fixed or args.new, fixed=0)["tokens_per_s"]
            shares = ", ".join(f"{e} {runs[e]['tokens_per_s'] / bound:.0%}" for e in args.engines)
            print(f"{name:18} forward {bound:,.0f} tok/s: {shares}", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
