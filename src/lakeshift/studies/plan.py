"""Planning a study: its config, once checked (:mod:`~lakeshift.studies.validate`), turned into stages
(:mod:`~lakeshift.studies.stages`): one ``generate``, one ``train`` per fine-tuned model, one ``predict``
per model and split, one ``report``; each stage's command line is written from the options it runs
(:func:`lakeshift.options.to_argv`) and parsed as its command would parse it before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift.config import SourcedConfig
from lakeshift.data.options import GenerateOptions
from lakeshift.models.grpo import GrpoOptions
from lakeshift.models.predict import PredictOptions
from lakeshift.models.train_options import TrainOptions
from lakeshift.options import to_argv
from lakeshift.report.options import ReportOptions
from lakeshift.studies import estimates
from lakeshift.studies.schema import DataSection
from lakeshift.studies.stages import Stage, Study, new_plan, stage_key
from lakeshift.studies.validate import (
    bases_of,
    check_argv,
    check_decoding,
    check_defaults,
    check_entry,
    check_formats,
    check_predict,
    check_sft_model,
    check_top_level,
    data_specs,
    id_source_missing,
    init_of,
    model_name,
    read_study_config,
    train_config,
)


def plan_study(cfg: SourcedConfig, workdir_override: str | Path | None = None) -> Study:
    """Validates a study config and turns it into stages; nothing is run.

    Raises:
        LakeshiftError: an unknown key, format, split or model, or stages that cannot be satisfied; the
            message names the key and its line in the file.
    """
    new_plan()  # its keys name the source as it is now (a process may plan more than once)
    data = check_top_level(cfg)
    name = data["name"]
    workdir = Path(workdir_override or data.get("workdir") or Path("runs") / name)
    plan = _plan_data(cfg, data["data"] or {}, workdir)
    check_defaults(cfg, data, workdir)
    stages = [plan.stage]
    train_defaults = data.get("train") or {}
    predict_defaults = dict(data.get("predict") or {})
    seen_names: set[str] = set()
    trained: dict[str, dict[str, Any]] = {}  # trained model name -> key, run folder, formats (for `init`)
    predict_stages: list[Stage] = []
    for i, entry in enumerate(data["models"]):
        model_stages = _plan_model(
            cfg, i, entry, plan, workdir, train_defaults, predict_defaults, seen_names, trained
        )
        stages += model_stages  # predictions right after their model: an interrupted study has whole models
        predict_stages += [st for st in model_stages if st.kind == "predict"]
    stages.append(_plan_report(data.get("report") or {}, predict_stages, plan, workdir))
    check_argv(cfg, stages[-1], "report")
    for stage in stages:
        stage.study, stage.bases = name, bases_of(cfg)
    return Study(name, workdir, stages, data.get("budget_minutes"), data.get("train_jobs", 1), bases_of(cfg))


@dataclass
class _DataPlan:
    """The data stage of a study and what the model stages need to know about it."""

    stage: Stage
    dcfg: dict[str, Any]
    data_dir: Path
    split_names: list[str]
    gen_key: str
    groups: dict[str, list[tuple[int, int]]]  # (size, count) of each split's map groups


def _plan_data(cfg: SourcedConfig, dcfg: dict[str, Any], workdir: Path) -> _DataPlan:
    """The ``generate`` stage of the ``data:`` section ``dcfg``."""
    specs = data_specs(cfg, dcfg)
    data_dir = workdir / "data"
    if "suite" in dcfg:
        from lakeshift.data.catalog import SUITES
        from lakeshift.io import file_sha256

        suite_arg = dcfg["suite"]
        # a suite file enters the key by its content, so editing it regenerates the data
        suite_content: Any = suite_arg if suite_arg in SUITES else {"file_sha256": file_sha256(suite_arg)}
    else:
        suite_arg = str(workdir / "suite-spec.json")
        suite_content = {"splits": dcfg["splits"]}
    gen_options = {k: v for k, v in dcfg.items() if k not in ("suite", "splits", "id_source_missing")}
    if id_source_missing(cfg, dcfg):
        del gen_options["id_source"]
    gen_key = stage_key({"suite": suite_content, **gen_options})
    options = {
        "suite": suite_arg,
        "out": data_dir,
        "force": True,
        "seed": 0,
        **gen_options,
        "images": bool(gen_options.get("images", DataSection.images)),
    }
    argv = ["generate", *to_argv(options, GenerateOptions)]
    spec_file = {} if "suite" in dcfg else {Path(suite_arg): suite_content}
    marker = workdir / "stages" / "generate.json"
    stage = Stage(
        "generate", "data", gen_key, argv, marker, files=spec_file, writes=[data_dir], tracked=data_dir
    )
    check_argv(cfg, stage, "data")
    groups: dict[str, list[tuple[int, int]]] = {}
    for spec in specs:  # an embedded split has as many maps as its source
        source = sum(c for _, c in groups.get(spec.embed_source, [])) if spec.embed_source else 0
        groups[spec.name] = (
            [(spec.embed_size, source)] if spec.embed_source else [(g.size, g.count) for g in spec.groups]
        )
    return _DataPlan(stage, dcfg, data_dir, [s.name for s in specs], gen_key, groups)


def _plan_model(
    cfg: SourcedConfig,
    i: int,
    entry: Any,
    plan: _DataPlan,
    workdir: Path,
    train_defaults: dict[str, Any],
    predict_defaults: dict[str, Any],
    seen_names: set[str],
    trained: dict[str, dict[str, Any]],
) -> list[Stage]:
    """The training stage (none for zero-shot models) and prediction stages of ``models[i]``."""
    where = f"models[{i}]"
    entry = check_entry(cfg, entry, where)
    init = init_of(cfg, entry, where, trained)
    predict_only = entry.get("method") == "predict"
    if init is not None:  # a GRPO or predict entry continues its init's formats
        entry = {"input": init["input"], "cot": init["cot"], **entry}
    check_formats(cfg, entry, where, plan.dcfg)
    zero_shot = bool(entry.get("zero_shot", False))
    mname = model_name(cfg, entry, where, seen_names, init)
    tcfg = {} if predict_only else train_config(cfg, entry, where, init, train_defaults)
    if not zero_shot and not predict_only and tcfg.get("split", "id-train") not in plan.split_names:
        raise cfg.error(
            f"{where}.train.split",
            f"training split {tcfg.get('split', 'id-train')!r} is not in the data (has {plan.split_names})",
        )
    pcfg = {**predict_defaults, **(entry.get("predict") or {})}
    check_predict(cfg, entry.get("predict") or {}, f"{where}.predict")
    for key in ("backend", "base_url"):
        if entry.get(key):
            pcfg[key] = entry[key]
    backend = pcfg.get("backend", "hf")
    if backend not in ("hf", "vllm", "openai"):
        raise cfg.error(f"{where}.backend", f"unknown backend {backend!r} (known: hf, vllm, openai)")
    check_decoding(cfg, pcfg, entry, where)

    if zero_shot:
        if not entry.get("model"):
            raise cfg.error(where, "a zero-shot model needs 'model' (a checkpoint or API model name)")
        model_ref, model_key = entry["model"], stage_key({"zero_shot": entry["model"], "backend": backend})
        stages: list[Stage] = []
    elif predict_only and init is not None:  # its predictions are redone when the init is retrained
        model_ref, model_key, stages = str(init["run_dir"]), init["key"], []
    else:
        if init is None:
            check_sft_model(cfg, entry, where, tcfg, plan.groups, pcfg.get("splits") or ["id-test"])
        stage = _train_stage(entry, mname, tcfg, init, plan, workdir)
        model_ref, model_key, stages = str(stage.outputs[0]), stage.key, [stage]
        trained[mname] = {
            "key": model_key,
            "run_dir": stage.outputs[0],
            "input": entry["input"],
            "cot": entry["cot"],
            "marker": stage.marker,
        }
    # what its predictions read: the data, and the model trained here or by its init
    reads = [plan.stage.marker, *(st.marker for st in stages)]
    if predict_only and init is not None:
        reads.append(init["marker"])
    stages += _predict_stages(cfg, where, entry, mname, model_ref, model_key, pcfg, plan, workdir)
    for stage in stages:
        if stage.kind == "predict":
            stage.after = reads
    for stage in stages:
        check_argv(cfg, stage, where)
    return stages


def _train_stage(
    entry: Mapping[str, Any],
    mname: str,
    tcfg: dict[str, Any],
    init: dict[str, Any] | None,
    plan: _DataPlan,
    workdir: Path,
) -> Stage:
    """The SFT stage of a model entry, or its GRPO stage when it continues another entry (``init``)."""
    run_dir = workdir / "models" / mname
    record = workdir / "stages" / f"train-{mname}.json"
    given = {"data": str(plan.data_dir), "input_format": entry["input"], "cot_format": entry["cot"]}
    if init is not None:
        # The init's key is part of this key: retraining the SFT model redoes its GRPO stage.
        key = stage_key({"grpo": init["key"], "data": plan.gen_key, **tcfg})
        options = {**given, "model": str(init["run_dir"]), "out": str(run_dir), **tcfg}
        argv = ["train", "--method", "grpo", *to_argv(options, GrpoOptions)]
        stage = Stage("train", mname, key, argv, record, [run_dir], after=[plan.stage.marker, init["marker"]])
        # GRPO's rate is not measured: only its time budget counts
        stage.estimate_s = estimates.train_seconds(
            [], entry["input"], entry["cot"], "", epochs=None, max_minutes=tcfg.get("max_minutes")
        )
        return stage
    model_spec = {**tcfg, "model": entry.get("model") or tcfg.get("model", "tiny")}
    key = stage_key({"data": plan.gen_key, "input": entry["input"], "cot": entry["cot"], **model_spec})
    argv = ["train", *to_argv({**given, "out": str(run_dir), **model_spec}, TrainOptions)]
    stage = Stage("train", mname, key, argv, record, [run_dir], after=[plan.stage.marker])
    groups = _limited(plan.groups.get(tcfg.get("split", "id-train"), []), None, tcfg.get("limit"))
    stage.estimate_s = estimates.train_seconds(
        groups,
        entry["input"],
        entry["cot"],
        str(model_spec["model"]),
        epochs=tcfg.get("epochs"),
        max_minutes=tcfg.get("max_minutes"),
        max_steps=tcfg.get("max_steps"),
        examples_per_step=tcfg.get("batch_size", 0) * tcfg.get("grad_accum", 1),
        prompt=tcfg.get("prompt", "mirage"),
    )
    return stage


def _predict_stages(
    cfg: SourcedConfig,
    where: str,
    entry: Mapping[str, Any],
    mname: str,
    model_ref: str,
    model_key: str,
    pcfg: dict[str, Any],
    plan: _DataPlan,
    workdir: Path,
) -> list[Stage]:
    """One prediction stage per split of a model entry."""
    split_names, gen_key, data_dir = plan.split_names, plan.gen_key, plan.data_dir
    stages: list[Stage] = []
    splits = pcfg.get("splits") or ["id-test"]
    for s in splits:
        if s not in split_names:
            raise cfg.error(
                f"{where}.predict.splits" if entry.get("predict", {}).get("splits") else "predict.splits",
                f"unknown split {s!r} (the data has {', '.join(split_names)})",
            )
    for split in splits:
        pkey = stage_key({"model": model_key, "split": split, "data": gen_key, **pcfg})
        out = workdir / "predictions" / mname / f"{split}.jsonl"
        options = {
            "model": model_ref,
            "data": str(data_dir),
            "split": split,
            "out": str(out),
            "input_format": entry["input"],
            "cot_format": entry["cot"],
            "name": mname,
            **{k: v for k, v in pcfg.items() if k != "splits"},
        }
        argv = ["predict", *to_argv(options, PredictOptions)]
        marker = workdir / "stages" / f"predict-{mname}-{split}.json"
        stage = Stage("predict", f"{mname}/{split}", pkey, argv, marker, [out])
        if pcfg.get("backend", "hf") == "hf":  # API and vLLM rates are not this machine's
            groups = _limited(plan.groups.get(split, []), pcfg.get("per_size"), pcfg.get("limit"))
            prompt = pcfg.get("prompt") or "mirage"  # (a run's own prompt is known once it is trained)
            one_pass = estimates.predict_seconds(groups, entry["input"], entry["cot"], prompt)
            stage.estimate_s = one_pass * pcfg.get("samples", 1)
        stages.append(stage)
    return stages


def _limited(groups: list[tuple[int, int]], per_size: int | None, limit: int | None) -> list[tuple[int, int]]:
    """The ``(size, count)`` groups a stage reads: at most ``per_size`` maps per size, ``limit`` in all."""
    counts: dict[int, int] = {}
    for n, c in groups:
        counts[n] = counts.get(n, 0) + c
    out = [(n, min(c, per_size) if per_size else c) for n, c in counts.items()]
    if limit:
        left, capped = limit, []
        for n, c in out:
            capped.append((n, min(c, left)))
            left -= capped[-1][1]
        out = capped
    return out


def _plan_report(
    report_cfg: Mapping[str, Any], predict_stages: list[Stage], plan: _DataPlan, workdir: Path
) -> Stage:
    """The ``report`` stage: every model's predictions, with the ``report:`` section's options."""
    report_key = stage_key({"predictions": [s.key for s in predict_stages], **report_cfg})
    report_dir = workdir / "report"
    train_maps = report_cfg.get("train_maps") or (
        str(plan.data_dir / "id-train" / "maps.jsonl") if "id-train" in plan.split_names else None
    )
    options = {
        "runs_dir": workdir / "predictions",
        "data": plan.data_dir,
        "out": report_dir,
        **report_cfg,
        "train_maps": train_maps,
        "images": bool(plan.dcfg.get("images", DataSection.images)),
    }
    argv = ["report", *to_argv(options, ReportOptions)]
    reads = [plan.stage.marker, *(s.marker for s in predict_stages)]
    return Stage(
        "report", "report", report_key, argv, workdir / "stages" / "report.json", [report_dir], after=reads
    )


def load_study(path: str | Path, workdir: str | Path | None = None) -> Study:
    """Reads a study config (and the ones it ``extends``) and plans it (:func:`plan_study`)."""
    return plan_study(read_study_config(path), workdir)
