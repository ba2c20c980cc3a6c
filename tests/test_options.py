"""Options declared once (lakeshift.options): the command lines of ``lakeshift train``, ``predict``,
``generate`` and ``report``, the sections of a study config and a pretraining config's ``train:`` are made
from the same dataclass fields, so they accept and refuse the same values, and a study writes a command line
that parses back to the options it meant."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift.cli import check_argv
from lakeshift.config import NUMBER_RULES, load_yaml, number_problem, number_type
from lakeshift.data.options import GenerateOptions
from lakeshift.errors import LakeshiftError
from lakeshift.models.grpo import GrpoOptions
from lakeshift.models.predict import PredictOptions, parse_shard_option
from lakeshift.models.pretrain import TRAIN_KEYS as PRETRAIN_KEYS
from lakeshift.models.train_options import TrainOptions
from lakeshift.options import check_config, from_values, option, options_of, to_argv
from lakeshift.report.options import ReportOptions
from lakeshift.studies.schema import (
    DATA_KEYS,
    GRPO_TRAIN_KEYS,
    MODEL_KEYS,
    PREDICT_KEYS,
    REPORT_KEYS,
    TOP_KEYS,
    TRAIN_KEYS,
)

REQUIRED = {"data": "D", "input_format": "grid", "cot_format": "none", "model": "tiny", "out": "R"}
#: Each command's options: its command line before them, and the values of its required ones.
COMMANDS: dict[type, tuple[list[str], dict[str, Any]]] = {
    TrainOptions: (["train"], REQUIRED),
    GrpoOptions: (["train", "--method", "grpo"], REQUIRED),
    PredictOptions: (["predict"], {"data": "D", "model": "R", "out": "P.jsonl"}),
    GenerateOptions: (["generate"], {"out": Path("D")}),
    ReportOptions: (["report"], {"runs_dir": Path("P"), "out": Path("R")}),
}
BAD_NUMBERS = {
    "positive_int": [0, -3, 2.5, "x", 2**31, 10**30],
    "nonnegative_int": [-1, 1.5, 10**30],
    "positive_float": [0, -0.1, "nan", "fast", 1e300],
    "nonnegative_float": [-1e-9, "x", "1e300"],
    "probability": [0, 1.5],
    "hole_probability": [-0.1, 1, "x"],
    "map_size": [1, 2.5, "x", 10**6],
    "seed": [-1, 2**32],
    "batch_size": [0, 10**30],
    "generations": [1, 65537, 10**30],
    "tokens": [0, 2**31, 10**30],
    "samples": [0, 10**12],
    "lora_rank": [0, 10**9],
    "workers": [0, 10**9],
    "retries": [-1, 10**4],
    "seconds": [0, "1e300", "inf"],
}


def _argv(cls: type, options: dict[str, Any]) -> list[str]:
    """The command line of ``options`` for the command whose options ``cls`` holds."""
    command, required = COMMANDS[cls]
    return [*command, *to_argv({**required, **options}, cls)]


def _config(tmp_path: Path, section: dict[str, Any]) -> Any:
    path = tmp_path / "c.yaml"
    path.write_text("train:\n" + "".join(f"  {k}: {v!r}\n" for k, v in section.items()))
    return load_yaml(path)


def test_every_rule_has_bad_values_here() -> None:
    assert set(BAD_NUMBERS) == set(NUMBER_RULES)


@pytest.mark.parametrize("rule", sorted(NUMBER_RULES))
def test_a_rule_refuses_a_value_with_the_same_words_on_the_command_line_and_in_a_config(rule: str) -> None:
    for value in BAD_NUMBERS[rule]:
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            number_type(rule)(str(value))
        problem = number_problem(value, rule)
        assert problem and str(refused.value).split(", got ")[0] == problem.split(", got ")[0]
    low = NUMBER_RULES[rule].low
    smallest = low if NUMBER_RULES[rule].low_inclusive else low + 0.5
    assert number_type(rule)(str(smallest)) == smallest and number_problem(smallest, rule) is None


@pytest.mark.parametrize("rule", sorted(NUMBER_RULES))
def test_every_rule_has_an_upper_bound_and_takes_it_on_both_sides(rule: str) -> None:
    kind, _, _, high, _, maximum, _ = NUMBER_RULES[rule]
    assert high is not None or maximum is not None
    if maximum is None:
        return
    largest = kind(maximum)
    assert number_type(rule)(str(largest)) == largest and number_problem(largest, rule) is None
    above = largest + 1
    with pytest.raises(argparse.ArgumentTypeError, match=rf"must be at most {int(maximum)} \("):
        number_type(rule)(str(above))
    problem = number_problem(above, rule)
    assert problem and problem.startswith(f"must be at most {int(maximum)} (")


def _checked(cls: type, names: list[str]) -> list[tuple[type, str]]:
    """The options of ``names`` whose values are checked: a number rule or choices."""
    fields = options_of(cls)
    return [(cls, n) for n in names if fields[n][1].rule is not None or fields[n][1].choices is not None]


@pytest.mark.parametrize(
    ("cls", "name"),
    _checked(TrainOptions, list(options_of(TrainOptions)))
    + _checked(GrpoOptions, [n for n in options_of(GrpoOptions) if n not in options_of(TrainOptions)])
    + _checked(PredictOptions, list(options_of(PredictOptions)))
    + _checked(GenerateOptions, list(options_of(GenerateOptions)))
    + _checked(ReportOptions, list(options_of(ReportOptions))),
)
def test_the_command_line_and_the_configs_refuse_the_same_values(
    cls: type, name: str, tmp_path: Path
) -> None:
    opt = options_of(cls)[name][1]
    bad: list[Any] = BAD_NUMBERS[opt.rule] if opt.rule is not None else ["bogus"]
    for value in bad:
        assert number_problem(value, opt.rule) if opt.rule else value not in opt.choices
        with pytest.raises(LakeshiftError):
            check_argv(_argv(cls, {name: [value] if opt.nargs else value}))
        cfg = _config(tmp_path, {name: value})
        with pytest.raises(LakeshiftError, match=rf"c\.yaml:2: train\.{name}: "):
            check_config(cfg, cfg.data["train"], cls, list(options_of(cls)), "train")


def test_a_config_names_unknown_keys_and_wrong_types(tmp_path: Path) -> None:
    cfg = _config(tmp_path, {"lr": "1e-3", "lora": 1, "lr_peak": 2})
    train = cfg.data["train"]
    with pytest.raises(LakeshiftError, match=r":3: train\.lora: expected true or false, got 1"):
        check_config(cfg, train, TrainOptions, TRAIN_KEYS, "train")
    del train["lora"]
    with pytest.raises(LakeshiftError, match=r":4: train\.lr_peak: unknown key 'lr_peak' \(allowed: "):
        check_config(cfg, train, TrainOptions, TRAIN_KEYS, "train")
    del train["lr_peak"]
    assert check_config(cfg, train, TrainOptions, TRAIN_KEYS, "train") == {"lr": 0.001}  # YAML 1.1's string


def test_which_options_each_config_may_set() -> None:
    assert set(TRAIN_KEYS) == {
        "model", "split", "preset", "epochs", "max_steps", "batch_size", "grad_accum", "lr", "warmup_steps",
        "weight_decay", "seed", "limit", "lora", "max_length", "prompt", "max_minutes", "tokenizer",
        "cells", "vision_tower",
    }  # fmt: skip
    assert set(GRPO_TRAIN_KEYS) == {
        "split", "seed", "prompt", "reward", "num_generations", "max_completion_length", "temperature",
        "top_p", "beta", "epochs", "max_steps", "max_minutes", "batch_size", "grad_accum", "lr",
        "warmup_steps", "weight_decay", "limit", "lora",
    }  # fmt: skip
    assert set(PREDICT_KEYS) == {
        "splits", "per_size", "limit", "backend", "batch_size", "engine", "max_new_tokens", "temperature",
        "base_url", "api_key_env", "concurrency", "prompt", "decoding", "samples",
    }  # fmt: skip
    assert set(DATA_KEYS) == {
        "suite", "splits", "seed", "id_source", "id_source_missing", "images", "workers", "inputs", "cots",
    }  # fmt: skip
    assert set(MODEL_KEYS) == {
        "name", "input", "cot", "zero_shot", "model", "backend", "base_url", "train", "predict", "method",
        "init",
    }  # fmt: skip
    assert set(REPORT_KEYS) == {"baselines", "examples", "train_maps", "reference"}
    assert set(TOP_KEYS) == {
        "extends", "name", "workdir", "data", "train", "predict", "models", "report", "budget_minutes",
        "train_jobs",
    }  # fmt: skip
    assert set(PRETRAIN_KEYS) == {
        "model", "batch_size", "lr", "epochs", "max_minutes", "max_steps", "warmup_steps", "weight_decay",
        "seed", "bf16", "cells", "save_steps", "vision_tower",
    }  # fmt: skip


@pytest.mark.parametrize("default", [None, True])
def test_a_flag_is_declared_off_by_default_so_false_always_means_its_default(default: Any) -> None:
    with pytest.raises(ValueError, match="declare it a toggle"):
        option(default, kind="flag")
    for cls in COMMANDS:
        assert all(f.default is False for f, opt in options_of(cls).values() if opt.kind == "flag")


def test_a_toggle_set_false_is_written_off_and_a_flag_set_false_is_left_out() -> None:
    argv = to_argv({"lora": False, "bf16": False, "gradient_checkpointing": True}, TrainOptions)
    assert argv == ["--no-bf16", "--gradient-checkpointing"]
    parsed = from_values(TrainOptions, vars(check_argv(_argv(TrainOptions, {"bf16": False}))))
    assert parsed.bf16 is False and parsed.lora is False


def _value(cls: type, name: str) -> st.SearchStrategy[Any]:
    f, opt = options_of(cls)[name]
    if opt.kind == "flag":
        return st.sampled_from([f.default, True])
    if opt.kind == "toggle":
        return st.sampled_from([None, True, False])
    if opt.choices is not None:
        return st.sampled_from([f.default, *opt.choices])
    if opt.parse is parse_shard_option:  # I/N
        shards = st.integers(1, 64).flatmap(lambda n: st.integers(1, n).map(lambda i: f"{i}/{n}"))
        return st.one_of(st.none(), shards)
    if opt.rule is not None:
        rule = NUMBER_RULES[opt.rule]
        high = rule.high if rule.high is not None else min(rule.maximum or 10**6, 10**6)
        number: st.SearchStrategy[Any] = (
            st.integers(int(rule.low) + (not rule.low_inclusive), int(high) - (not rule.high_inclusive))
            if rule.kind is int
            else st.floats(min_value=1e-6, max_value=high, exclude_max=not rule.high_inclusive)
        )
        if opt.nargs:  # sizes: --sizes 3 4
            number = st.lists(number, min_size=1, max_size=4)
        return st.one_of(st.just(f.default), number)
    if opt.write is not None:  # cells: the spec's fields to change
        fields = st.fixed_dictionaries(
            {},
            optional={
                "grids": st.sampled_from(["first", "every", "next"]),
                "walk": st.sampled_from(["none", "answer", "trace"]),
                "maps": st.sampled_from([["grid"], ["grid", "table", "desc"]]),
                "order": st.booleans(),
            },
        )
        return st.one_of(st.none(), fields.filter(bool))
    if opt.parse is Path:
        return st.one_of(st.just(f.default), st.text("abcdefgh/_.", min_size=1, max_size=8).map(Path))
    if opt.parse is not None and opt.check is not None:  # a list of formats: some of the default's
        return st.lists(st.sampled_from(f.default), min_size=1, unique=True).map(tuple)
    if opt.parse is not None:  # sizes
        return st.one_of(st.none(), st.lists(st.integers(2, 30), min_size=1, unique=True).map(sorted))
    return st.one_of(st.just(f.default), st.text("abcdefgh/_.", min_size=1, max_size=8))


@pytest.mark.parametrize("cls", list(COMMANDS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_options_written_as_a_command_line_parse_back_to_themselves(cls: type, data: st.DataObject) -> None:
    required = COMMANDS[cls][1]
    values = {
        name: data.draw(_value(cls, name), label=name) for name in options_of(cls) if name not in required
    }
    argv = _argv(cls, values)
    assert from_values(cls, vars(check_argv(argv))) == from_values(cls, {**required, **values})
