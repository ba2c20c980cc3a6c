"""Supervised fine-tuning with trl's ``SFTTrainer`` (loss on the assistant turn only), text or image input.

The flow of :func:`train`, top to bottom:

1. read the SFT file and resolve the model (cheap checks first: every bad input fails here);
2. pick the hyper-parameters (preset, then explicit overrides);
3. write ``run.json`` (data hash, formats, model, hyper-parameters, library versions, git commit);
4. build or load the model and its tokenizer/processor (named sizes: random Qwen2 + character tokenizer);
5. train with ``SFTTrainer`` (progress bar with loss and tokens/s, ``metrics.jsonl``, checkpoints, resume);
6. save the final model to ``OUT/model`` (LoRA adapters merged; the adapter itself in ``OUT/adapter``).

Presets and CPU defaults: :mod:`lakeshift.models.train_options`.

Prompt (``--prompt``, recorded in ``run.json`` and the default of ``lakeshift predict``): ``mirage`` trains on
the SFT file's user message (the paper's setup); ``map-only`` on the map alone (see
:mod:`lakeshift.models.data`), a fraction of the tokens (benchmarks/README.md, "Notes on the numbers").
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.models import cells
from lakeshift.models.data import SftSet, load_images, load_sft
from lakeshift.models.registry import (
    RUN_FILE,
    ModelSpec,
    build_named,
    cell_spec,
    check_modality,
    freeze_vision_tower,
    load_model,
    load_processing,
    resolve_model,
    tokenizer_of,
)
from lakeshift.models.run_folder import (
    TimeBudget,
    already_finished,
    check_resume,
    run_record,
    train_and_save,
    write_run,
)
from lakeshift.models.tokenizer import TOKENIZERS, build_tokenizer, message_texts
from lakeshift.models.train_options import (
    Hyperparameters,
    LoraSettings,
    TrainOptions,
    resolve_hparams,
)
from lakeshift.models.trl_patches import sft_trainer_class

__all__ = ["as_parts", "check_max_length", "lora_config", "sft_config", "sft_rows", "train"]


def as_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every content as a list of parts: Arrow cannot store string and list contents in one column."""
    return [
        {
            **m,
            "content": [{"type": "text", "text": m["content"]}]
            if isinstance(m["content"], str)
            else m["content"],
        }
        for m in messages
    ]


def sft_rows(sft: SftSet, cell_pixels: int | None = None) -> list[dict[str, Any]]:
    """The trainer's rows: the messages, and for image input the images as the model reads them
    (``cell_pixels``: :attr:`ModelSpec.cell_pixels`)."""
    if sft.input_format == "image":
        return [
            {
                "messages": as_parts(r["messages"]),
                "images": load_images(sft.split_dir, r, cell_pixels, sft.sizes.get(r["id"])),
            }
            for r in sft.records
        ]
    return [{"messages": r["messages"]} for r in sft.records]


def sft_config(out: Path, hp: Hyperparameters, n_records: int, cuda: bool) -> Any:
    from trl import SFTConfig

    steps_per_epoch = max(1, -(-n_records // (hp.batch_size * hp.grad_accum)))
    total = hp.max_steps if hp.max_steps > 0 else int(steps_per_epoch * hp.epochs)
    return SFTConfig(
        output_dir=str(out),
        num_train_epochs=hp.epochs,
        max_steps=hp.max_steps,
        per_device_train_batch_size=hp.batch_size,
        gradient_accumulation_steps=hp.grad_accum,
        learning_rate=hp.lr,
        # Under a time budget the planned total is not what will run: warm up over a fixed 50 steps.
        warmup_steps=hp.warmup_steps or (50 if hp.max_minutes else int(hp.warmup_ratio * total)),
        weight_decay=hp.weight_decay,
        optim="adamw_torch_fused" if cuda else "adamw_torch",
        # Under a time budget the trainer's schedule is replaced by TimeBudget.lr_factor (decay with time).
        lr_scheduler_type="linear",
        bf16=hp.bf16,
        activation_checkpointing=hp.gradient_checkpointing,
        seed=hp.seed,
        data_seed=hp.seed,
        assistant_only_loss=True,
        packing=False,
        max_length=hp.max_length,
        train_sampling_strategy=hp.sampling,
        logging_steps=hp.logging_steps or max(1, min(10, total // 20)),
        # About five checkpoints per run (the last two kept), whatever the epoch length.
        save_strategy="steps",
        save_steps=hp.save_steps or max(1, -(-total // 5)),
        save_total_limit=2,
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_cpu=not cuda,
    )


def train(opts: TrainOptions) -> Path:
    """Fine-tunes (or trains from scratch) a model on one input x CoT format; returns the final model folder.

    Raises:
        LakeshiftError: any bad input, before the model is loaded.
    """
    out = Path(opts.out)
    # 1. Cheap checks first.
    spec = resolve_model(opts.model)
    check_modality(spec, opts.input_format)
    if opts.tokenizer not in TOKENIZERS:
        raise LakeshiftError(f"--tokenizer {opts.tokenizer}: unknown (choose from {', '.join(TOKENIZERS)})")
    if opts.cells is not None:
        cell_spec(spec).changed(opts.cells, "--cells")  # a change the rule lacks: refused before loading
    sft = load_sft(
        opts.data,
        opts.split,
        opts.input_format,
        opts.cot_format,
        sizes=opts.sizes,
        limit=opts.limit,
        prompt=opts.prompt,
    )
    if (out / "model").exists() and not opts.resume:
        raise LakeshiftError(f"--out {out}: already holds a finished run (choose another folder)")
    if (out / RUN_FILE).is_file() and not opts.resume:
        raise LakeshiftError(f"--out {out}: holds an unfinished run; pass --resume to continue it")
    cells.check_sizes(spec.model_type, sft.selected_sizes(), str(sft.path))
    if opts.max_length is not None:
        check_max_length(opts.max_length, spec, sft, opts.tokenizer)

    import torch
    from accelerate import PartialState

    cuda = torch.cuda.is_available()
    # Under `accelerate launch` (or torchrun) this joins the process group: nccl on GPUs, gloo on CPUs
    # (cpu= as the trainer's use_cpu, so both see the same world).
    state = PartialState(cpu=not cuda)
    is_main, world = state.is_main_process, state.num_processes
    if is_main and world > 1 and not cuda and os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        # accelerate 1.15 turns FSDP on for GPU-type worlds only: on CPUs (gloo) the processes run DDP.
        print("lakeshift train: FSDP is not available on CPU processes; training with DDP", file=sys.stderr)
    # 2-3. Hyper-parameters and the run record.
    if opts.global_batch_size is not None and opts.batch_size is not None:
        raise LakeshiftError("--batch-size and --global-batch-size: give one of them, not both")
    hp = resolve_hparams(opts, spec, cuda)
    hp, distributed = _distribute(hp, opts.global_batch_size, world, str(state.distributed_type))
    record = run_record(opts, opts.prompt, spec, sft, hp.to_json())
    record["distributed"] = distributed
    if opts.resume:
        record = check_resume(out, record)
        if already_finished(out):
            return out / "model"
    # Every rank has checked the folder before rank 0 writes into it (else a late rank would see rank 0's
    # fresh run.json and refuse an "unfinished run").
    state.wait_for_everyone()
    out.mkdir(parents=True, exist_ok=True)
    if is_main:
        write_run(out, record)

    # 4. Model and tokenizer/processor. Seeded first: a from-scratch model's random weights are then the
    # same for a given --seed on any number of processes (so 1- and N-process runs can be compared).
    from transformers import set_seed

    set_seed(hp.seed)
    model, processing = _model_and_processing(spec, sft, out, opts.resume or not is_main, hp.tokenizer)
    if hp.cells is not None:
        cells.set_spec(model, cells.spec_of(model).changed(hp.cells, "--cells"))
    if spec.vision:
        frozen = hp.vision_tower == "frozen"
        record["model"]["frozen_vision_params"] = freeze_vision_tower(model) if frozen else 0
    peft_config = lora_config(hp.lora, spec.vision)
    record["model"]["n_params"] = sum(p.numel() for p in model.parameters())

    # 5. Train.
    from datasets import Dataset

    budget = TimeBudget(hp.max_minutes, world) if hp.max_minutes else None
    trainer = sft_trainer_class(budget)(
        model=model,
        args=sft_config(out, hp, len(sft.records), cuda),
        train_dataset=Dataset.from_list(sft_rows(sft, spec.cell_pixels)),
        processing_class=processing,
        peft_config=peft_config,
    )
    return train_and_save(
        trainer,
        out=out,
        record=record,
        lora=hp.lora,
        processing=processing,
        budget=budget,
        resume=opts.resume,
        is_main=is_main,
        state=state,
    )


def check_max_length(max_length: int, spec: ModelSpec, sft: SftSet, tokenizer_kind: str) -> None:
    """Refuses a ``--max-length`` that leaves the longest prompts no answer token: the trainer drops such
    conversations (all of them: an empty dataset and a traceback). Measured with the model's tokenizer
    on the prompts longest in characters; image prompts are not measured.

    Raises:
        LakeshiftError: naming the longest prompt's length in tokens.
    """
    from lakeshift.models.data import prompt_turns

    if sft.input_format == "image":
        return
    if spec.kind == "named":
        texts = [t for r in sft.records for t in message_texts(r["messages"])]
        tokenizer = build_tokenizer(tokenizer_kind, texts, vision=spec.vision)
    else:
        tokenizer = tokenizer_of(load_processing(spec))
    longest = sorted(sft.records, key=lambda r: sum(map(len, message_texts(prompt_turns(r)))), reverse=True)
    template = tokenizer.apply_chat_template
    prompt = max(
        len(template(prompt_turns(r), tokenize=True, add_generation_prompt=True)["input_ids"])
        for r in longest[:8]
    )
    if max_length <= prompt:
        raise LakeshiftError(
            f"--max-length {max_length}: the longest prompts of {sft.path} are {prompt} tokens before their "
            f"answer, which would be cut away entirely (nothing left to train on); give more than {prompt}"
        )


def lora_config(lora: LoraSettings | None, vision: bool) -> Any:
    """The peft LoRA config of ``lora`` (``None`` without LoRA), kept off a vision tower: the paper adapts
    the language model only."""
    if lora is None:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules="all-linear",
        exclude_modules=r".*visual.*" if vision else None,
        task_type="CAUSAL_LM",
    )


def _distribute(
    hp: Hyperparameters, global_batch: int | None, world: int, kind: str
) -> tuple[Hyperparameters, dict[str, Any]]:
    """``hp`` with the per-device batch set from ``--global-batch-size`` (when given), and ``run.json``'s
    ``distributed`` record: the optimizer sees per-device batch x gradient accumulation x processes maps.

    Raises:
        LakeshiftError: the global batch is not a multiple of processes x gradient accumulation.
    """
    if global_batch is not None:
        per_step = world * hp.grad_accum
        if global_batch % per_step:
            raise LakeshiftError(
                f"--global-batch-size {global_batch}: not divisible by {world} processes x "
                f"{hp.grad_accum} gradient accumulation steps"
            )
        hp = dataclasses.replace(hp, batch_size=global_batch // per_step)
    return hp, {
        "world_size": world,
        "distributed_type": kind.rsplit(".", 1)[-1],
        "per_device_batch_size": hp.batch_size,
        "grad_accum": hp.grad_accum,
        "global_batch_size": hp.batch_size * hp.grad_accum * world,
    }


def _model_and_processing(
    spec: ModelSpec, sft: SftSet, out: Path, resume: bool, tokenizer_kind: str
) -> tuple[Any, Any]:
    """Named sizes: a fresh random model and a tokenizer built from the data (also saved in
    ``OUT/tokenizer``); checkpoints: loaded from disk or the hub."""
    import torch

    cuda = torch.cuda.is_available()
    if spec.kind == "named":
        # The data hash is checked on --resume, so rebuilding from the same data gives the same vocabulary.
        texts = [t for r in sft.records for t in message_texts(r["messages"])]
        model, processing = build_named(spec.name, texts, tokenizer_kind)
        if not resume:
            processing.save_pretrained(str(out / "tokenizer"))
        return model, processing
    # Full fine-tuning keeps fp32 master weights on CPU; on GPU load bf16 as the paper's 7B runs do.
    dtype = torch.bfloat16 if cuda else torch.float32
    processing = load_processing(spec)
    return load_model(spec, dtype=dtype), processing
