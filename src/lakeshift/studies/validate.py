"""A study config read (with the config it ``extends``) and checked: every error names file, line and key.

The shape of each section is declared in :mod:`lakeshift.studies.schema`; the checks here are those that
span keys or sections (a model entry's formats against its data, a GRPO entry against its init, a model
against its maps) and those that read files (a suite, a model's spec).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift.config import SourcedConfig, load_yaml, name_problem
from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS
from lakeshift.models.grpo import GrpoOptions
from lakeshift.models.predict import PredictOptions
from lakeshift.models.train_options import TrainOptions
from lakeshift.options import check_config
from lakeshift.report.options import ReportOptions
from lakeshift.studies import estimates
from lakeshift.studies.schema import (
    DATA_KEYS,
    GRPO_TRAIN_KEYS,
    MERGED_SECTIONS,
    METHODS,
    MODEL_KEYS,
    MODEL_NAME,
    PREDICT_KEYS,
    REPORT_KEYS,
    REQUIRED_KEYS,
    TOP_KEYS,
    TRAIN_KEYS,
    DataSection,
    ModelEntry,
    StudyConfig,
)
from lakeshift.studies.stages import Stage
from lakeshift.traces import COT_FORMATS


def check_top_level(cfg: SourcedConfig) -> dict[str, Any]:
    """The top level of a study config: its keys and their types, and the keys every study has.

    Raises:
        LakeshiftError: not a mapping, an unknown key, a value of the wrong type, a missing key.
    """
    data = cfg.data
    if not isinstance(data, dict):
        raise LakeshiftError(f"{cfg.path}: expected a mapping at the top level")
    check_config(cfg, data, StudyConfig, TOP_KEYS, "")
    for required in REQUIRED_KEYS:
        if required not in data:
            raise LakeshiftError(f"{cfg.path}: missing required key {required!r}")
    if data["name"] is None:  # check_config passes a null by: it means "unset" for every other key
        raise cfg.error("name", f"{name_problem(None, 'study name')}")
    return data


def check_defaults(cfg: SourcedConfig, data: Mapping[str, Any], workdir: Path | None = None) -> None:
    """The sections every model entry starts from (``train:``, ``predict:``, ``report:``), and the models.

    Raises:
        LakeshiftError: a bad key or value of a section, a ``report.train_maps`` that is neither there nor
            inside ``workdir`` (which the study writes), or no model entries.
    """
    check_config(cfg, data.get("train") or {}, TrainOptions, TRAIN_KEYS, "train")
    check_predict(cfg, data.get("predict") or {}, "predict")
    report = check_config(cfg, data.get("report") or {}, ReportOptions, REPORT_KEYS, "report")
    train_maps = report.get("train_maps")
    if isinstance(train_maps, str) and not Path(train_maps).is_file():
        inside = workdir is not None and Path(train_maps).resolve().is_relative_to(workdir.resolve())
        if not inside:  # found missing only by the report stage, after every model is trained
            raise cfg.error("report.train_maps", f"{train_maps}: no such file")
    if not data["models"]:
        raise cfg.error("models", "the study has no models")


def data_specs(cfg: SourcedConfig, dcfg: Mapping[str, Any]) -> list[Any]:
    """The split specs of a ``data:`` section (a suite's, or the inline ``splits``), checked.

    Raises:
        LakeshiftError: a bad key or value, both or neither of ``suite`` and ``splits``, a suite that does
            not load, a bad split spec.
    """
    check_config(cfg, dcfg, DataSection, DATA_KEYS, "data")
    if ("suite" in dcfg) == ("splits" in dcfg):
        raise cfg.error(
            "data", "give exactly one of 'suite' (a named suite or a suite file) or 'splits' (inline specs)"
        )
    if "suite" in dcfg:
        from lakeshift.data.catalog import load_suite

        try:
            return load_suite(dcfg["suite"])
        except LakeshiftError as err:
            raise cfg.error("data.suite", str(err)) from None
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
    return specs


def id_source_missing(cfg: SourcedConfig, dcfg: Mapping[str, Any]) -> bool:
    """Whether ``data.id_source`` is not a folder here and the study generates id-train and id-test instead
    (``id_source_missing: generate``), which it says on stderr.

    Raises:
        LakeshiftError: ``id_source`` is not a folder here and ``id_source_missing`` is ``error``.
    """
    source = dcfg.get("id_source")
    if not source or Path(source).is_dir():
        return False
    if dcfg.get("id_source_missing", DataSection.id_source_missing) == "error":
        raise cfg.error("data.id_source", f"no such folder: {source}")
    print(
        f"{cfg.where('data.id_source')}: no such folder {source}: id-train and id-test are generated "
        "instead (data.id_source_missing: generate)",
        file=sys.stderr,
    )
    return True


def model_name(
    cfg: SourcedConfig, entry: Mapping[str, Any], where: str, seen: set[str], init: Mapping[str, Any] | None
) -> str:
    """A model entry's name (``INPUT__COT``, ``INIT+grpo`` unless named), added to ``seen``.

    Raises:
        LakeshiftError: a name that is not one folder name, or one used by an earlier entry.
    """
    zero_shot = bool(entry.get("zero_shot", False))
    name = entry.get("name") or f"{entry['input']}__{entry['cot']}" + ("__zero-shot" if zero_shot else "")
    if init is not None:
        # Named after its init, so the report's rows sort SFT, then SFT+GRPO, side by side.
        name = entry.get("name") or f"{entry['init']}+grpo"
    if not MODEL_NAME.fullmatch(name):
        raise cfg.error(
            f"{where}.name",
            f"model name {name!r} must be one folder name (letters, digits, . _ + @ = -; starting with a "
            "letter or digit): it names the model's folders inside the workdir",
        )
    if name in seen:
        raise cfg.error(
            f"{where}.name", f"model name {name!r} is used twice; give each model a distinct name"
        )
    seen.add(name)
    return name


def check_entry(cfg: SourcedConfig, entry: Any, where: str) -> Mapping[str, Any]:
    """A ``models:`` item: a mapping of :class:`~lakeshift.studies.schema.ModelEntry` keys."""
    if not isinstance(entry, Mapping):
        raise cfg.error(where, "expected a mapping with at least 'input' and 'cot'")
    check_config(cfg, entry, ModelEntry, MODEL_KEYS, where)
    return entry


def as_number(cfg: SourcedConfig, value: Any, path: str) -> float:
    """YAML 1.1 reads ``1e-3`` as a string: accept numeric strings for float options."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise cfg.error(path, f"expected a number, got {value!r}") from None


def check_predict(cfg: SourcedConfig, section: Mapping[str, Any], where: str) -> None:
    """A ``predict:`` section: ``splits`` a list of names, the rest ``lakeshift predict`` options."""
    splits = section.get("splits")
    if splits is not None and not (isinstance(splits, list) and all(isinstance(s, str) for s in splits)):
        raise cfg.error(f"{where}.splits", f"expected a list of split names, got {splits!r}")
    if splits == []:  # would mean the default, id-test
        raise cfg.error(f"{where}.splits", "no split named (leave splits out to predict id-test)")
    options = {k: v for k, v in section.items() if k != "splits"}
    check_config(cfg, options, PredictOptions, PREDICT_KEYS, where)


def init_of(
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
    """What GRPO needs beyond each option's own rule (``num_generations``' rule asks for two completions
    per prompt, at least): rewards that parse."""
    if tcfg.get("reward") is not None:
        from lakeshift.models.rewards import parse_rewards

        try:
            parse_rewards(str(tcfg["reward"]), cot=cot, option="reward:")
        except LakeshiftError as err:
            raise cfg.error(f"{where}.reward", str(err)) from None


def check_argv(cfg: SourcedConfig, stage: Stage, where: str) -> None:
    """A stage's command line parses as the command would parse it (numbers in range, known choices).

    Raises:
        LakeshiftError: naming the config key the stage comes from and what the command would say.
    """
    from lakeshift.cli import check_argv

    try:
        check_argv(stage.argv)
    except LakeshiftError as err:
        raise cfg.error(where, f"its {stage.kind} stage would fail: {err}") from None


def check_sft_model(
    cfg: SourcedConfig,
    entry: Mapping[str, Any],
    where: str,
    tcfg: Mapping[str, Any],
    groups: Mapping[str, list[tuple[int, int]]],
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
            cells.check_sizes(model_type, [n for n, _ in groups.get(split, [])], f"split {split}")
        except LakeshiftError as err:
            raise cfg.error(key, f"{name}: {err}") from None
    max_length = tcfg.get("max_length")
    sizes = [n for n, _ in groups.get(train_split, [])]
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


def check_formats(cfg: SourcedConfig, entry: Mapping[str, Any], where: str, dcfg: Mapping[str, Any]) -> None:
    """A model entry's input and CoT formats exist and are among those its data (``dcfg``) writes."""
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
    if entry["input"] == "image" and not dcfg.get("images", DataSection.images):
        raise cfg.error(f"{where}.input", "image input needs images: set data.images: true")
    for key, field_name in (("inputs", "input"), ("cots", "cot")):
        if dcfg.get(key) and entry[field_name] not in dcfg[key]:
            raise cfg.error(
                f"{where}.{field_name}",
                f"{entry[field_name]!r} is not among the formats the data writes (data.{key}: {dcfg[key]})",
            )


def train_config(
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


def check_decoding(cfg: SourcedConfig, pcfg: Mapping[str, Any], entry: Mapping[str, Any], where: str) -> None:
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


@dataclass
class ExtendedConfig(SourcedConfig):
    """A study config merged with the configs it ``extends``."""

    #: The names of the studies it extends, nearest first: it may share their workdir (their data stage).
    bases: tuple[str, ...] = ()


def bases_of(cfg: SourcedConfig) -> tuple[str, ...]:
    """The names of the studies ``cfg`` extends (none unless it was read by :func:`read_study_config`)."""
    return cfg.bases if isinstance(cfg, ExtendedConfig) else ()


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
    name = base.data.get("name")
    bases = (*([name] if isinstance(name, str) else []), *bases_of(base))
    return ExtendedConfig(merged.path, merged.data, merged.lines, merged.files, bases)
