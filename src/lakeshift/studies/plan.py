"""Planning a study: its config checked against the schema, and its stages with their cache keys."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lakeshift._version import __version__
from lakeshift.config import SourcedConfig, load_yaml
from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS
from lakeshift.models.grpo import GrpoOptions
from lakeshift.models.predict import PredictOptions
from lakeshift.models.train import TrainOptions
from lakeshift.options import check_config, to_argv
from lakeshift.studies import estimates
from lakeshift.studies.schema import (
    DATA_KEYS,
    GRPO_TRAIN_KEYS,
    ID_SOURCE_MISSING,
    MERGED_SECTIONS,
    METHODS,
    MODEL_KEYS,
    MODEL_NAME,
    PREDICT_KEYS,
    REPORT_KEYS,
    TOP_KEYS,
    TRAIN_KEYS,
    as_number,
    check_keys,
)
from lakeshift.traces import COT_FORMATS


@dataclass
class Stage:
    """One unit of cached work: the CLI arguments it runs and the marker that records it as done."""

    kind: str
    name: str
    key: str
    argv: list[str]
    marker: Path
    outputs: list[Path] = field(default_factory=list)  # removed first when the stage's settings changed
    files: dict[Path, Any] = field(default_factory=dict)  # JSON files written before running
    estimate_s: float | None = None  # the time it should take (lakeshift.studies.estimates), None: unknown
    writes: list[Path] = field(default_factory=list)  # what it writes into, when more than its outputs

    def recorded_key(self) -> str | None:
        try:
            return json.loads(self.marker.read_text()).get("key")
        except (OSError, ValueError, AttributeError):  # ValueError: not UTF-8 or not JSON
            return None

    def done(self) -> bool:
        return self.recorded_key() == self.key

    def recorded_code(self) -> str | None:
        """The :func:`code_identity` the stage was last completed with (``None``: unknown or never)."""
        try:
            return json.loads(self.marker.read_text()).get("code")
        except (OSError, ValueError, AttributeError):  # ValueError: not UTF-8 or not JSON
            return None

    def foreign_output(self) -> Path | None:
        """A path the stage writes that exists although the study never started the stage (no marker):
        someone else's files (a ``--workdir`` that already held a ``data/``), which running would replace."""
        if self.marker.exists():
            return None
        for path in self.writes or self.outputs:
            if path.is_file() or (path.is_dir() and any(path.iterdir())):
                return path
        return None

    def claim(self) -> None:
        """Records that the study started the stage (a marker without a key), so that its outputs are the
        study's to reuse or replace when an interrupted run is resumed."""
        if not self.marker.exists():
            self.marker.parent.mkdir(parents=True, exist_ok=True)
            info = {"kind": self.kind, "name": self.name, "started": self.key}
            self.marker.write_text(json.dumps(info, indent=1) + "\n")

    def mark_done(self, seconds: float) -> None:
        info = {
            "kind": self.kind,
            "name": self.name,
            "key": self.key,
            "code": code_identity(),
            "argv": self.argv,
            "seconds": round(seconds, 1),
        }
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        self.marker.write_text(json.dumps(info, indent=1) + "\n")


@dataclass
class Study:
    """A validated study config and its stage plan."""

    name: str
    workdir: Path
    stages: list[Stage]
    budget_minutes: float | None = None  # the config's `budget_minutes`
    train_jobs: int = 1  # the config's `train_jobs`: SFT training stages run at once

    def concurrent(self, stages: list[Stage]) -> list[Stage]:
        """The stages of ``stages`` that run at once (SFT training, when ``train_jobs`` > 1)."""
        if self.train_jobs < 2:
            return []
        return [s for s in stages if s.kind == "train" and "--method" not in s.argv]

    def wall_seconds(self, stages: list[Stage]) -> float:
        """The estimated time of ``stages`` (unknown ones count 0): concurrent ones share the clock."""
        at_once = self.concurrent(stages)
        alone = sum(s.estimate_s or 0.0 for s in stages if s not in at_once)
        return alone + sum(s.estimate_s or 0.0 for s in at_once) / max(1, min(self.train_jobs, len(at_once)))

    def summary(self) -> dict[str, int]:
        """Number of stages of each kind."""
        return dict(Counter(s.kind for s in self.stages))

    def estimate(self, stages: list[Stage]) -> str:
        """One line: the estimated time of ``stages`` by kind, and the stages without an estimate."""
        by_kind: dict[str, float] = {}
        unknown = [s.name for s in stages if s.estimate_s is None and s.kind in ("train", "predict")]
        for kind in dict.fromkeys(s.kind for s in stages if s.estimate_s is not None):
            by_kind[kind] = self.wall_seconds([s for s in stages if s.kind == kind])
        total = self.wall_seconds(stages) / 60
        parts = ", ".join(f"{kind} {secs / 60:.0f}" for kind, secs in by_kind.items())
        line = f"estimated time of the stages to do: ~{total:.0f} min ({parts or 'nothing'})"
        if self.concurrent(stages):
            line += f"; {self.train_jobs} trainings at a time"
        if unknown:
            line += f"; no estimate for {len(unknown)} stage(s) (no measured rate), e.g. {unknown[0]}"
        return line

    def only(self, patterns: Sequence[str]) -> Study:
        """The study cut to the model entries whose names match one of ``patterns`` (shell globs such as
        ``grid__*``): its data stage and their training and prediction stages, without the report (which
        covers every model). A GRPO or predict entry needs its ``init`` among them or already trained.

        Raises:
            LakeshiftError: a pattern that matches no model entry.
        """
        models = list(
            dict.fromkeys(s.name.split("/")[0] for s in self.stages if s.kind in ("train", "predict"))
        )
        unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(m, p) for m in models)]
        if unmatched:
            raise LakeshiftError(
                f"--models {unmatched[0]!r} matches no model of study {self.name!r} (its models: "
                f"{', '.join(models)})"
            )
        chosen = {m for m in models if any(fnmatch.fnmatchcase(m, p) for p in patterns)}
        stages = [
            s
            for s in self.stages
            if s.kind == "generate" or (s.kind in ("train", "predict") and s.name.split("/")[0] in chosen)
        ]
        return replace(self, stages=stages)

    def over_budget(self, stages: list[Stage]) -> str | None:
        """Why ``stages`` cannot fit ``budget_minutes``, or ``None``."""
        if self.budget_minutes is None:
            return None
        total = self.wall_seconds(stages) / 60
        if total > self.budget_minutes:
            return (
                f"study {self.name!r}: its stages need about {total:.0f} minutes on a 2-core CPU, more than "
                f"its budget_minutes: {self.budget_minutes:g} (shorten max_minutes or epochs, use fewer "
                f"maps, or raise the budget)"
            )
        return None


@functools.lru_cache(maxsize=1)
def code_identity() -> str:
    """``<version>+<hash>``: lakeshift's version and a sha256 of its source (the path and bytes of every
    ``.py`` file of the package, in sorted order), computed once per process (~5 ms)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:12]}"


def _hash(obj: Any) -> str:
    """A stage key: its settings and the code that runs them (a code change invalidates every stage)."""
    keyed = {"code": code_identity(), "stage": obj}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True, default=str).encode()).hexdigest()[:10]


def _check_predict(cfg: SourcedConfig, section: Mapping[str, Any], where: str) -> None:
    """A ``predict:`` section: ``splits`` a list of names, the rest ``lakeshift predict`` options."""
    splits = section.get("splits")
    if splits is not None and not (isinstance(splits, list) and all(isinstance(s, str) for s in splits)):
        raise cfg.error(f"{where}.splits", f"expected a list of split names, got {splits!r}")
    options = {k: v for k, v in section.items() if k != "splits"}
    check_config(cfg, options, PredictOptions, PREDICT_KEYS, where)


def _init_of(
    cfg: SourcedConfig, entry: Mapping[str, Any], where: str, trained: Mapping[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The init model of a ``method: grpo`` entry (GRPO starts from it) or a ``method: predict`` entry (it
    predicts with it, under the entry's own ``predict`` options); ``None`` for SFT and zero-shot entries.

    Raises:
        LakeshiftError: an unknown method, ``init`` without such a method (or the reverse), an init that
            is not an earlier trained entry, formats that differ from the init's, a ``model`` key, or a
            ``train`` key or no ``name`` for ``method: predict``.
    """
    method = entry.get("method", "sft")
    if method not in METHODS:
        raise cfg.error(f"{where}.method", f"unknown method {method!r} (known: {', '.join(METHODS)})")
    if method == "sft":
        if "init" in entry:
            raise cfg.error(
                f"{where}.init", "'init' is for method: grpo or predict (the model they start from)"
            )
        return None
    if entry.get("zero_shot"):
        raise cfg.error(
            f"{where}.method", f"a zero-shot model is not trained: method {method} needs a trained init"
        )
    if not entry.get("init"):
        raise cfg.error(
            where, f"method: {method} needs 'init': the name of an earlier model entry to start from"
        )
    if "model" in entry:
        raise cfg.error(f"{where}.model", f"method: {method} uses its 'init' entry's model, not 'model'")
    if method == "predict" and "train" in entry:
        raise cfg.error(
            f"{where}.train", "method: predict trains nothing (it predicts with its init's model)"
        )
    if method == "predict" and not entry.get("name"):
        raise cfg.error(where, "method: predict needs a 'name' of its own (its predictions' folder)")
    name = entry["init"]
    if name not in trained:
        known = ", ".join(trained) or "none"
        raise cfg.error(
            f"{where}.init", f"{name!r} is not an earlier trained model entry (trained so far: {known})"
        )
    init = trained[name]
    for key, field_name in (("input", "input"), ("cot", "cot")):
        if key in entry and entry[key] != init[field_name]:
            raise cfg.error(
                f"{where}.{key}",
                f"{entry[key]!r} differs from its init {name!r} ({init[field_name]!r}); the model "
                "writes the format it was trained on",
            )
    return init


def _check_grpo_train(cfg: SourcedConfig, tcfg: Mapping[str, Any], cot: str, where: str) -> None:
    """What GRPO needs beyond each option's own rule: two completions per prompt, rewards that parse."""
    if tcfg.get("num_generations") is not None and tcfg["num_generations"] < 2:
        raise cfg.error(f"{where}.num_generations", "GRPO needs at least 2 completions per prompt")
    if tcfg.get("reward") is not None:
        from lakeshift.models.rewards import parse_rewards

        try:
            parse_rewards(str(tcfg["reward"]), cot=cot, option="reward:")
        except LakeshiftError as err:
            raise cfg.error(f"{where}.reward", str(err)) from None


def plan_study(cfg: SourcedConfig, workdir_override: str | Path | None = None) -> Study:
    """Validates a study config and turns it into stages; nothing is run.

    Raises:
        LakeshiftError: an unknown key, format, split or model, or stages that cannot be satisfied; the
            message names the key and its line in the file.
    """
    data = cfg.data
    if not isinstance(data, dict):
        raise LakeshiftError(f"{cfg.path}: expected a mapping at the top level")
    check_keys(cfg, data, TOP_KEYS, "")
    for required in ("name", "data", "models"):
        if required not in data:
            raise LakeshiftError(f"{cfg.path}: missing required key {required!r}")
    name = data["name"]
    workdir = Path(workdir_override or data.get("workdir") or Path("runs") / name)
    plan = _plan_data(cfg, data["data"], workdir)
    stages = [plan.stage]

    train_defaults = data.get("train") or {}
    check_config(cfg, train_defaults, TrainOptions, TRAIN_KEYS, "train")
    predict_defaults = dict(data.get("predict") or {})
    _check_predict(cfg, predict_defaults, "predict")
    report_cfg = data.get("report") or {}
    check_keys(cfg, report_cfg, REPORT_KEYS, "report")
    from lakeshift.report.references import KNOWN as KNOWN_REFERENCES

    if report_cfg.get("reference") not in (None, *KNOWN_REFERENCES):
        raise cfg.error(
            "report.reference",
            f"unknown reference {report_cfg['reference']!r} (known: {', '.join(KNOWN_REFERENCES)})",
        )
    models = data["models"]
    if not models:
        raise cfg.error("models", "the study has no models")
    seen_names: set[str] = set()
    trained: dict[str, dict[str, Any]] = {}  # trained model name -> key, run folder, formats (for `init`)
    predict_stages: list[Stage] = []
    for i, entry in enumerate(models):
        model_stages = _plan_model(
            cfg, i, entry, plan, workdir, train_defaults, predict_defaults, seen_names, trained
        )
        stages += model_stages  # predictions right after their model: an interrupted study has whole models
        predict_stages += [st for st in model_stages if st.kind == "predict"]
    stages.append(_plan_report(report_cfg, predict_stages, plan, workdir))
    _check_argv(cfg, stages[-1], "report")
    return Study(name, workdir, stages, data.get("budget_minutes"), data.get("train_jobs", 1))


@dataclass
class _DataPlan:
    """The data stage of a study and what the model stages need to know about it."""

    stage: Stage
    dcfg: dict[str, Any]
    data_dir: Path
    split_names: list[str]
    gen_key: str
    images: bool
    groups: dict[str, list[tuple[int, int]]]  # (size, count) of each split's map groups


def _plan_data(cfg: SourcedConfig, dcfg: Any, workdir: Path) -> _DataPlan:
    check_keys(cfg, dcfg, DATA_KEYS, "data")
    if ("suite" in dcfg) == ("splits" in dcfg):
        raise cfg.error(
            "data", "give exactly one of 'suite' (a named suite or a suite file) or 'splits' (inline specs)"
        )
    data_dir = workdir / "data"
    suite_arg: str
    split_names: list[str]
    if "suite" in dcfg:
        from lakeshift.data.catalog import SUITES, load_suite
        from lakeshift.io import file_sha256

        suite_arg = dcfg["suite"]
        try:
            specs = load_suite(suite_arg)
        except LakeshiftError as err:
            raise cfg.error("data.suite", str(err)) from None
        split_names = [s.name for s in specs]
        # a suite file enters the key by its content, so editing it regenerates the data
        suite_content: Any = suite_arg if suite_arg in SUITES else {"file_sha256": file_sha256(suite_arg)}
    else:
        from lakeshift.data.catalog import check_suite
        from lakeshift.data.generate import SplitSpec

        specs = []
        for i, raw in enumerate(dcfg["splits"]):
            if not isinstance(raw, Mapping):
                raise cfg.error(f"data.splits[{i}]", "expected a mapping (a split spec)")
            where = cfg.where(f"data.splits[{i}]")
            specs.append(SplitSpec.from_dict(raw, f"{where}: data.splits[{i}]"))
        try:
            check_suite(specs)
        except LakeshiftError as err:
            raise cfg.error("data.splits", str(err)) from None
        split_names = [s.name for s in specs]
        suite_arg = str(workdir / "suite-spec.json")
        suite_content = {"splits": dcfg["splits"]}
    for key, known in (("inputs", INPUT_FORMATS), ("cots", COT_FORMATS)):
        for i, value in enumerate(dcfg.get(key) or []):
            if value not in known:
                raise cfg.error(f"data.{key}[{i}]", f"unknown format {value!r} (known: {', '.join(known)})")
    gen_options = {k: v for k, v in dcfg.items() if k not in ("suite", "splits", "id_source_missing")}
    missing = dcfg.get("id_source_missing", "error")
    if missing not in ID_SOURCE_MISSING:
        raise cfg.error("data.id_source_missing", f"expected one of {', '.join(ID_SOURCE_MISSING)}")
    if gen_options.get("id_source") and not Path(gen_options["id_source"]).is_dir():
        if missing == "error":
            raise cfg.error("data.id_source", f"no such folder: {gen_options['id_source']}")
        print(
            f"{cfg.where('data.id_source')}: no such folder {gen_options.pop('id_source')}: id-train and "
            "id-test are generated instead (data.id_source_missing: generate)",
            file=sys.stderr,
        )
    gen_key = _hash({"suite": suite_content, **gen_options})
    images = bool(dcfg.get("images", False))
    gen_argv = ["generate", "--suite", suite_arg, "--out", str(data_dir), "--force"]
    gen_argv += ["--seed", str(dcfg.get("seed", 0))]
    if dcfg.get("id_source"):
        gen_argv += ["--id-source", str(dcfg["id_source"])]
    if not images:
        gen_argv += ["--no-images"]
    if dcfg.get("workers"):
        gen_argv += ["--workers", str(dcfg["workers"])]
    for key in ("inputs", "cots"):
        if dcfg.get(key):
            gen_argv += [f"--{key}", ",".join(dcfg[key])]
    spec_file = {} if "suite" in dcfg else {Path(suite_arg): suite_content}
    marker = workdir / "stages" / "generate.json"
    stage = Stage("generate", "data", gen_key, gen_argv, marker, files=spec_file, writes=[data_dir])
    _check_argv(cfg, stage, "data")
    groups: dict[str, list[tuple[int, int]]] = {}
    for spec in specs:  # an embedded split has as many maps as its source
        source = sum(c for _, c in groups.get(spec.embed_source, [])) if spec.embed_source else 0
        groups[spec.name] = (
            [(spec.embed_size, source)] if spec.embed_source else [(g.size, g.count) for g in spec.groups]
        )
    return _DataPlan(stage, dcfg, data_dir, split_names, gen_key, images, groups)


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
    if not isinstance(entry, Mapping):
        raise cfg.error(where, "expected a mapping with at least 'input' and 'cot'")
    check_keys(cfg, entry, MODEL_KEYS, where)
    init = _init_of(cfg, entry, where, trained)
    predict_only = entry.get("method") == "predict"
    if init is not None:  # a GRPO or predict entry continues its init's formats
        entry = {"input": init["input"], "cot": init["cot"], **entry}
    _check_formats_of(cfg, entry, where, plan)
    zero_shot = bool(entry.get("zero_shot", False))
    mname = entry.get("name") or f"{entry['input']}__{entry['cot']}" + ("__zero-shot" if zero_shot else "")
    if init is not None:
        # Named after its init, so the report's rows sort SFT, then SFT+GRPO, side by side.
        mname = entry.get("name") or f"{entry['init']}+grpo"
    if not MODEL_NAME.fullmatch(mname):
        raise cfg.error(
            f"{where}.name",
            f"model name {mname!r} must be one folder name (letters, digits, . _ + @ = -; starting with a "
            "letter or digit): it names the model's folders inside the workdir",
        )
    if mname in seen_names:
        raise cfg.error(
            f"{where}.name", f"model name {mname!r} is used twice; give each model a distinct name"
        )
    seen_names.add(mname)
    tcfg = {} if predict_only else _train_config(cfg, entry, where, init, train_defaults)
    if not zero_shot and not predict_only and tcfg.get("split", "id-train") not in plan.split_names:
        raise cfg.error(
            f"{where}.train.split",
            f"training split {tcfg.get('split', 'id-train')!r} is not in the data (has {plan.split_names})",
        )
    pcfg = {**predict_defaults, **(entry.get("predict") or {})}
    _check_predict(cfg, entry.get("predict") or {}, f"{where}.predict")
    for key in ("backend", "base_url"):
        if entry.get(key):
            pcfg[key] = entry[key]
    backend = pcfg.get("backend", "hf")
    if backend not in ("hf", "vllm", "openai"):
        raise cfg.error(f"{where}.backend", f"unknown backend {backend!r} (known: hf, vllm, openai)")
    _check_decoding(cfg, pcfg, entry, where)

    if zero_shot:
        if not entry.get("model"):
            raise cfg.error(where, "a zero-shot model needs 'model' (a checkpoint or API model name)")
        model_ref, model_key = entry["model"], _hash({"zero_shot": entry["model"], "backend": backend})
        stages: list[Stage] = []
    elif predict_only and init is not None:  # its predictions are redone when the init is retrained
        model_ref, model_key, stages = str(init["run_dir"]), init["key"], []
    else:
        if init is None:
            _check_sft_model(cfg, entry, where, tcfg, plan, pcfg.get("splits") or ["id-test"])
        stage = _train_stage(entry, mname, tcfg, init, plan, workdir)
        model_ref, model_key, stages = str(stage.outputs[0]), stage.key, [stage]
        trained[mname] = {
            "key": model_key,
            "run_dir": stage.outputs[0],
            "input": entry["input"],
            "cot": entry["cot"],
        }
    stages += _predict_stages(cfg, where, entry, mname, model_ref, model_key, pcfg, plan, workdir)
    for stage in stages:
        _check_argv(cfg, stage, where)
    return stages


def _check_argv(cfg: SourcedConfig, stage: Stage, where: str) -> None:
    """A stage's command line parses as the command would parse it (numbers in range, known choices).

    Raises:
        LakeshiftError: naming the config key the stage comes from and what the command would say.
    """
    from lakeshift.cli import check_argv

    try:
        check_argv(stage.argv)
    except LakeshiftError as err:
        raise cfg.error(where, f"its {stage.kind} stage would fail: {err}") from None


def _check_sft_model(
    cfg: SourcedConfig,
    entry: Mapping[str, Any],
    where: str,
    tcfg: Mapping[str, Any],
    plan: _DataPlan,
    predict_splits: Sequence[str] = (),
) -> None:
    """The model an SFT entry trains exists (a hub id is checked when it loads), takes its ``cells`` change,
    has row and column positions for the maps it trains on and answers (``predict_splits``), and has room
    for an answer within its ``max_length``.

    Raises:
        LakeshiftError: naming the key and its line.
    """
    from lakeshift.models import cells
    from lakeshift.models.registry import cell_spec, resolve_offline

    name = str(entry.get("model") or tcfg.get("model", "tiny"))
    if entry.get("model"):
        key = f"{where}.model"
    else:
        key = f"{where}.train.model" if "model" in (entry.get("train") or {}) else "train.model"
    try:
        spec = resolve_offline(name)
    except LakeshiftError as err:
        raise cfg.error(key, str(err)) from None
    if tcfg.get("cells") is not None and spec is not None:
        try:
            cell_spec(spec).changed(tcfg["cells"], "cells")
        except LakeshiftError as err:
            raise cfg.error(key, f"{name}: {err}") from None
    model_type = spec.model_type if spec is not None else None
    train_split = tcfg.get("split", "id-train")
    for split in (train_split, *predict_splits):
        try:
            cells.check_sizes(model_type, [n for n, _ in plan.groups.get(split, [])], f"split {split}")
        except LakeshiftError as err:
            raise cfg.error(key, f"{name}: {err}") from None
    max_length = tcfg.get("max_length")
    sizes = [n for n, _ in plan.groups.get(train_split, [])]
    if max_length is not None and sizes:
        chars = estimates.prompt_chars(min(sizes), entry["input"], tcfg.get("prompt", "mirage"))
        shortest = chars // estimates.MAX_CHARS_PER_TOKEN
        if max_length <= shortest:
            own = "max_length" in (entry.get("train") or {})
            raise cfg.error(
                f"{where}.train.max_length" if own else "train.max_length",
                f"{max_length} tokens: the shortest prompts ({min(sizes)}x{min(sizes)} maps) are at least "
                f"{shortest} tokens ({chars} characters), so every answer would be cut away",
            )


def _check_formats_of(cfg: SourcedConfig, entry: Mapping[str, Any], where: str, plan: _DataPlan) -> None:
    """A model entry's input and CoT formats exist and are among those its data writes."""
    for required in ("input", "cot"):
        if required not in entry:
            raise cfg.error(where, f"missing key {required!r}")
    if entry["input"] not in INPUT_FORMATS:
        raise cfg.error(
            f"{where}.input",
            f"unknown input format {entry['input']!r} (known: {', '.join(INPUT_FORMATS)})",
        )
    if entry["cot"] not in COT_FORMATS:
        raise cfg.error(
            f"{where}.cot", f"unknown CoT format {entry['cot']!r} (known: {', '.join(COT_FORMATS)})"
        )
    if entry["input"] == "image" and not plan.images:
        raise cfg.error(f"{where}.input", "image input needs images: set data.images: true")
    for key, field_name in (("inputs", "input"), ("cots", "cot")):
        if plan.dcfg.get(key) and entry[field_name] not in plan.dcfg[key]:
            raise cfg.error(
                f"{where}.{field_name}",
                f"{entry[field_name]!r} is not among the formats the data writes "
                f"(data.{key}: {plan.dcfg[key]})",
            )


def _train_config(
    cfg: SourcedConfig,
    entry: Mapping[str, Any],
    where: str,
    init: dict[str, Any] | None,
    train_defaults: dict[str, Any],
) -> dict[str, Any]:
    """The entry's training options over the study's defaults (a GRPO entry takes only split and seed)."""
    own = entry.get("train") or {}
    if init is not None:
        tcfg: dict[str, Any] = {k: train_defaults[k] for k in ("split", "seed") if k in train_defaults}
        tcfg.update(own)
        check_config(cfg, own, GrpoOptions, GRPO_TRAIN_KEYS, f"{where}.train")
        _check_grpo_train(cfg, own, entry["cot"], f"{where}.train")
    else:
        tcfg = {**train_defaults, **own}
        check_config(cfg, own, TrainOptions, TRAIN_KEYS, f"{where}.train")
    for key in ("lr", "weight_decay", "beta"):
        if key in tcfg:
            tcfg[key] = as_number(cfg, tcfg[key], f"{where}.train.{key}")
    return tcfg


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
        key = _hash({"grpo": init["key"], "data": plan.gen_key, **tcfg})
        options = {**given, "model": str(init["run_dir"]), "out": str(run_dir), **tcfg}
        argv = ["train", "--method", "grpo", *to_argv(options, GrpoOptions)]
        stage = Stage("train", mname, key, argv, record, [run_dir])
        # GRPO's rate is not measured: only its time budget counts
        stage.estimate_s = estimates.train_seconds(
            [], entry["input"], entry["cot"], "", epochs=None, max_minutes=tcfg.get("max_minutes")
        )
        return stage
    model_spec = {**tcfg, "model": entry.get("model") or tcfg.get("model", "tiny")}
    key = _hash({"data": plan.gen_key, "input": entry["input"], "cot": entry["cot"], **model_spec})
    argv = ["train", *to_argv({**given, "out": str(run_dir), **model_spec}, TrainOptions)]
    stage = Stage("train", mname, key, argv, record, [run_dir])
    groups = _limited(plan.groups.get(tcfg.get("split", "id-train"), []), None, tcfg.get("limit"))
    stage.estimate_s = estimates.train_seconds(
        groups,
        entry["input"],
        entry["cot"],
        str(model_spec["model"]),
        epochs=tcfg.get("epochs"),
        max_minutes=tcfg.get("max_minutes"),
        prompt=tcfg.get("prompt", "mirage"),
    )
    return stage


def _check_decoding(
    cfg: SourcedConfig, pcfg: Mapping[str, Any], entry: Mapping[str, Any], where: str
) -> None:
    """A model's ``decoding`` and ``samples`` as ``lakeshift predict`` would take them, checked at plan time.

    Raises:
        LakeshiftError: a preset beside ``temperature``, or repeated greedy samples, naming the key's line.
    """
    from lakeshift.models.generation import DECODING_PRESETS

    def key_where(key: str) -> str:
        return f"{where}.predict.{key}" if key in (entry.get("predict") or {}) else f"predict.{key}"

    preset = pcfg.get("decoding")  # a known one: the predict options are checked
    if preset is not None and pcfg.get("temperature") is not None:
        raise cfg.error(key_where("temperature"), f"decoding {preset} sets the temperature itself")
    greedy = DECODING_PRESETS[preset][0] == 0 if preset is not None else not pcfg.get("temperature")
    if pcfg.get("samples", 1) > 1 and greedy:
        raise cfg.error(
            key_where("samples"),
            "repeated samples need sampled decoding (decoding: frozen_ood or a temperature > 0)",
        )


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
        pkey = _hash({"model": model_key, "split": split, "data": gen_key, **pcfg})
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
            one_pass = estimates.predict_seconds(groups, entry["input"], entry["cot"])
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
    report_cfg: dict[str, Any], predict_stages: list[Stage], plan: _DataPlan, workdir: Path
) -> Stage:
    data_dir, split_names, images = plan.data_dir, plan.split_names, plan.images
    stage_dir = workdir / "stages"
    report_key = _hash({"predictions": [s.key for s in predict_stages], **report_cfg})
    report_dir = workdir / "report"
    argv = ["report", str(workdir / "predictions"), "--data", str(data_dir), "--out", str(report_dir)]
    train_maps = report_cfg.get("train_maps") or (
        str(data_dir / "id-train" / "maps.jsonl") if "id-train" in split_names else None
    )
    if train_maps:
        argv += ["--train-maps", train_maps]
    if report_cfg.get("baselines") is False:
        argv.append("--no-baselines")
    if report_cfg.get("examples") is not None:  # 0 means no examples, not the default
        argv += ["--examples", str(report_cfg["examples"])]
    if report_cfg.get("reference"):  # published rows beside ours (lakeshift report --reference)
        argv += ["--reference", report_cfg["reference"]]
    if not images:
        argv.append("--no-images")
    return Stage("report", "report", report_key, argv, stage_dir / "report.json", [report_dir])


def load_study(path: str | Path, workdir: str | Path | None = None) -> Study:
    """Reads a study config (and the ones it ``extends``) and plans it (:func:`plan_study`)."""
    return plan_study(read_study_config(path), workdir)


def read_study_config(path: str | Path, seen: tuple[Path, ...] = ()) -> SourcedConfig:
    """A study config with what it ``extends`` merged in: ``extends: FILE`` (a path as given, like a suite
    file's) starts the study from another study's config; this file's ``data``, ``train``, ``predict`` and
    ``report`` keys replace that config's key by key, and its other top-level keys (``name``, ``models``, ...)
    replace them whole.

    Raises:
        LakeshiftError: an ``extends`` that is not a file name, is missing, or comes back to a file it
            started from.
    """
    cfg = load_yaml(path)
    if not isinstance(cfg.data, dict) or "extends" not in cfg.data:
        return cfg
    base_path = cfg.data["extends"]
    if not isinstance(base_path, str) or not base_path:
        raise cfg.error("extends", f"expected the path of a study config, got {base_path!r}")
    here = Path(path).resolve()
    if Path(base_path).resolve() in (*seen, here):
        raise cfg.error("extends", f"{base_path} extends this file again (a cycle)")
    if not Path(base_path).is_file():
        raise cfg.error("extends", f"{base_path}: no such study config")
    base = read_study_config(base_path, (*seen, here))
    if not isinstance(base.data, dict):
        raise cfg.error("extends", f"{base_path}: expected a mapping at the top level")
    merged = cfg.extending(base, MERGED_SECTIONS)
    del merged.data["extends"]
    return merged
