"""Training throughput: trl SFTTrainer vs a plain PyTorch loop on the same batches (real tokens/s, peak RSS).

    python benchmarks/bench_train.py [--model tiny] [--maps 64] [--steps 30] [--prompt map-only] [--cot grid]

The data is a real training split written by ``lakeshift generate`` (sizes 3-6, ``--maps`` in all). Each
mode runs in its own process (peak memory is per process) and builds the same trainer, so both train the
same freshly initialised model (same seed) with:

- the same batches: the first ``--steps`` batches of trl's own length-grouped dataloader, collated before
  the clock starts, are handed to both (trl through ``get_train_dataloader``); the batches each mode
  actually trains on are recorded and checked;
- the same precision: fp32 weights with bf16 autocast when the CPU has native bf16 (trl's ``bf16=True`` on
  CPU is exactly that autocast; the weight dtype is checked in both modes);
- the same threads (``torch.get_num_threads()`` is recorded inside the training step of both modes);
- the same optimizer (AdamW, lr 1e-3, weight decay 0, no warmup, constant lr, trl's gradient clipping 1.0).

Reported: tokens/s over all steps (wall clock of ``trainer.train()`` vs the loop) and in the steady state
(after ``--warmup`` steps; oneDNN builds kernels for each new sequence length during the first steps).
The plain loop computes the loss as a hand-written loop would (the model's logits and cross-entropy);
trl uses its fused LM head, which projects only the assistant positions. Target: trl within 10% of the
plain loop.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def generate(root: Path, args: argparse.Namespace) -> None:
    """A training split of ``--maps`` maps of sizes 3-6 with one SFT file, through ``lakeshift generate``."""
    from lakeshift.cli import main

    argv = ["generate", "--out", str(root), "--split", "id-train", "--train", "--sizes", "3", "4", "5", "6"]
    argv += ["--count", str(max(1, args.maps // 4)), "--hole-prob", "0.2", "--no-images", "--no-progress"]
    argv += ["--inputs", "grid", "--cots", args.cot, "--workers", "1"]
    if main(argv) != 0:
        raise SystemExit("lakeshift generate failed")


def build(args: argparse.Namespace, root: Path) -> tuple[Any, bool]:
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from lakeshift.models.data import load_sft
    from lakeshift.models.registry import build_named
    from lakeshift.models.tokenizer import message_texts
    from lakeshift.models.train_options import cpu_has_bf16

    generate(root, args)
    sft = load_sft(root, "id-train", "grid", args.cot, prompt=args.prompt)
    texts = [t for r in sft.records for t in message_texts(r["messages"])]
    torch.manual_seed(0)
    model, tok = build_named(args.model, texts)
    bf16 = cpu_has_bf16() if args.bf16 is None else args.bf16
    config = SFTConfig(
        output_dir=str(root / "out"),
        per_device_train_batch_size=args.batch_size,
        max_steps=args.steps,
        learning_rate=1e-3,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        bf16=bf16,
        activation_checkpointing=False,
        assistant_only_loss=True,
        max_length=None,
        train_sampling_strategy="group_by_length",
        logging_steps=10**6,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
    )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list([{"messages": r["messages"]} for r in sft.records]),
        processing_class=tok,
    )
    return trainer, bf16


def _step_timer(marks: list[float]) -> Any:
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            marks.append(time.perf_counter())

    return StepTimer()


def run(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        trainer, bf16 = build(args, Path(tmp))
        loader = trainer.get_train_dataloader()
        batches: list[dict[str, Any]] = []
        while len(batches) < args.steps:
            batches.extend(loader)
        batches = batches[: args.steps]
        planned = [int(b["attention_mask"].sum()) for b in batches]
        seen: list[int] = []  # real tokens of each batch actually trained on
        threads: set[int] = set()
        marks: list[float] = []
        model = trainer.model
        dtypes = sorted({str(p.dtype) for p in model.parameters()})
        if mode == "trl":
            original = trainer.training_step

            def training_step(model: Any, inputs: dict[str, Any], *a: Any, **kw: Any) -> Any:
                seen.append(int(inputs["attention_mask"].sum()))
                threads.add(torch.get_num_threads())
                return original(model, inputs, *a, **kw)

            trainer.training_step = training_step
            # Feed trl the very batches the plain loop gets (its own loader reshuffles when train() reseeds).
            trainer.get_train_dataloader = lambda: batches
            trainer.add_callback(_step_timer(marks))
            start = time.perf_counter()
            trainer.train()
            seconds = time.perf_counter() - start
        else:
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
            start = time.perf_counter()
            for batch in batches:
                seen.append(int(batch["attention_mask"].sum()))
                threads.add(torch.get_num_threads())
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    out = model(
                        input_ids=batch["input_ids"],
                        attention_mask=batch["attention_mask"],
                        labels=batch["labels"],
                        use_cache=False,
                    )
                out.loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                marks.append(time.perf_counter())
            seconds = time.perf_counter() - start
    if seen != planned:
        raise SystemExit(f"{mode}: trained on other batches than planned ({seen[:5]}... vs {planned[:5]}...)")
    w = args.warmup
    steady_tokens = sum(seen[w + 1 :])
    steady_seconds = marks[-1] - marks[w]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {
        "mode": mode,
        "tokens": sum(seen),
        "seconds": seconds,
        "tokens_per_s": sum(seen) / seconds,
        "steady_tokens_per_s": steady_tokens / steady_seconds,
        "threads": sorted(threads),
        "weights": dtypes,
        "bf16_autocast": bf16,
        "peak_gib": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--maps", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5, help="steps left out of the steady-state rate")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--cot", default="grid")
    parser.add_argument("--prompt", choices=("mirage", "map-only"), default="map-only")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--repeats", type=int, default=2, help="runs per mode, interleaved; best reported")
    parser.add_argument("--mode", choices=("trl", "plain"))
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(run(args.mode, args)))
        return
    passthrough = _without(sys.argv[1:], "--repeats")
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "trl": []}
    # Interleaved and best-of: the CPU is shared, so the load drifts between runs.
    for _ in range(args.repeats):
        for mode in ("plain", "trl"):
            cmd = [sys.executable, __file__, *passthrough, "--mode", mode]
            env = {**os.environ, "TQDM_DISABLE": "1"}
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            runs[mode].append(r)
            print(
                f"{mode:6s} {r['tokens']:>8d} real tokens in {r['seconds']:.1f} s = "
                f"{r['tokens_per_s']:,.0f} tok/s (steady {r['steady_tokens_per_s']:,.0f}), "
                f"threads {r['threads']}, weights {r['weights']}, bf16 autocast {r['bf16_autocast']}, "
                f"peak RSS {r['peak_gib']:.2f} GiB",
                flush=True,
            )
    for key in ("tokens_per_s", "steady_tokens_per_s"):
        best = {mode: max(r[key] for r in rs) for mode, rs in runs.items()}
        print(
            f"best {key}: plain {best['plain']:,.0f}, trl {best['trl']:,.0f}, "
            f"trl / plain = {best['trl'] / best['plain']:.3f} (target >= 0.90)"
        )


def _without(argv: list[str], option: str) -> list[str]:
    """``argv`` without ``option`` and its value."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(option + "="):
            out.append(arg)
    return out


if __name__ == "__main__":
    main()
