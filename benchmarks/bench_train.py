"""Training throughput: trl SFTTrainer vs a plain PyTorch loop on the same batches (real tokens/s, peak RSS).

    python benchmarks/bench_train.py [--model tiny] [--maps 64] [--steps 30]

Each mode runs in its own process (peak memory is per process). Both use the same model size, seed,
length-grouped batches (taken from trl's own dataloader), bf16 autocast when the CPU supports it, AdamW.
Target: trl within 10% of the plain loop.
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


def build(args: argparse.Namespace, root: Path):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from lakeshift.models import toydata
    from lakeshift.models.data import load_sft
    from lakeshift.models.registry import build_named
    from lakeshift.models.tokenizer import message_texts
    from lakeshift.models.train import cpu_has_bf16

    maps = toydata.random_maps(args.maps, sizes=(3, 4, 5, 6), seed=0)
    toydata.write_split(root, "id-train", maps, pairs=(("grid", "grid"),))
    sft = load_sft(root, "id-train", "grid", "grid")
    texts = [t for r in sft.records for t in message_texts(r["messages"])]
    model, tok = build_named(args.model, texts)
    bf16 = cpu_has_bf16()
    config = SFTConfig(
        output_dir=str(root / "out"),
        per_device_train_batch_size=8,
        max_steps=args.steps,
        learning_rate=1e-3,
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


def run(mode: str, args: argparse.Namespace) -> dict:
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        trainer, bf16 = build(args, Path(tmp))
        batches = []
        loader = trainer.get_train_dataloader()
        while len(batches) < args.steps:
            batches.extend(loader)
        batches = batches[: args.steps]
        tokens = int(sum(b["attention_mask"].sum() for b in batches))
        if mode == "trl":
            start = time.perf_counter()
            trainer.train()
            seconds = time.perf_counter() - start
        else:
            model = trainer.model
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
            start = time.perf_counter()
            for batch in batches:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    out = model(
                        input_ids=batch["input_ids"],
                        attention_mask=batch["attention_mask"],
                        labels=batch["labels"],
                        use_cache=False,
                    )
                out.loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {
        "mode": mode,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "peak_gib": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--maps", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--mode", choices=("trl", "plain"))
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(run(args.mode, args)))
        return
    results = {}
    for mode in ("plain", "trl"):
        cmd = [
            sys.executable,
            __file__,
            "--mode",
            mode,
            "--model",
            args.model,
            "--maps",
            str(args.maps),
            "--steps",
            str(args.steps),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        results[mode] = json.loads(out)
        r = results[mode]
        print(
            f"{mode:6s} {r['tokens']:>8d} real tokens in {r['seconds']:.1f} s = "
            f"{r['tokens_per_s']:,.0f} tok/s, "
            f"peak RSS {r['peak_gib']:.2f} GiB"
        )
    ratio = results["trl"]["tokens_per_s"] / results["plain"]["tokens_per_s"]
    print(f"trl / plain = {ratio:.3f} (target >= 0.90)")


if __name__ == "__main__":
    main()
