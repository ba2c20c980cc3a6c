"""What a study config may hold, section by section, declared as options (:mod:`lakeshift.options`).

Each section is a dataclass of option fields whose metadata says what a value must be (a number rule, a
choice, true or false, a string, a mapping or a list): the top level (:class:`StudyConfig`), ``data:``
(``lakeshift generate``'s options and the study's own, :class:`DataSection`), each ``models:`` entry
(:class:`ModelEntry`) and ``report:`` (``lakeshift report``'s). The ``train:`` and ``predict:`` sections
hold ``lakeshift train`` and ``lakeshift predict`` options, declared with the commands. A section is checked
with :func:`lakeshift.options.check_config` against the keys listed here, each error naming file, line and
key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakeshift.config import PLAIN_NAME, name_problem
from lakeshift.data.options import GenerateOptions
from lakeshift.models.grpo import GrpoOptions
from lakeshift.models.predict import PredictOptions
from lakeshift.models.train_options import TrainOptions
from lakeshift.options import config_keys, instance_of, option
from lakeshift.report.options import ReportOptions

#: A study config's mapping sections and its list of models.
_MAPPING = instance_of(dict)


def _plain_name(value: Any, path: str) -> str | None:
    """The ``check`` of a study's name, which names its default workdir and is recorded in its markers."""
    problem = name_problem(value, "study name")
    return f"{path}: {problem}" if problem else None


@dataclass
class StudyConfig:
    """The top level of a study config."""

    extends: str | None = option(help="a study config this one starts from", study=True)
    name: str | None = option(
        check=_plain_name, help="the study's name (its default workdir runs/NAME)", study=True
    )
    workdir: str | None = option(help="where everything the study writes goes", study=True)
    data: dict[str, Any] | None = option(check=_MAPPING, help="the suite (DataSection)", study=True)
    train: dict[str, Any] | None = option(check=_MAPPING, help="training defaults", study=True)
    predict: dict[str, Any] | None = option(check=_MAPPING, help="prediction defaults", study=True)
    models: list[Any] | None = option(check=instance_of(list), help="the model entries", study=True)
    report: dict[str, Any] | None = option(check=_MAPPING, help="lakeshift report options", study=True)
    budget_minutes: float | None = option(
        rule="positive_float", help="refuse a plan estimated to take longer", study=True
    )
    train_jobs: int = option(1, rule="workers", help="SFT training stages run at once", study=True)


#: The top-level keys of a study config.
TOP_KEYS: list[str] = config_keys(StudyConfig, "study")
#: The keys every study has (its own or those of the study it ``extends``).
REQUIRED_KEYS = ("name", "data", "models")
#: The sections a study that ``extends`` another merges key by key with the other's (the rest it replaces).
MERGED_SECTIONS = ("data", "train", "predict", "report")
#: What a study does when ``data.id_source`` is not a folder here: stop, or generate id-train and id-test.
ID_SOURCE_MISSING = ("error", "generate")


@dataclass
class DataSection(GenerateOptions):
    """A study's ``data:`` section: the ``lakeshift generate`` options a study may set, and its own keys."""

    splits: list[Any] | None = option(
        check=instance_of(list), help="inline split specs instead of a suite (a suite file's)", study=True
    )
    id_source_missing: str = option(
        ID_SOURCE_MISSING[0],
        choices=ID_SOURCE_MISSING,
        help="what to do when id_source is not a folder here",
        study=True,
    )
    # A study writes no images unless asked (its models are mostly text models).
    images: bool = option(False, kind="toggle", help="render PNGs (image-input models need them)", study=True)


#: The keys of a ``data:`` section.
DATA_KEYS: list[str] = config_keys(DataSection, "study")

#: How a model entry gets its model: fine-tuned (sft), GRPO from an earlier entry, or that entry's as it is.
METHODS = ("sft", "grpo", "predict")


@dataclass
class ModelEntry:
    """One item of a study's ``models:`` list."""

    name: str | None = option(help="its folders' name (default INPUT__COT)", study=True)
    input: str | None = option(help="input format", study=True)
    cot: str | None = option(help="CoT format", study=True)
    zero_shot: bool = option(
        False, kind="flag", help="an untrained model (a checkpoint or an API)", study=True
    )
    model: str | None = option(help="the model it trains or asks", study=True)
    backend: str | None = option(help="lakeshift predict --backend", study=True)
    base_url: str | None = option(help="lakeshift predict --base-url", study=True)
    train: dict[str, Any] | None = option(check=_MAPPING, help="its training options", study=True)
    predict: dict[str, Any] | None = option(check=_MAPPING, help="its prediction options", study=True)
    method: str | None = option(help=f"one of {', '.join(METHODS)} (default sft)", study=True)
    init: str | None = option(help="the earlier entry a grpo or predict entry starts from", study=True)


#: The keys of a model entry.
MODEL_KEYS: list[str] = config_keys(ModelEntry, "study")
#: The ``train:`` keys of the study's defaults and of an SFT entry: the options of ``lakeshift train`` a study
#: may set (their types, ranges and choices are the options' own, :func:`lakeshift.options.check_config`).
TRAIN_KEYS: list[str] = config_keys(TrainOptions, "study")
#: The keys of a ``predict:`` section: ``splits`` (one stage per split) and the ``lakeshift predict`` options
#: a study may set (their types, ranges and choices are the options' own).
PREDICT_KEYS: list[str] = ["splits", *config_keys(PredictOptions, "study")]
#: The ``train:`` keys of a ``method: grpo`` entry (``lakeshift train --method grpo`` options; its model
#: is its init). GRPO entries take only ``split`` and ``seed`` from the study's ``train:`` defaults, which
#: are SFT hyper-parameters.
GRPO_TRAIN_KEYS: list[str] = config_keys(GrpoOptions, "study", exclude=("model",))
#: The keys of a ``report:`` section: the ``lakeshift report`` options a study may set.
REPORT_KEYS: list[str] = config_keys(ReportOptions, "study")
#: A model entry's name: it becomes one folder name under ``WORKDIR/models`` and ``WORKDIR/predictions``.
MODEL_NAME = PLAIN_NAME
