"""Reinforcement learning after SFT with trl's ``GRPOTrainer``, the scorer as the reward.

``lakeshift train --method grpo --model RUN --data D --input grid --cot grid+desc
--reward success,format,progress`` continues a model that can already generate (a lakeshift run folder,
a checkpoint folder or a hub id; a named size such as ``tiny`` is a random model and is refused) with Group
Relative Policy Optimization: for every prompt of the training split's SFT file it samples
``--num-generations`` completions, scores each with :mod:`lakeshift.models.rewards` (lakeshift's own scorer:
success, format, progress, optimal, faithful, weighted), and pushes up the ones better than their group's
mean.

The flow of :func:`train_grpo`:

1. cheap checks (every bad input fails here, before any weights load): the initial model, its ``run.json``
   (formats and prompt: the prompt defaults to the one it was trained on), the rewards and weights, the
   batch arithmetic (completions per step divisible by ``--num-generations``);
2. the prompts: the SFT file's system and user turns (same prompt variants as SFT, :func:`load_sft`), each
   with its map as the dataset columns ``map`` (the ``maps.jsonl`` record, JSON) and ``map_id``, which trl
   passes to the reward functions;
3. ``run.json`` (the SFT record layout of :mod:`lakeshift.models.train`, plus ``method: grpo``, ``init``:
   the initial model and its own run record, ``rewards``: the weights, and every GRPO setting);
4. ``GRPOTrainer`` (LoRA through peft, accelerate for several processes, ``--max-minutes`` with the SFT
   time budget and its clock-annealed learning rate, checkpoints and ``--resume``);
5. the final model in ``OUT/model`` (LoRA merged), which ``lakeshift predict`` loads like an SFT run.

Logged per step (``metrics.jsonl`` and the progress bar): ``reward`` (the weighted sum),
``rewards/<name>/mean`` per component, ``success_rate`` (the scorer's successes among the sampled
completions, whatever the rewards), ``completions/mean_length`` (tokens) and trl's other statistics; and
one line per sampled completion in ``completions.jsonl`` (step, map id, verdict, each reward).

Defaults: 8 generations per prompt at temperature 1.0, one prompt group per optimizer step (batch =
``--num-generations`` completions), 1 epoch over the prompts, no KL term (``beta`` 0, trl's default),
learning rate 1e-4 for lakeshift's from-scratch named sizes (their SFT used 1e-3) and trl's 1e-6 for other
checkpoints, ``max_completion_length`` 1.25 x the longest reference completion in model tokens + 16 (as
``lakeshift predict``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.models import cells
from lakeshift.models.data import PROMPTS, SftSet, load_images, load_sft, prompt_turns, reference_completion
from lakeshift.models.registry import RUN_FILE, ModelSpec, check_modality, resolve_model, run_record
from lakeshift.models.rewards import parse_rewards, trl_reward_funcs
from lakeshift.models.train_options import (
    LoraSettings,
    RunOptions,
    default_bf16,
    default_vision_tower,
    lora_settings,
)
from lakeshift.options import option

METHODS = ("sft", "grpo")
#: Learning rates when ``--lr`` is not given: named-size runs were trained from scratch at 1e-3.
LR_NAMED = 1e-4
LR_CHECKPOINT = 1e-6
# The GRPOConfig fields recorded in run.json (with the defaults trl filled in).
GRPO_CONFIG_KEYS = (
    "num_generations", "generation_batch_size", "steps_per_generation", "max_completion_length",
    "temperature", "top_p", "top_k", "beta", "num_iterations", "epsilon", "epsilon_high", "loss_type",
    "scale_rewards", "multi_objective_aggregation", "reward_weights", "mask_truncated_completions",
    "learning_rate", "lr_scheduler_type", "warmup_steps", "weight_decay", "per_device_train_batch_size",
    "gradient_accumulation_steps", "num_train_epochs", "max_steps", "seed", "bf16",
    "activation_checkpointing", "shuffle_dataset",
)  # fmt: skip


@dataclass
class GrpoOptions(RunOptions):
    """Everything ``lakeshift train --method grpo`` accepts (``None``: a default described in the module)."""

    prompt: str | None = option(choices=PROMPTS, study=True)
    reward: str = option(
        "success,format,progress",
        help="rewards and weights: success,format,progress (weight 1 each; the default) or "
        "success=1,progress=0.5; names: success, format (a readable \\boxed{} list), progress (partial "
        "credit), optimal (success in the fewest moves), faithful (the trace's maps agree with the moves)",
        study=True,
    )
    num_generations: int = option(
        8, rule="generations", help="completions sampled per prompt (2 .. 65536, default 8)", study=True
    )
    max_completion_length: int | None = option(
        rule="tokens",
        help="tokens per completion (default: 1.25 x the longest reference completion + 16)",
        study=True,
    )
    temperature: float = option(
        1.0, rule="positive_float", help="sampling temperature (default 1.0)", study=True
    )
    top_p: float = option(1.0, rule="probability", help="nucleus sampling (default 1.0)", study=True)
    beta: float = option(
        0.0, rule="nonnegative_float", help="KL coefficient to the initial model (default 0)", study=True
    )


def check_init_model(model: str) -> ModelSpec:
    """Resolves ``--model`` for GRPO: it must already generate (a run folder, checkpoint or hub id).

    Raises:
        LakeshiftError: a named size (random weights), an unfinished run, or an unknown model.
    """
    spec = resolve_model(model)
    if spec.kind == "named":
        raise LakeshiftError(
            f"--method grpo --model {model}: a named size is a model with random weights, which cannot "
            "generate an answer to reward; pass a trained run folder (lakeshift train --out RUN) or a "
            "checkpoint"
        )
    return spec


def resolve_grpo(opts: GrpoOptions) -> tuple[GrpoOptions, ModelSpec, dict[str, Any], dict[str, float]]:
    """The cheap checks of step 1: returns the options with the prompt resolved, the model, its run record
    and the reward weights.

    Raises:
        LakeshiftError: any bad input (see :func:`check_init_model`,
            :func:`lakeshift.models.rewards.parse_rewards`).
    """
    weights = parse_rewards(opts.reward, cot=opts.cot_format)
    if opts.num_generations < 2:
        raise LakeshiftError(
            f"--num-generations {opts.num_generations}: GRPO compares completions of the same prompt, "
            "so it needs at least 2"
        )
    for flag, value in (("--temperature", opts.temperature), ("--top-p", opts.top_p)):
        if not value > 0:
            raise LakeshiftError(f"{flag} {value}: must be > 0 (GRPO samples its completions)")
    spec = check_init_model(opts.model)
    check_modality(spec, opts.input_format)
    init = run_record(opts.model)  # RUN/model and RUN/checkpoint-N are RUN's: its prompt and recipe
    for key, flag, given in (
        ("input_format", "--input", opts.input_format),
        ("cot_format", "--cot", opts.cot_format),
    ):
        if init.get(key) is not None and init[key] != given:
            raise LakeshiftError(
                f"{flag} {given}: the initial model {opts.model} was trained on {key} {init[key]!r} "
                "(GRPO continues the format the model writes)"
            )
    prompt = opts.prompt or init.get("prompt") or "mirage"
    batch = opts.batch_size or opts.num_generations
    per_step = batch * (opts.grad_accum or 1)
    if per_step % opts.num_generations:
        raise LakeshiftError(
            f"--batch-size {batch} x --grad-accum {opts.grad_accum or 1} = {per_step} completions per step: "
            f"not a multiple of --num-generations {opts.num_generations} (each prompt's group must be whole)"
        )
    return dataclasses.replace(opts, prompt=prompt), spec, init, weights


def prompt_rows(sft: SftSet, cell_pixels: int | None = None) -> list[dict[str, Any]]:
    """The GRPO dataset: ``prompt`` (system + user turns), ``map`` (the map record, JSON), ``map_id``, and
    ``images`` for image input, as the model reads them (``cell_pixels``: :attr:`ModelSpec.cell_pixels`).

    Raises:
        LakeshiftError: the split has no ``maps.jsonl`` or it lacks one of the records' ids.
    """
    from lakeshift.data.maps import load_maps
    from lakeshift.models.train import as_parts

    maps_file = sft.split_dir / "maps.jsonl"
    if not maps_file.is_file():
        raise LakeshiftError(
            f"--method grpo needs {maps_file} (the maps the reward simulates), which is missing"
        )
    by_id = {str(m["id"]): m for m in load_maps(maps_file)}
    rows = []
    for rec in sft.records:
        if rec["id"] not in by_id:
            raise LakeshiftError(f"{sft.path}: id {rec['id']!r} is not in {maps_file}")
        row: dict[str, Any] = {"map_id": rec["id"], "map": json.dumps(by_id[rec["id"]], ensure_ascii=False)}
        if sft.input_format == "image":
            row["prompt"] = as_parts(prompt_turns(rec))
            row["images"] = load_images(sft.split_dir, rec, cell_pixels, int(by_id[rec["id"]]["size"]))
        else:
            row["prompt"] = prompt_turns(rec)
        rows.append(row)
    return rows


def default_completion_length(sft: SftSet, tokenizer: Any) -> int:
    """1.25 x the longest reference completion of the SFT file in model tokens, + 16 (as predict)."""
    refs = sorted((c for c in (reference_completion(r) for r in sft.records) if c), key=len, reverse=True)
    if not refs:
        raise LakeshiftError(f"{sft.path}: no reference completions to size it; pass --max-completion-length")
    longest = max(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in refs[:8])
    return math.ceil(1.25 * longest) + 16


def check_memory(
    spec: ModelSpec, rows: list[dict[str, Any]], hp: GrpoHyperparameters, tokenizer: Any, cuda: bool
) -> None:
    """Refuses, before the model loads, a batch the machine cannot hold
    (:func:`lakeshift.models.resources.grpo_memory`
    on the longest prompt plus ``max_completion_length``); a model whose config lacks its shape is not
    checked.

    Raises:
        LakeshiftError: the estimate exceeds the free memory of the GPU (or of the machine on a CPU).
    """
    from lakeshift.data import bounds
    from lakeshift.models import resources

    shape = spec.config.get("text_config") or spec.config
    try:
        hidden, layers, vocab = (int(shape[k]) for k in ("hidden_size", "num_hidden_layers", "vocab_size"))
        heads = int(shape["num_attention_heads"])
        kv_width = int(shape.get("num_key_value_heads", heads)) * hidden // heads
        mlp = int(shape.get("intermediate_size", 4 * hidden))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return
    assert hp.max_completion_length is not None, "sized by train_grpo before the memory check"
    texts = ["".join(_text_of(m.get("content")) for m in row["prompt"]) for row in rows]
    longest = max(texts, key=len)
    # + 16: the chat template's role markers around each turn
    tokens = len(tokenizer(longest, add_special_tokens=False)["input_ids"]) + 16 + hp.max_completion_length
    need = resources.grpo_memory(
        completions=hp.batch_size,
        generated_at_once=hp.batch_size * hp.grad_accum,
        tokens=tokens,
        hidden=hidden,
        layers=layers,
        vocab=vocab,
        kv_width=kv_width,
        n_params=vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * mlp),
        value_bytes=2 if hp.bf16 else 4,
        checkpointing=hp.gradient_checkpointing,
    )
    if cuda:
        import torch

        available = float(torch.cuda.mem_get_info()[0])
    else:
        available = bounds.available_memory()
    batch = f"{hp.batch_size} sequences of up to {tokens} tokens"
    what = f"--num-generations {hp.num_generations} ({batch})"
    resources.check_grpo_memory(need, available, what)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def from_named_size(init: dict[str, Any]) -> bool:
    """Whether the initial run is one of lakeshift's from-scratch named sizes, or GRPO after one (a GRPO
    run.json records it in ``init.from_named_size``)."""
    if (init.get("model") or {}).get("kind") == "named":
        return True
    return bool((init.get("init") or {}).get("from_named_size"))


@dataclass(frozen=True)
class GrpoHyperparameters:
    """The settings a GRPO run trains with, in the order ``run.json`` records them.

    ``max_completion_length`` is ``None`` until it is sized from the data (:func:`default_completion_length`);
    ``rewards`` (the weights of :func:`lakeshift.models.rewards.parse_rewards`) is ``None`` until the rewards
    are resolved; ``max_steps`` is ``-1`` when the epochs decide."""

    num_generations: int
    max_completion_length: int | None
    temperature: float
    top_p: float
    beta: float
    epochs: float
    max_steps: int
    max_minutes: float | None
    batch_size: int
    grad_accum: int
    prompts_per_step: int
    lr: float
    warmup_steps: int
    weight_decay: float
    seed: int
    bf16: bool
    gradient_checkpointing: bool
    lora: LoraSettings | None
    save_steps: int
    logging_steps: int
    rewards: dict[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``hparams`` record of ``run.json``: ``method: grpo``, then every field in order."""
        return {"method": "grpo", **dataclasses.asdict(self)}


def resolve_grpo_hparams(
    opts: GrpoOptions,
    init: dict[str, Any],
    n_prompts: int,
    world: int,
    cuda: bool,
    spec: ModelSpec | None = None,
) -> GrpoHyperparameters:
    """Every setting of the run (recorded in ``run.json``; checked on ``--resume``); ``spec`` (the initial
    model) decides the bf16 default by its width, and whether it is one of lakeshift's small models (a
    named size, a shipped base, or a run of one: :attr:`ModelSpec.small`), which sets the learning rate."""
    named = spec.small if spec is not None else from_named_size(init)
    batch = opts.batch_size or opts.num_generations
    grad_accum = opts.grad_accum or 1
    epochs = opts.epochs if opts.epochs is not None else 1.0
    per_step = batch * grad_accum * world
    total = opts.max_steps or max(1, math.ceil(n_prompts * opts.num_generations * epochs / per_step))
    return GrpoHyperparameters(
        num_generations=opts.num_generations,
        max_completion_length=opts.max_completion_length,
        temperature=opts.temperature,
        top_p=opts.top_p,
        beta=opts.beta,
        epochs=epochs,
        max_steps=opts.max_steps or -1,
        max_minutes=opts.max_minutes,
        batch_size=batch,
        grad_accum=grad_accum,
        prompts_per_step=per_step // opts.num_generations,
        lr=opts.lr if opts.lr is not None else (LR_NAMED if named else LR_CHECKPOINT),
        warmup_steps=opts.warmup_steps or 0,
        weight_decay=opts.weight_decay if opts.weight_decay is not None else 0.0,
        seed=opts.seed,
        bf16=opts.bf16 if opts.bf16 is not None else default_bf16(spec, cuda),
        gradient_checkpointing=bool(opts.gradient_checkpointing),
        lora=lora_settings(opts),
        save_steps=opts.save_steps or max(1, -(-total // 5)),
        logging_steps=opts.logging_steps or 1,
    )


def _grpo_config(out: Path, hp: GrpoHyperparameters, weights: dict[str, float], cuda: bool) -> Any:
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out),
        num_generations=hp.num_generations,
        max_completion_length=hp.max_completion_length,
        temperature=hp.temperature,
        top_p=hp.top_p,
        beta=hp.beta,
        reward_weights=list(weights.values()),
        num_train_epochs=hp.epochs,
        max_steps=hp.max_steps,
        per_device_train_batch_size=hp.batch_size,
        gradient_accumulation_steps=hp.grad_accum,
        learning_rate=hp.lr,
        warmup_steps=hp.warmup_steps,
        weight_decay=hp.weight_decay,
        lr_scheduler_type="linear",
        optim="adamw_torch_fused" if cuda else "adamw_torch",
        bf16=hp.bf16,
        activation_checkpointing=hp.gradient_checkpointing,
        seed=hp.seed,
        data_seed=hp.seed,
        logging_steps=hp.logging_steps,
        save_strategy="steps",
        save_steps=hp.save_steps,
        save_total_limit=2,
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_cpu=not cuda,
        log_completions=False,
        remove_unused_columns=False,
    )


def train_grpo(opts: GrpoOptions) -> Path:
    """Runs GRPO from an initial model; returns the final model folder (``OUT/model``).

    Raises:
        LakeshiftError: any bad input, before the model is loaded.
    """
    from lakeshift.models.run_folder import (
        TimeBudget,
        already_finished,
        check_resume,
        run_record,
        train_and_save,
        write_run,
    )
    from lakeshift.models.train import lora_config
    from lakeshift.models.trl_patches import budget_trainer_class, exact_output_head

    out = Path(opts.out)
    # 1. Cheap checks.
    opts, spec, init, weights = resolve_grpo(opts)
    assert opts.prompt is not None
    sft = load_sft(
        opts.data,
        opts.split,
        opts.input_format,
        opts.cot_format,
        sizes=opts.sizes,
        limit=opts.limit,
        prompt=opts.prompt,
    )
    cells.check_sizes(spec.model_type, sft.selected_sizes(), str(sft.path))
    rows = prompt_rows(sft)
    if (out / "model").exists() and not opts.resume:
        raise LakeshiftError(f"--out {out}: already holds a finished run (choose another folder)")
    if (out / RUN_FILE).is_file() and not opts.resume:
        raise LakeshiftError(f"--out {out}: holds an unfinished run; pass --resume to continue it")
    if Path(opts.model).resolve() == out.resolve():
        raise LakeshiftError(f"--out {out}: is the initial model's folder; choose another one")

    import torch
    from accelerate import PartialState

    from lakeshift.models.registry import freeze_vision_tower, load_model, load_processing, tokenizer_of

    cuda = torch.cuda.is_available()
    state = PartialState()
    is_main, world = state.is_main_process, state.num_processes
    processing = load_processing(spec)
    hp = resolve_grpo_hparams(opts, init, len(rows), world, cuda, spec)
    if hp.max_completion_length is None:
        hp = dataclasses.replace(
            hp, max_completion_length=default_completion_length(sft, tokenizer_of(processing))
        )
    check_memory(spec, rows, hp, tokenizer_of(processing), cuda)
    hp = dataclasses.replace(hp, rewards=weights)
    distributed = {
        "world_size": world,
        "distributed_type": str(state.distributed_type).rsplit(".", 1)[-1],
        "per_device_batch_size": hp.batch_size,
        "grad_accum": hp.grad_accum,
        "global_batch_size": hp.batch_size * hp.grad_accum * world,
    }
    record = run_record(opts, opts.prompt, spec, sft, hp.to_json())
    record.update(
        method="grpo",
        rewards=weights,
        distributed=distributed,
        init={
            "model": opts.model,
            "from_named_size": spec.small or from_named_size(init),
            "path": str(Path(spec.source).resolve()) if spec.kind == "path" and spec.source else spec.source,
            "run": {
                k: init[k]
                for k in ("kind", "method", "model", "data", "prompt", "hparams", "git")
                if k in init
            },
        },
    )
    if opts.resume:
        record = check_resume(out, record)
        if already_finished(out):
            return out / "model"
    state.wait_for_everyone()
    out.mkdir(parents=True, exist_ok=True)
    if is_main:
        write_run(out, record)

    # 2. Model (the prompts were built above).
    dtype = torch.bfloat16 if cuda else torch.float32
    model = load_model(spec, dtype=dtype)
    if spec.vision:
        frozen = default_vision_tower(spec) == "frozen"
        record["model"]["frozen_vision_params"] = freeze_vision_tower(model) if frozen else 0
    peft_config = lora_config(hp.lora, spec.vision)
    record["model"]["n_params"] = sum(p.numel() for p in model.parameters())

    # 3. Train.
    from datasets import Dataset
    from trl import GRPOTrainer

    budget = TimeBudget(hp.max_minutes, world) if hp.max_minutes else None
    trainer_cls = GRPOTrainer if budget is None else budget_trainer_class(GRPOTrainer, budget)
    completions_log = out / (
        "completions.jsonl" if is_main else f"completions-rank{state.process_index}.jsonl"
    )
    args = _grpo_config(out, hp, weights, cuda)
    trainer = trainer_cls(
        model=model,
        reward_funcs=trl_reward_funcs(weights, opts.cot_format, log_path=completions_log),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=processing,
        peft_config=peft_config,
    )
    for scored in (trainer.model, getattr(trainer, "ref_model", None)):
        if scored is not None:
            exact_output_head(scored, args.temperature)
    record["grpo_config"] = {k: getattr(args, k) for k in GRPO_CONFIG_KEYS if hasattr(args, k)}
    trainer.add_callback(_completions_callback(completions_log))
    shown = {"reward": "reward", "success_rate": "success", "completions/mean_length": "len"}
    final = train_and_save(
        trainer,
        out=out,
        record=record,
        lora=hp.lora,
        processing=processing,
        budget=budget,
        resume=opts.resume,
        is_main=is_main,
        state=state,
        postfix=shown,
    )
    print(f"lakeshift train: GRPO log of every sampled completion in {completions_log}", file=sys.stderr)
    return final


def _completions_callback(log: Path) -> Any:
    """Keeps ``completions.jsonl`` free of repeats: a resumed run samples again every step after its
    checkpoint, so the rows logged there before the kill are dropped when training (re)starts."""
    from transformers import TrainerCallback

    class ResumedCompletions(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            truncate_completions(log, state.global_step)

    return ResumedCompletions()


def truncate_completions(log: Path, step: int) -> None:
    """Keeps the rows of a completions log sampled before optimizer step ``step`` (a row's ``step`` is the
    number of steps done when its completion was sampled), and drops lines torn by a kill."""
    from lakeshift.io import atomic_write

    if not log.is_file():
        return
    keep = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            row_step = int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
        if row_step < step:
            keep.append(line + "\n")
    with atomic_write(log) as f:
        f.write("".join(keep))
