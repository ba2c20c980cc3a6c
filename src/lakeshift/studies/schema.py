"""The keys a study config may hold, per section, with the type and range each value must have.

The ``train:`` and ``predict:`` sections hold ``lakeshift train`` and ``lakeshift predict`` options, declared
once with the commands' own (:mod:`lakeshift.options`); the other sections are listed here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lakeshift.config import SourcedConfig
from lakeshift.models.grpo import GrpoOptions
from lakeshift.models.predict import PredictOptions
from lakeshift.models.train import TrainOptions
from lakeshift.options import config_keys

KNOWN_SPLITS = ("id-train", "id-test", "ood-size", "ood-dist", "embed10-train", "embed10-test")

# Allowed keys per section, with the type a value must have (None: any).
TOP_KEYS = {
    "extends": str,
    "name": str,
    "workdir": str,
    "data": dict,
    "train": dict,
    "predict": dict,
    "models": list,
    "report": dict,
    "budget_minutes": (int, float),
    "train_jobs": int,
}
#: The sections a study that ``extends`` another merges key by key with the other's (the rest it replaces).
MERGED_SECTIONS = ("data", "train", "predict", "report")
DATA_KEYS = {
    "suite": str, "splits": list, "seed": int, "id_source": str, "id_source_missing": str, "images": bool,
    "workers": int, "inputs": list, "cots": list,
}  # fmt: skip
#: What a study does when ``data.id_source`` is not a folder here: stop, or generate id-train and id-test.
ID_SOURCE_MISSING = ("error", "generate")
#: The ``train:`` keys of the study's defaults and of an SFT entry: the options of ``lakeshift train`` a study
#: may set (their types, ranges and choices are the options' own, :func:`lakeshift.options.check_config`).
TRAIN_KEYS: list[str] = config_keys(TrainOptions, "study")
#: The keys of a ``predict:`` section: ``splits`` (one stage per split) and the ``lakeshift predict`` options
#: a study may set (their types, ranges and choices are the options' own).
PREDICT_KEYS: list[str] = ["splits", *config_keys(PredictOptions, "study")]
#: How a model entry gets its model: fine-tuned (sft), GRPO from an earlier entry, or that entry's as it is.
METHODS = ("sft", "grpo", "predict")
MODEL_KEYS = {
    "name": str, "input": str, "cot": str, "zero_shot": bool, "model": str, "backend": str, "base_url": str,
    "train": dict, "predict": dict, "method": str, "init": str,
}  # fmt: skip
#: The ``train:`` keys of a ``method: grpo`` entry (``lakeshift train --method grpo`` options; its model
#: is its init). GRPO entries take only ``split`` and ``seed`` from the study's ``train:`` defaults, which
#: are SFT hyper-parameters.
GRPO_TRAIN_KEYS: list[str] = config_keys(GrpoOptions, "study", exclude=("model",))
#: A model entry's name: it becomes one folder name under ``WORKDIR/models`` and ``WORKDIR/predictions``.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@=-]*")
REPORT_KEYS = {"baselines": bool, "examples": int, "train_maps": str, "reference": str}
# The range every numeric key of the other sections must be in (lakeshift.config.NUMBER_RULES), checked with
# the types above, so a `workers: 0` or `examples: true` is an error naming its line before any stage runs.
NUMBER_KEYS = {
    "workers": "positive_int", "examples": "nonnegative_int", "seed": "seed",
    "budget_minutes": "positive_float", "train_jobs": "positive_int",
}  # fmt: skip


def check_keys(cfg: SourcedConfig, section: Mapping, allowed: Mapping[str, Any], where: str) -> None:
    for key, value in section.items():
        path = f"{where}.{key}" if where else key
        if key not in allowed:
            raise cfg.error(path, f"unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")
        expected = allowed[key]
        if value is not None and expected is not None and not isinstance(value, expected):
            names = (
                expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
            )
            raise cfg.error(path, f"expected {names}, got {type(value).__name__} {value!r}")
        if isinstance(value, bool) and expected in (int, (int, float)):
            raise cfg.error(path, f"expected a number, got {value!r}")
        if value is not None and key in NUMBER_KEYS:
            cfg.check_number(path, value, NUMBER_KEYS[key])


def as_number(cfg: SourcedConfig, value: Any, path: str) -> float:
    """YAML 1.1 reads ``1e-3`` as a string: accept numeric strings for float options."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise cfg.error(path, f"expected a number, got {value!r}") from None
