"""``lakeshift train`` and ``lakeshift predict``. Heavy imports stay in the handlers."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakeshift.config import number_type
from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS
from lakeshift.models.data import PROMPTS  # light: no torch
from lakeshift.models.grpo import GrpoOptions  # light: no torch
from lakeshift.models.predict import PredictOptions  # light: no torch
from lakeshift.models.train_options import TrainOptions
from lakeshift.options import add_arguments, from_values, options_of
from lakeshift.traces import COT_FORMATS


def register(subparsers: Any) -> None:
    """Adds ``train``, ``pretrain`` and ``predict``."""
    _register_train(subparsers)
    _register_pretrain(subparsers)
    _register_predict(subparsers)


def _register_pretrain(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pretrain",
        help="pretrain a base model on map reading and random walks (never a plan), to fine-tune per format",
        description=(
            "Generates the corpus of CONFIG (maps of its own seed, each in a random text format with a "
            "random-walk or path-reading question; see lakeshift.models.pretrain) into OUT/corpus/ and "
            "trains a named size on it into OUT (a training run folder: fine-tune it with lakeshift train "
            "--model OUT). configs/pretrain/base-mini-cells.yaml rebuilds the shipped mini-cells-base."
        ),
    )
    p.add_argument("config", help="pretraining YAML (e.g. configs/pretrain/base-mini.yaml)")
    p.add_argument("--out", required=True, help="run folder")
    p.add_argument(
        "--max-minutes", type=number_type("positive_float"), help="override the config's train.max_minutes"
    )
    p.add_argument("--resume", action="store_true", help="continue OUT from its last checkpoint")
    p.set_defaults(handler=_pretrain)


def _pretrain(args: argparse.Namespace) -> int:
    from lakeshift.io import check_output, dumps, output_lock, read_json
    from lakeshift.models.pretrain import (
        CORPUS_COT,
        CORPUS_SPLIT,
        corpus_input,
        excluded_maps,
        load_pretrain_config,
        write_corpus,
    )
    from lakeshift.models.registry import (
        BASE_MODELS,
        CELL_SIZES,
        NAMED_SIZES,
        VISION_SIZES,
        check_modality,
        is_run_folder,
        resolve_model,
    )

    config = load_pretrain_config(args.config)
    sizes = (*NAMED_SIZES, *CELL_SIZES, *VISION_SIZES, *BASE_MODELS)
    if config.train["model"] not in sizes:
        raise LakeshiftError(
            f"{args.config}: train.model {config.train['model']!r}: a base model is a named size or a "
            f"shipped base to continue ({', '.join(sizes)})"
        )
    input_format = corpus_input(config.inputs)
    try:
        check_modality(resolve_model(config.train["model"]), input_format)
    except LakeshiftError as err:
        raise LakeshiftError(f"{args.config}: corpus.inputs [image]: {err}") from None
    out = Path(args.out)
    from lakeshift.data import bounds

    # The corpus is generated maps: the size bound of `generate`, before any is drawn. Its examples are a
    # map in a text format and a short walk, no larger than a desc x none record, or a walk's trace, no
    # larger than a grid x grid+desc one.
    groups = [(g.size, g.count) for g in config.spec.groups]
    largest = ("grid", "grid+desc") if "trace" in config.tasks else ("desc", "none")
    images = input_format == "image"  # its PNGs besides
    inputs = [largest[0], "image"] if images else [largest[0]]
    estimate = bounds.estimate(groups, inputs, [largest[1]], images=images, workers=1)
    bounds.check(estimate, out, max_memory_gb=None, max_hours=24.0, where=f"{args.config}: corpus.maps")
    # A pretraining run writes its corpus before its run.json.
    check_output(
        out,
        inputs=(Path(args.config),),
        kind="dir",
        previous=lambda d: is_run_folder(d) or (d / "corpus" / CORPUS_SPLIT).is_dir(),
        what="run folder",
    )
    data = out / "corpus"
    key_file = data / "corpus.json"
    key = config.corpus_key()
    with output_lock(out, "lakeshift pretrain"):
        have = read_json(key_file) if key_file.is_file() else None
        if have is not None and have != key:
            raise LakeshiftError(
                f"{key_file}: the corpus in {out} was made from another config (choose another --out)"
            )
        if have is None:
            n = config.spec.count or 0
            print(f"lakeshift pretrain: writing a corpus of {n} maps to {data}", file=sys.stderr)
            from tqdm.auto import tqdm

            with tqdm(total=n, unit="map", desc="corpus", file=sys.stderr, dynamic_ncols=True) as bar:
                counts = write_corpus(
                    data,
                    config.spec,
                    config.seed,
                    tasks=config.tasks,
                    traces=config.traces,
                    walks_end_at_goal=config.walks_end_at_goal,
                    trace_max_size=config.trace_max_size,
                    inputs=config.inputs,
                    excluded=excluded_maps(config.exclude)[0],
                    progress=bar.update,
                )
            if config.exclude:
                print(
                    f"lakeshift pretrain: no example shows a map of {', '.join(config.exclude)} "
                    f"({counts['redrawn']} drawn maps redrawn, {counts['dropped']} examples left out)",
                    file=sys.stderr,
                )
            (data / "counts.json").write_text(dumps(counts) + "\n", encoding="utf-8")
            key_file.write_text(dumps(key) + "\n", encoding="utf-8")
        values = {
            **config.train,
            "data": str(data),
            "split": CORPUS_SPLIT,
            "input_format": input_format,
            "cot_format": CORPUS_COT,
            "out": str(out),
            "resume": args.resume,
        }
        if args.max_minutes is not None:
            values["max_minutes"] = args.max_minutes
        from lakeshift.models.train import train

        final = train(from_values(TrainOptions, values))
    print(f"lakeshift pretrain: base model saved to {final}", file=sys.stderr)
    return 0


def _register_train(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "train",
        help="fine-tune (or train from scratch) a model on one input x CoT format with trl's SFTTrainer",
        description=(
            "Supervised fine-tuning on DATA/<split>/sft/<input>__<cot>.jsonl, loss on the assistant answer "
            "only. "
            "Writes OUT/run.json (data hash, formats, model, hyper-parameters, versions, git commit), "
            "OUT/metrics.jsonl, OUT/checkpoint-*/ and the final OUT/model/. Multi-GPU: "
            "accelerate launch --config_file "
            "configs/accelerate/<ddp|fsdp|deepspeed-zero2|deepspeed-zero3>.yaml "
            "-m lakeshift.cli train ..."
        ),
    )
    add_arguments(p, TrainOptions, defaults=dict.fromkeys(("prompt", *SFT_ONLY)))
    _register_grpo_options(p)
    p.set_defaults(handler=_train)


# Options of --method grpo only (argparse default None, so a stray one under --method sft is refused), and
# the SFT options that GRPO does not take (the same, the other way round).
GRPO_ONLY = tuple(n for n in options_of(GrpoOptions) if n not in options_of(TrainOptions))
SFT_ONLY = tuple(n for n in options_of(TrainOptions) if n not in options_of(GrpoOptions))


def _register_grpo_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "reinforcement learning (--method grpo)",
        "GRPO after SFT with trl's GRPOTrainer; --model must already generate (a run folder or checkpoint); "
        "the rewards are lakeshift's scorer (lakeshift.models.rewards); --batch-size counts completions per "
        "device (default: --num-generations, one prompt per step); --epochs passes over the prompts "
        "(default 1); --lr default 1e-4 for runs of the named sizes, 1e-6 otherwise",
    )
    g.add_argument(
        "--method",
        choices=("sft", "grpo"),
        default="sft",
        help="sft (default): supervised fine-tuning; grpo: reinforcement learning from --model",
    )
    add_arguments(g, GrpoOptions, GRPO_ONLY, defaults=dict.fromkeys(GRPO_ONLY))


def _train(args: argparse.Namespace) -> int:
    from lakeshift.io import check_output, output_lock
    from lakeshift.models.registry import is_run_folder
    from lakeshift.models.train import train

    values = vars(args)
    if args.method == "grpo":
        from lakeshift.models.grpo import resolve_grpo, train_grpo

        for key in SFT_ONLY:
            if values.get(key) is not None:
                raise LakeshiftError(
                    f"--{key.replace('_', '-')} is an SFT option; --method grpo does not take it"
                )
        options: Any = from_values(GrpoOptions, values)
        resolve_grpo(options)  # every bad input fails here, before the output folder is touched
        run_training: Callable[[Any], Path] = train_grpo
    else:
        for key in GRPO_ONLY:
            if values.get(key) is not None:
                raise LakeshiftError(
                    f"--{key.replace('_', '-')} is a --method grpo option (this is --method sft)"
                )
        options = from_values(TrainOptions, values)
        run_training = train
    data = Path(args.data)
    split_dir = data / args.split
    check_output(
        args.out,
        inputs=(
            data,
            split_dir,
            split_dir / "sft" / f"{args.input_format}__{args.cot_format}.jsonl",
            split_dir / "maps.jsonl",
            Path(args.model) if Path(args.model).exists() else None,  # a named size is no folder here
        ),
        kind="dir",
        previous=is_run_folder,
        what="run folder (with run.json)",
    )
    run_json = Path(args.out) / "run.json"
    if run_json.is_file():  # read before resuming: a torn or foreign run.json is one line, not a traceback
        from lakeshift.io import read_json

        record = read_json(run_json)
        if not isinstance(record, dict) or not isinstance(record.get("data"), dict):
            raise LakeshiftError(f"{run_json}: not a lakeshift run record (an object with 'data')")
    # One trainer per run folder; under `accelerate launch` the ranks of one run are that trainer, and rank 0
    # (the only one that writes there) holds the lock for them all.
    rank = int(os.environ.get("RANK", "0") or 0)
    with output_lock(args.out, "lakeshift train") if rank == 0 else contextlib.nullcontext():
        final = run_training(options)
    if rank == 0:
        print(f"lakeshift train: model saved to {final}", file=sys.stderr)
    return 0


def _register_predict(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "predict",
        help="generate predictions for a split (hf, vllm or any OpenAI-compatible API); resumable",
        description=(
            "Answers the prompts (system + user turns) of DATA/<split>/sft/<input>__<cot>.jsonl and appends "
            "one "
            "JSON line per map to OUT (id, output, n_output_tokens, model, input_format, cot_format, split, "
            "decoding). Rerunning skips ids already in OUT. Greedy decoding unless --temperature > 0 or "
            "--decoding names a sampling preset."
        ),
    )
    add_arguments(p, PredictOptions)
    p.set_defaults(handler=_predict)


def _run_record(model: str) -> dict[str, Any]:
    """The ``run.json`` of the lakeshift run ``model`` belongs to (``RUN``, ``RUN/model``,
    ``RUN/checkpoint-N``; empty for anything else), its formats and prompt checked."""
    from lakeshift.models.registry import RUN_FILE, run_folder, run_record

    record = run_record(model)
    for key, allowed in (("input_format", INPUT_FORMATS), ("cot_format", COT_FORMATS), ("prompt", PROMPTS)):
        if record.get(key) is not None and record[key] not in allowed:
            run = run_folder(Path(model)) or Path(model)
            raise LakeshiftError(
                f"{run / RUN_FILE}: field {key!r} is {record[key]!r} (expected one of {', '.join(allowed)})"
            )
    return record


def _predict(args: argparse.Namespace) -> int:
    from lakeshift.models.predict import check_decoding, make_backend, predict

    shard = None
    if args.shard is not None:
        from lakeshift.scoring.shards import parse_shard, shard_path

        shard = parse_shard(args.shard)
        args.out = str(shard_path(args.out, *shard))  # each shard its own file (and its own lock)
    run = _run_record(args.model)
    input_format = args.input_format or run.get("input_format")
    cot_format = args.cot_format or run.get("cot_format") or "none"
    # Runs written before --prompt existed trained on the Mirage prompt.
    prompt = args.prompt or run.get("prompt") or "mirage"
    if input_format is None:
        raise LakeshiftError("--input is required (the model is not a lakeshift run folder with a run.json)")
    if args.decoding is not None:
        options = {"--temperature": args.temperature, "--top-p": args.top_p, "--seed": args.seed}
        given = [option for option, value in options.items() if value is not None]
        if given:
            raise LakeshiftError(
                f"--decoding {args.decoding} sets the sampling settings itself; drop {', '.join(given)}"
            )
    temperature = 0.0 if args.temperature is None else args.temperature
    if temperature < 0:
        raise LakeshiftError(f"--temperature {temperature}: must be >= 0")
    check_decoding(temperature, args.top_p, args.decoding, args.samples)  # before the model loads
    for option, value in (("--limit", args.limit), ("--per-size", args.per_size)):
        if value is not None and value < 1:
            raise LakeshiftError(f"{option} {value}: must be >= 1")
    kwargs: dict[str, Any] = {"batch_size": args.batch_size, "engine": args.engine}
    if args.backend == "openai":
        kwargs = {
            "base_url": args.base_url,
            "api_key_env": args.api_key_env,
            "concurrency": args.concurrency,
            "max_retries": args.max_retries,
            "timeout": args.timeout,
        }
    from lakeshift.io import check_output, jsonl_has_fields, output_lock

    split_dir = Path(args.data) / args.split
    check_output(
        args.out,
        inputs=(
            split_dir / "sft" / f"{input_format}__{cot_format}.jsonl",
            split_dir / "maps.jsonl",
            split_dir / "split.json",
            Path(args.model) / "run.json",
        ),
        previous=jsonl_has_fields("id", "output"),
        what="predictions file",
    )
    # One writer per predictions file: a second run would answer every id again into the same file.
    with output_lock(args.out, "lakeshift predict"):
        backend = make_backend(args.backend, args.model, **kwargs)
        stats = predict(
            backend,
            args.data,
            args.split,
            input_format,
            cot_format,
            args.out,
            sizes=args.sizes,
            per_size=args.per_size,
            limit=args.limit,
            prompt=prompt,
            max_new_tokens=args.max_new_tokens,
            temperature=temperature,
            top_p=args.top_p,
            seed=0 if args.seed is None else args.seed,
            decoding=args.decoding,
            samples=args.samples,
            name=args.name,
            shard=shard,
        )
    print(
        f"lakeshift predict: {stats['written']} new, {stats['done_before']} already done, "
        f"{stats['total']} maps -> {args.out}",
        file=sys.stderr,
    )
    return 0
