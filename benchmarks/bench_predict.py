"""Prediction throughput of the ``hf`` backend: batched vs batch-1 generation (tokens/s, peak RSS).

    python benchmarks/bench_predict.py [--model tiny] [--n 32] [--batch 32] [--new 64] [--prompt map-only]

The prompts are a real test split of ``--n`` maps of sizes 5-6 written by ``lakeshift generate``. Uses a
random-weights named model saved as a checkpoint (throughput does not depend on the weights; the random
model never emits the stop token, so every prompt generates exactly --new tokens in both modes).
Target: batched >= 5x batch 1.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(batch: int, args: argparse.Namespace) -> dict:
    from lakeshift.cli import main
    from lakeshift.models.backends.hf import HFBackend
    from lakeshift.models.data import load_sft
    from lakeshift.models.generation import Decoding
    from lakeshift.models.predict import items_from
    from lakeshift.models.registry import build_named
    from lakeshift.models.tokenizer import message_texts

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        argv = ["generate", "--out", str(root), "--split", "id-test", "--sizes", "5", "6"]
        argv += ["--count", str(max(1, args.n // 2)), "--hole-prob", "0.2", "--no-images", "--no-progress"]
        argv += ["--inputs", "grid", "--cots", "grid", "--workers", "1"]
        if main(argv) != 0:
            raise SystemExit("lakeshift generate failed")
        sft = load_sft(root, "id-test", "grid", "grid", prompt=args.prompt)
        model, tok = build_named(args.model, [t for r in sft.records for t in message_texts(r["messages"])])
        model.save_pretrained(root / "ckpt")
        tok.save_pretrained(root / "ckpt")
        backend = HFBackend(str(root / "ckpt"), batch_size=batch)
        backend._load()
        items = items_from(sft)
        tokens = 0

        def emit(item, gen):
            nonlocal tokens
            tokens += gen.n_output_tokens

        start = time.perf_counter()
        backend.run(items, Decoding(max_new_tokens=args.new), emit)
        seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {
        "batch": batch,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "peak_gib": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--prompt", choices=("mirage", "map-only"), default="map-only")
    parser.add_argument("--only", type=int)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(run(args.only, args)))
        return
    results = {}
    for batch in (1, args.batch):
        cmd = [
            sys.executable,
            __file__,
            "--only",
            str(batch),
            "--model",
            args.model,
            "--n",
            str(args.n),
            "--new",
            str(args.new),
            "--prompt",
            args.prompt,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        r = results[batch] = json.loads(out)
        print(
            f"batch {batch:>3d}: {r['tokens']} tokens in {r['seconds']:.1f} s = "
            f"{r['tokens_per_s']:,.0f} tok/s, "
            f"peak RSS {r['peak_gib']:.2f} GiB"
        )
    print(
        f"batched / batch-1 = {results[args.batch]['tokens_per_s'] / results[1]['tokens_per_s']:.1f}x "
        "(target >= 5x)"
    )


if __name__ == "__main__":
    main()
