"""What ``lakeshift train`` (supervised) accepts and the hyper-parameters a run resolves from it.

:class:`TrainOptions` holds the options as given (``None``: take it from the preset or the machine);
:func:`resolve_hparams` turns them into :class:`Hyperparameters`, the frozen, typed settings a run trains
with, which ``run.json`` records (:meth:`Hyperparameters.to_json`) and ``--resume`` compares. Nothing here
imports an ML library, so the command line and the study planner can use it.

Presets (``--preset``):

- ``scratch`` (default for lakeshift's small models: named sizes, shipped bases and their runs): lr 3e-3,
  batch 32, warmup 3%, weight decay 0.01 (the recipe RESULTS.md chose among those it measured), and the
  paper's 10 epochs (Table 8).
- ``paper`` (default for checkpoints): Table 8 of the paper as printed: 10 epochs, per-device batch 1,
  gradient accumulation **1**, 10 warmup steps, lr 1e-5, weight decay 0.01, AdamW, bf16; plus gradient
  checkpointing on GPU (as the paper's code).
- ``paper-code``: the same with gradient accumulation **2**, as the paper's published training script.

CPU defaults (their measurements: benchmarks/README.md): bf16 autocast when the CPU has native bf16 and the
model's hidden size is at least :data:`BF16_MIN_HIDDEN` (below it the casts cost more than they save), no
gradient checkpointing, length-grouped batches, no packing. Conversations are never truncated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS
from lakeshift.models import cells
from lakeshift.models.data import PROMPTS
from lakeshift.models.registry import ModelSpec, hidden_size
from lakeshift.models.tokenizer import TOKENIZERS
from lakeshift.options import option
from lakeshift.traces import COT_FORMATS

PRESETS: dict[str, dict[str, Any]] = {
    "scratch": {
        "epochs": 10,
        "batch_size": 32,
        "grad_accum": 1,
        "lr": 3e-3,
        "warmup_ratio": 0.03,
        "warmup_steps": 0,
        "weight_decay": 0.01,
    },
    "paper": {
        "epochs": 10,
        "batch_size": 1,
        "grad_accum": 1,
        "lr": 1e-5,
        "warmup_ratio": 0.0,
        "warmup_steps": 10,
        "weight_decay": 0.01,
    },
}
PRESETS["paper-code"] = {**PRESETS["paper"], "grad_accum": 2}


#: The named sizes ``--model`` accepts, for the help of the commands that take one.
NAMED_HELP = (
    "micro, mini, tiny, small, base (Qwen2, random init, structured tokenizer), micro-cells, mini-cells, "
    "tiny-cells (the same with row/column embeddings for map cells), mini-cells-shift (mini-cells whose "
    "rows and columns move by a random offset per training sequence), mini-cells-compose (mini-cells-shift "
    "whose coordinate tokens are a shared vector plus their row and column embeddings), tiny-vl (random "
    "Qwen2.5-VL), mini-vl (random Qwen2.5-VL with mini's language model, one visual token per map cell), "
    "mini-vl-cells (mini-vl whose visual tokens get their cell's row/column embeddings), "
    "mini-cells-base (mini-cells pretrained by lakeshift pretrain on map reading and random walks), "
    "mini-cells-trace-base (mini-cells-base pretrained further on random-walk traces in every CoT format)"
)
PROMPT_HELP = (
    "mirage: the SFT file's user message, Mirage's rule text (~1,200 characters) with the map (the paper's "
    "setup); map-only: just the map in the input format (for image input: just the image), rendered from "
    "<split>/maps.jsonl; for small from-scratch models that cannot use the rule text (9x fewer tokens "
    "for grid x none, 3x for grid x grid+desc on 3x3-6x6 maps)"
)


def parse_cells(text: str) -> dict[str, Any]:
    """``--cells FIELD=VALUE,...``: the cells spec fields to change (:func:`cells.parse_overrides`)."""
    import argparse

    try:
        return cells.parse_overrides(text)
    except LakeshiftError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_sizes(text: str) -> list[int]:
    """``--sizes``: comma-separated map sizes, e.g. ``7,8``, sorted and without repeats; each a map size
    (the ``map_size`` rule), and at least one (an empty list would select every size)."""
    import argparse

    from lakeshift.config import number_problem

    try:
        sizes = sorted({int(x) for x in text.replace(" ", "").split(",") if x})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated map sizes such as 7,8; got {text!r}"
        ) from None
    if not sizes:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated map sizes such as 7,8; got {text!r} (leave --sizes out for every size)"
        )
    for size in sizes:
        problem = number_problem(size, "map_size")
        if problem:
            raise argparse.ArgumentTypeError(f"map size {problem}")
    return sizes


@dataclass
class RunOptions:
    """The options every training method takes (``None`` = take it from the preset or the machine).

    Each field is an :func:`lakeshift.options.option`: its metadata is the ``lakeshift train`` option and,
    where marked, a key of a study's ``train:`` section and of a pretraining config's ``train:``."""

    data: str = option(required=True, help="folder written by `lakeshift generate`")
    input_format: str = option(required=True, flag="--input", choices=INPUT_FORMATS)
    cot_format: str = option(required=True, flag="--cot", choices=COT_FORMATS)
    model: str = option(
        required=True,
        help=f"named size ({NAMED_HELP}), checkpoint folder, or hub id",
        study=True,
        pretrain=True,
    )
    out: str = option(required=True, help="run folder")
    split: str = option("id-train", help="training split (default id-train; e.g. embed10-train)", study=True)
    epochs: float | None = option(
        rule="positive_float", help="passes over the data (> 0)", study=True, pretrain=True
    )
    max_steps: int | None = option(
        rule="positive_int",
        help="stop after this many optimizer steps (overrides --epochs)",
        study=True,
        pretrain=True,
    )
    max_minutes: float | None = option(
        rule="positive_float",
        help="training time budget: stop (and save) after this many minutes, whatever the epoch; after "
        "warmup the learning rate decays linearly to zero with the clock (equal budgets for formats of "
        "different lengths, each fully annealed)",
        study=True,
        pretrain=True,
    )
    batch_size: int | None = option(
        rule="batch_size", help="per-device batch size", study=True, pretrain=True
    )
    grad_accum: int | None = option(rule="positive_int", help="gradient accumulation steps", study=True)
    lr: float | None = option(rule="positive_float", help="peak learning rate", study=True, pretrain=True)
    warmup_steps: int | None = option(rule="nonnegative_int", study=True, pretrain=True)
    weight_decay: float | None = option(rule="nonnegative_float", study=True, pretrain=True)
    seed: int = option(
        0, rule="seed", help="0 .. 2**32 - 1 (numpy's range; default 0)", study=True, pretrain=True
    )
    limit: int | None = option(rule="positive_int", help="train on the first N records only", study=True)
    sizes: list[int] | None = option(parse=parse_sizes, help="train on maps of these sizes only, e.g. 3,4")
    lora: bool = option(
        False, kind="flag", help="LoRA adapters (peft) instead of full fine-tuning", study=True
    )
    lora_r: int = option(16, rule="lora_rank")
    lora_alpha: int = option(32, rule="positive_int")
    bf16: bool | None = option(
        kind="toggle",
        help="bf16 mixed precision (default: on with a GPU or a CPU with native bf16)",
        pretrain=True,
    )
    gradient_checkpointing: bool | None = option(
        kind="toggle", help="default: on for checkpoints on a GPU, off otherwise (2x slower for small models)"
    )
    save_steps: int | None = option(
        rule="positive_int",
        help="checkpoint every N steps (default: ~5 per run, last 2 kept)",
        pretrain=True,
    )
    logging_steps: int | None = option(rule="positive_int")
    resume: bool = option(False, kind="flag", help="continue OUT from its last checkpoint")


#: ``--vision-tower``: whether a vision model's encoder (and merger) trains with the rest. Unless given, a
#: small vision size or its run (``ModelSpec.small``: its tower starts random) trains it and a pretrained
#: checkpoint's is frozen, as in the paper.
VISION_TOWERS: tuple[str, ...] = ("trained", "frozen")


def default_vision_tower(spec: ModelSpec) -> str:
    """The :data:`VISION_TOWERS` value a vision model gets unless one is given."""
    return "trained" if spec.small else "frozen"


@dataclass
class TrainOptions(RunOptions):
    """Everything ``lakeshift train`` (supervised) accepts."""

    prompt: str = option(
        "mirage",
        choices=PROMPTS,
        help="user message to train on (default mirage; with --method grpo: the initial run's; recorded in "
        f"run.json): {PROMPT_HELP}",
        study=True,
    )
    tokenizer: str = option(
        "structured",
        choices=TOKENIZERS,
        help="named sizes: structured (default: one token per cell, move, word, number) or char "
        "(one per character); ignored for checkpoints, which bring their own",
        study=True,
    )
    preset: str | None = option(
        choices=tuple(PRESETS),
        help="scratch (default for named sizes and lakeshift's base models: lr 3e-3, batch 32, 10 epochs); "
        "paper (default for checkpoints): "
        "Table 8 as printed: 10 epochs, batch 1, gradient accumulation 1, 10 warmup steps, lr 1e-5, "
        "weight decay 0.01, AdamW, bf16; "
        "paper-code: the same with gradient accumulation 2, as the paper's code",
        study=True,
    )
    global_batch_size: int | None = option(
        rule="batch_size",
        help="maps per optimizer step over all processes: sets the per-device batch to N / (processes x "
        "gradient accumulation), which must divide exactly (same recipe on 1 or 8 GPUs)",
    )
    max_length: int | None = option(
        rule="tokens", help="truncate conversations to N tokens (default: never)", study=True
    )
    # None: the rule of VISION_TOWERS (a small vision model trains its tower, a checkpoint's is frozen).
    vision_tower: str | None = option(
        choices=VISION_TOWERS,
        help="vision models: trained (the default for the small random vision sizes and their runs) or "
        "frozen (the default for pretrained checkpoints, as in the paper): the vision encoder and merger",
        study=True,
        pretrain=True,
    )
    # A cells model's own spec unless given (None); saved with the model.
    cells: dict[str, Any] | None = option(
        parse=parse_cells,
        check=cells.check_overrides,
        write=cells.format_overrides,
        metavar="FIELD=VALUE,...",
        help="cells models (mini-cells*, the mini-cells-*-base models): change the model's cells spec, e.g. "
        "grids=next,walk=trace,maps=grid+desc,player=true (fields of lakeshift.models.cells.CellSpec: "
        f"{cells.spec.fields_help()}); in a config, a mapping; saved with the model",
        study=True,
        pretrain=True,
    )


#: The smallest hidden size for which bf16 autocast pays on a CPU with native bf16 (see the module doc).
BF16_MIN_HIDDEN = 256


def default_bf16(spec: ModelSpec | None, cuda: bool) -> bool:
    """bf16 mixed precision unless the user chose: on a GPU, or on a native-bf16 CPU for a model that is
    not too narrow to gain from it (any width when ``spec`` is unknown)."""
    hidden = hidden_size(spec) if spec is not None else None
    return cuda or (cpu_has_bf16() and (hidden is None or hidden >= BF16_MIN_HIDDEN))


def cpu_has_bf16() -> bool:
    """True when the CPU computes bf16 natively (avx512_bf16 or AMX), where bf16 autocast pays."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapters of a run (``--lora``): rank, scale and dropout, as peft's ``LoraConfig`` takes."""

    r: int
    alpha: int
    dropout: float = 0.05


def lora_settings(opts: RunOptions) -> LoraSettings | None:
    """The adapters ``opts`` asks for, or ``None`` for full fine-tuning."""
    return LoraSettings(opts.lora_r, opts.lora_alpha) if opts.lora else None


@dataclass(frozen=True)
class Hyperparameters:
    """The settings a supervised run trains with: its preset, then every explicit option on top.

    ``None`` in ``max_minutes``, ``max_length``, ``save_steps`` and ``logging_steps`` means none given (no
    budget, no truncation, the trainer's defaults from the run length); ``max_steps`` is ``-1`` when the
    epochs decide. The fields are in the order ``run.json`` records them."""

    preset: str
    epochs: float
    batch_size: int
    grad_accum: int
    lr: float
    warmup_ratio: float
    warmup_steps: int
    weight_decay: float
    tokenizer: str
    max_steps: int
    max_minutes: float | None
    seed: int
    bf16: bool
    gradient_checkpointing: bool
    max_length: int | None
    cells: dict[str, Any] | None
    vision_tower: str | None  # None for a text-only model
    lora: LoraSettings | None
    save_steps: int | None
    logging_steps: int | None
    sampling: str
    packing: bool

    def to_json(self) -> dict[str, Any]:
        """The ``hparams`` record of ``run.json``: every field, in order, LoRA as a mapping."""
        return dataclasses.asdict(self)


def resolve_hparams(opts: TrainOptions, spec: ModelSpec, cuda: bool) -> Hyperparameters:
    """The effective hyper-parameters: the preset, then every explicit option on top.

    Raises:
        LakeshiftError: an unknown preset.
    """
    preset = opts.preset or ("scratch" if spec.small else "paper")
    if preset not in PRESETS:
        raise LakeshiftError(f"--preset {preset}: unknown (choose from {', '.join(PRESETS)})")
    chosen = {**PRESETS[preset]}
    for key in ("epochs", "batch_size", "grad_accum", "lr", "warmup_steps", "weight_decay"):
        value = getattr(opts, key)
        if value is not None:
            chosen[key] = value
    if opts.warmup_steps is not None:
        chosen["warmup_ratio"] = 0.0
    if opts.vision_tower is not None and not spec.vision:
        raise LakeshiftError(f"--vision-tower {opts.vision_tower}: --model {spec.name} has no vision tower")
    big = not spec.small
    return Hyperparameters(
        preset=preset,
        **chosen,
        tokenizer=opts.tokenizer if spec.kind == "named" else "checkpoint",
        max_steps=opts.max_steps or -1,
        max_minutes=opts.max_minutes,
        seed=opts.seed,
        bf16=opts.bf16 if opts.bf16 is not None else default_bf16(spec, cuda),
        # Checkpointing trades compute for memory: worth it for 7B on a GPU, a 2x slowdown for small models.
        gradient_checkpointing=(
            opts.gradient_checkpointing if opts.gradient_checkpointing is not None else (big and cuda)
        ),
        max_length=opts.max_length,
        cells=opts.cells,
        vision_tower=(opts.vision_tower or default_vision_tower(spec)) if spec.vision else None,
        lora=lora_settings(opts),
        save_steps=opts.save_steps,
        logging_steps=opts.logging_steps,
        # trl tokenizes image rows in the collator, after the sampler is built, so lengths are unknown there.
        sampling="random" if opts.input_format == "image" else "group_by_length",
        packing=False,
    )
