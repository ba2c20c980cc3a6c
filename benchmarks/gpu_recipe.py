"""The paper's training recipe on a Qwen2.5-VL-7B-shaped model with random weights, a few steps: seconds per
step, peak memory, and what ``configs/studies/paper-table1.yaml`` would cost in GPU-hours. Run by
``benchmarks/gpu_check.sh``; ``--shape tiny --device cpu`` is its CPU smoke mode.

No download: the weights are random and the tokenizer is lakeshift's own (the ``tiny-vl`` one, built from
the data); the image processor is Qwen2-VL's with its default pixel range, so an image costs the same number
of visual tokens as with the real checkpoint. Text token counts are those of lakeshift's tokenizer, not
Qwen's BPE, so the estimate goes through *tokens per second*: measured on real image records, applied to the
token count of every format of Table 1.

The recipe is lakeshift's own ``--preset paper`` (Table 8: batch 1, AdamW lr 1e-5, bf16) with gradient
checkpointing, through the same ``_sft_config`` and ``SFTTrainer`` as ``lakeshift train``; checkpoints off
(a 7B AdamW checkpoint is ~50 GB of disk for nothing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Qwen2.5-VL-7B-Instruct's published config.json (text and vision towers).
SHAPES: dict[str, dict[str, dict[str, Any]]] = {
    "7b": {
        "text": {
            "hidden_size": 3584,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "intermediate_size": 18944,
            "vocab_size": 152064,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]},
        },
        "vision": {
            "depth": 32,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 3584,
            "fullatt_block_indexes": [7, 15, 23, 31],
        },
    },
    "tiny": {"text": {}, "vision": {}},  # build_tiny_vl's own dims: the CPU smoke test
}
# configs/studies/paper-table1.yaml: the 16 fine-tuned (input, cot) pairs, 10 epochs of 1000 id-train maps.
TABLE1 = [("image", "none"), ("image", "desc")] + [
    (inp, cot)
    for inp, cots in (
        ("desc", ("none", "desc", "grid", "table", "grid+desc", "table+desc")),
        ("table", ("none", "desc", "table", "table+desc")),
        ("grid", ("none", "desc", "grid", "grid+desc")),
    )
    for cot in cots
]
EPOCHS, MAPS = 10, 1000


def build(shape: str, texts: list[str], device: str) -> tuple[Any, Any]:
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from lakeshift.models.registry import build_tiny_vl

    tiny, processor = build_tiny_vl(texts)
    if shape == "tiny":
        return tiny.to(device), processor
    processor.image_processor = Qwen2VLImageProcessorPil(patch_size=14, merge_size=2, temporal_patch_size=2)
    cfg = tiny.config.to_dict()
    cfg["text_config"].pop("layer_types", None)  # one entry per layer of the tiny model: rebuilt for 28
    cfg["text_config"].update(
        SHAPES[shape]["text"], max_window_layers=SHAPES[shape]["text"]["num_hidden_layers"]
    )
    cfg["vision_config"].update(SHAPES[shape]["vision"])
    config = Qwen2_5_VLConfig.from_dict(cfg)
    with torch.device(device):  # random init on the GPU, in bf16: seconds, no 33 GB fp32 copy in RAM
        model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    model.generation_config = tiny.generation_config
    return model, processor


def step_timer(device: str) -> Any:
    import torch
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.tokens: list[float] = []
            self._t = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            self._t = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self._t)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "num_tokens" in logs:
                self.tokens.append(float(logs["num_tokens"]))

    return StepTimer()


def train_steps(model: Any, processor: Any, data: Path, cot: str, steps: int, device: str, out: Path) -> dict:
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback
    from transformers.trainer_utils import SaveStrategy
    from trl import SFTTrainer

    from lakeshift.models.data import load_sft
    from lakeshift.models.registry import ModelSpec, freeze_vision_tower
    from lakeshift.models.train import sft_config, sft_rows
    from lakeshift.models.train_options import TrainOptions, resolve_hparams

    cuda = device.startswith("cuda")
    sft = load_sft(data, "id-train", "image", cot, limit=steps)
    opts = TrainOptions(str(data), "image", cot, "qwen2.5-vl-7b-shaped", str(out), preset="paper")
    opts.max_steps, opts.gradient_checkpointing, opts.bf16, opts.logging_steps = steps, cuda, cuda, 1
    spec = ModelSpec("qwen2.5-vl-7b-shaped", "hub", None, vision=True, model_type=model.config.model_type)
    hp = resolve_hparams(opts, spec, cuda)
    args = sft_config(out, hp, len(sft.records), cuda)
    args.save_strategy = SaveStrategy.NO
    frozen = freeze_vision_tower(model)
    timer = step_timer(device)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(sft_rows(sft)), processing_class=processor
    )
    trainer.add_callback(timer)
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    steady = timer.times[2:] or timer.times  # the first steps include allocator warm-up
    per_step = [b - a for a, b in zip([0.0, *timer.tokens], timer.tokens, strict=False)]
    tok = statistics.mean(per_step[2:] or per_step)
    return {
        "cot": cot,
        "steps": len(timer.times),
        "s_per_step": statistics.median(steady),
        "tokens_per_step": tok,
        "tokens_per_s": tok / statistics.median(steady),
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "frozen_params": frozen,
        "n_params": sum(p.numel() for p in model.parameters()),
        "hparams": {k: hp[k] for k in ("batch_size", "grad_accum", "lr", "weight_decay", "bf16")}
        | {"gradient_checkpointing": hp["gradient_checkpointing"], "optim": args.optim},
    }


def tokens_per_record(processor: Any, data: Path, inp: str, cot: str) -> float:
    """Mean tokens (text through the processor's tokenizer, plus visual tokens) of a format's records."""
    from lakeshift.models.data import load_sft

    tok = processor.tokenizer
    sft = load_sft(data, "id-train", inp, cot)
    image_tokens = 0
    if inp == "image":
        from PIL import Image

        first = sft.records[0]
        image = Image.open(sft.split_dir / first["images"][0]).convert("RGB")
        grid = processor.image_processor(images=[image], return_tensors="pt")["image_grid_thw"][0]
        image_tokens = int(grid.prod()) // 4  # spatial merge 2x2

    def text(content: Any) -> str:
        if isinstance(content, str):
            return content
        return "".join(part.get("text", "") for part in content if part.get("type") == "text")

    texts = ["".join(text(m["content"]) for m in r["messages"]) for r in sft.records]
    return statistics.mean(len(tok(t)["input_ids"]) for t in texts) + image_tokens


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="a suite with id-train (images, all formats)")
    p.add_argument("--shape", choices=sorted(SHAPES), default="7b")
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--out", type=Path, default=Path("/tmp/lakeshift-gpu-recipe"))
    p.add_argument("--json", type=Path, help="write the measurements here")
    a = p.parse_args()

    from lakeshift.models.data import load_sft
    from lakeshift.models.tokenizer import message_texts

    texts = [
        t
        for inp, cot in TABLE1
        for r in load_sft(a.data, "id-train", inp, cot, limit=50).records
        for t in message_texts(r["messages"])
    ]
    t0 = time.time()
    model, processor = build(a.shape, texts, a.device)
    built = time.time() - t0
    print(
        f"built {a.shape} Qwen2.5-VL: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters "
        f"in {built:.0f} s",
        flush=True,
    )
    runs = [
        train_steps(model, processor, a.data, cot, a.steps, a.device, a.out / cot) for cot in ("none", "desc")
    ]
    for r in runs:
        mem = f", peak {r['peak_gib']:.1f} GiB" if r["peak_gib"] is not None else ""
        print(
            f"image x {r['cot']}: {r['s_per_step']:.3f} s/step, {r['tokens_per_step']:.0f} tokens/step, "
            f"{r['tokens_per_s']:.0f} tokens/s{mem}"
        )
    rate = statistics.mean(r["tokens_per_s"] for r in runs)
    hours = 0.0
    lines = []
    for inp, cot in TABLE1:
        n = tokens_per_record(processor, a.data, inp, cot)
        h = EPOCHS * MAPS * n / rate / 3600
        hours += h
        lines.append(f"  {inp:>5} x {cot:<10} {n:7.0f} tokens/map  {h:6.2f} GPU-h")
    print(
        f"configs/studies/paper-table1.yaml: 16 models x {EPOCHS} epochs x {MAPS} maps at {rate:.0f} tok/s:"
    )
    print("\n".join(lines))
    print(
        f"  total {hours:.1f} GPU-hours on this device (training only, batch 1, no data-parallel speed-up; "
        f"text tokens counted with lakeshift's tokenizer, not Qwen's)"
    )
    if a.json:
        a.json.write_text(json.dumps({"shape": a.shape, "runs": runs, "table1_gpu_hours": hours}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
