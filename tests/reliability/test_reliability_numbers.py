"""Every number is validated before any work, on the command line and in YAML configs.

Each bad value is one line naming the option (or file, line and key), exit status 2, no traceback, and
nothing written: no run folder, no data folder, no stage marker.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakeshift.cli import main
from lakeshift.config import number_problem, number_type
from lakeshift.errors import LakeshiftError
from lakeshift.models.predict import bounded_max_new_tokens
from lakeshift.models.registry import resolve_model
from tests.cli_checks import one_error_line, quiet_main

nonnegative_int, positive_float, positive_int, probability = map(
    number_type, ("nonnegative_int", "positive_float", "positive_int", "probability")
)

TRAIN = ["train", "--data", "DATA", "--input", "grid", "--cot", "none", "--model", "micro", "--out", "OUT"]
PREDICT = ["predict", "--model", "MODEL", "--data", "DATA", "--out", "OUT"]
GENERATE = ["generate", "--out", "OUT", "--split", "s", "--no-images", "--workers", "1"]
GRPO = [*TRAIN, "--method", "grpo"]
BASELINE = ["baseline", "--maps", "MAPS", "--policy", "random", "--out", "OUT"]

BAD_OPTIONS = [
    (TRAIN, "--batch-size", "0"),
    (TRAIN, "--batch-size", "-2"),
    (TRAIN, "--grad-accum", "0"),
    (TRAIN, "--max-steps", "0"),  # used to mean "no limit": trained 3 epochs
    (TRAIN, "--max-steps", "-5"),
    (TRAIN, "--epochs", "0"),  # used to save an untrained model
    (TRAIN, "--epochs", "-1"),
    (TRAIN, "--epochs", "nan"),
    (TRAIN, "--lr", "0"),
    (TRAIN, "--lr", "-1e-3"),
    (TRAIN, "--lr", "inf"),
    (TRAIN, "--save-steps", "0"),
    (TRAIN, "--logging-steps", "0"),
    (TRAIN, "--limit", "0"),
    (TRAIN, "--max-minutes", "0"),
    (TRAIN, "--warmup-steps", "-1"),
    (TRAIN, "--weight-decay", "-0.1"),
    (TRAIN, "--max-length", "0"),
    (TRAIN, "--seed", "-1"),  # numpy's seed range: a traceback inside the trainer before
    (PREDICT, "--seed", str(2**32)),
    (PREDICT, "--limit", "0"),
    (PREDICT, "--per-size", "-1"),
    (PREDICT, "--max-new-tokens", "0"),
    (PREDICT, "--max-new-tokens", "ten"),
    (PREDICT, "--batch-size", "0"),
    (PREDICT, "--top-p", "0"),
    (PREDICT, "--top-p", "1.01"),
    (PREDICT, "--top-p", "-0.5"),
    (PREDICT, "--temperature", "-1"),
    (PREDICT, "--concurrency", "0"),
    (PREDICT, "--timeout", "0"),
    (GRPO, "--num-generations", "1"),  # GRPO compares a prompt's completions with each other
    (GRPO, "--max-completion-length", "0"),
    (BASELINE, "--seed", "-1"),
    (BASELINE, "--seed", str(2**32)),
    (["report", "RUNS", "--out", "OUT"], "--examples", "-1"),
    ([*GENERATE, "--sizes", "3"], "--count", "0"),
    ([*GENERATE, "--count", "3"], "--sizes", "1"),
    ([*GENERATE, "--sizes", "3", "--count", "2"], "--hole-prob", "1"),
    ([*GENERATE, "--sizes", "3", "--count", "2"], "--workers", "0"),
]


def _concrete(argv: list[str], tmp_path: Path) -> list[str]:
    names = {"DATA": "data", "OUT": "out", "MODEL": "model", "RUNS": "runs", "MAPS": "maps.jsonl"}
    return [str(tmp_path / names[a]) if a in names else a for a in argv]


@pytest.mark.parametrize(("base", "option", "value"), BAD_OPTIONS)
def test_bad_number_is_one_line_exit_2_before_any_work(
    base: list[str], option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_concrete(base, tmp_path), f"{option}={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"argument {option}" in err and repr(value) in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing was written


HUGE = str(10**30)
#: Values that pass a lower bound but no machine can honour: each used to fail deep in the run (a traceback,
#: an allocation of hundreds of GB, an overflow) instead of being refused.
HUGE_OPTIONS = [
    (TRAIN, "--batch-size", HUGE),
    (TRAIN, "--max-steps", HUGE),
    (TRAIN, "--lora-r", str(10**9)),
    (TRAIN, "--max-length", str(2**31)),
    (TRAIN, "--epochs", "1e300"),
    (GRPO, "--num-generations", str(10**5)),
    (GRPO, "--max-completion-length", str(2**21)),
    (PREDICT, "--batch-size", HUGE),
    (PREDICT, "--max-new-tokens", str(2**31)),
    (PREDICT, "--max-new-tokens", HUGE),
    (PREDICT, "--samples", str(10**12)),
    (PREDICT, "--timeout", "1e300"),
    (PREDICT, "--concurrency", str(10**9)),
    (PREDICT, "--max-retries", str(10**4)),
    (PREDICT, "--temperature", "1e300"),
    (PREDICT, "--limit", HUGE),
    (PREDICT, "--shard", f"1/{HUGE}"),
    (PREDICT, "--sizes", HUGE),
    ([*GENERATE, "--sizes", "3", "--count", "2"], "--workers", str(10**9)),
    ([*GENERATE, "--sizes", "3"], "--count", HUGE),
]


@pytest.mark.parametrize(("base", "option", "value"), HUGE_OPTIONS)
def test_a_number_no_machine_can_honour_is_one_line_exit_2_before_any_work(
    base: list[str], option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_concrete(base, tmp_path), f"{option}={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"argument {option}" in err and "at most" in err and value in err
    assert list(tmp_path.iterdir()) == []


def test_the_console_script_prints_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lakeshift.cli", *_concrete(TRAIN, tmp_path), "--max-steps", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "lakeshift train: error: argument --max-steps: must be an integer >= 1, got '0' "
        "(see lakeshift train --help)\n"
    )
    assert not (tmp_path / "out").exists()


@given(st.integers(-(10**6), 10**6))
def test_validators_accept_exactly_their_range(n: int) -> None:
    for validator, ok in ((positive_int, n >= 1), (nonnegative_int, n >= 0), (positive_float, n > 0)):
        if ok:
            assert validator(str(n)) == n
        else:
            with pytest.raises(argparse.ArgumentTypeError):
                validator(str(n))
    assert number_problem(n, "positive_int") is None if n >= 1 else number_problem(n, "positive_int")


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-2, max_value=2))
def test_probability_is_the_half_open_unit_interval(p: float) -> None:
    if 0 < p <= 1:
        assert probability(repr(p)) == p
        assert number_problem(p, "probability") is None
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            probability(repr(p))
        assert number_problem(p, "probability")


STUDY = """\
name: bad
data:
  splits:
    - name: id-train
      train: true
      groups:
        - {{size: 3, count: {count}, hole_prob: 0.2}}
    - name: id-test
      groups:
        - {{size: 3, count: 2, hole_prob: 0.2}}
  workers: 1
train:
  model: micro
{train}
predict:
  splits: [id-test]
{predict}
models:
  - {{input: grid, cot: none}}
"""


@pytest.mark.parametrize(
    ("count", "train", "predict", "message"),
    [
        ("true", "", "", "count must be an integer >= 1, got True"),
        ("0", "", "", "count must be an integer >= 1, got 0"),
        ("4", "  batch_size: 0", "", ":14: train.batch_size: must be an integer >= 1, got 0"),
        ("4", "  max_steps: true", "", ":14: train.max_steps: expected a number, got True"),
        ("4", "  epochs: 0", "", ":14: train.epochs: must be a number > 0, got 0"),
        ("4", "  lr: -1e-3", "", ":14: train.lr: must be a number > 0, got '-1e-3'"),
        ("4", "  grad_accum: -1", "", ":14: train.grad_accum: must be an integer >= 1, got -1"),
        ("4", "", "  max_new_tokens: 0", ":17: predict.max_new_tokens: must be an integer >= 1, got 0"),
        ("4", "", "  per_size: 0", ":17: predict.per_size: must be an integer >= 1, got 0"),
        ("4", "", "  limit: true", ":17: predict.limit: expected a number, got True"),
    ],
)
def test_bad_numbers_in_a_study_name_file_line_and_key(
    count: str, train: str, predict: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.format(count=count, train=train, predict=predict))
    workdir = tmp_path / "work"
    assert main(["run", str(path), "--workdir", str(workdir)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not workdir.exists()


def test_report_examples_zero_is_kept_not_replaced_by_the_default(tmp_path: Path) -> None:
    from lakeshift.studies import load_study

    path = tmp_path / "study.yaml"
    path.write_text(STUDY.format(count=4, train="", predict="") + "report:\n  examples: 0\n")
    report = load_study(path, tmp_path / "work").stages[-1]
    assert report.argv[report.argv.index("--examples") + 1] == "0"


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("{size: 3, count: true, hole_prob: 0.2}", "count must be an integer >= 1, got True"),
        ("{size: 3, count: 0, hole_prob: 0.2}", "count must be an integer >= 1, got 0"),
        ("{size: true, count: 2, hole_prob: 0.2}", "size must be an integer >= 2, got True"),
        ("{size: 3, count: 2, hole_prob: true}", "hole_prob must be a probability in [0, 1), got True"),
        ("{size: 3, count: 2, hole_prob: 0.2, d_inf_min: 1.5}", "d_inf_min must be an integer, got 1.5"),
    ],
)
def test_bad_numbers_in_a_suite_file(
    group: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(textwrap.dedent(f"splits:\n  - name: s\n    groups:\n      - {group}\n"))
    out = tmp_path / "out"
    assert main(["generate", "--suite", str(suite), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("train", "predict", "message"),
    [
        ("  batch_size: 1000000000000000000000000000000", "", ":14: train.batch_size: must be at most 65536"),
        ("  max_steps: 1000000000000000000000000000000", "", ":14: train.max_steps: must be at most"),
        ("  epochs: 1e300", "", ":14: train.epochs: must be at most"),
        ("", "  max_new_tokens: 2147483648", ":17: predict.max_new_tokens: must be at most 1048576"),
        ("", "  samples: 1000000000000", ":17: predict.samples: must be at most 1024"),
        ("", "  batch_size: 1000000000000000000000000000000", ":17: predict.batch_size: must be at most"),
    ],
)
def test_a_number_no_machine_can_honour_in_a_study_names_file_line_and_key(
    train: str, predict: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.format(count=4, train=train, predict=predict))
    workdir = tmp_path / "work"
    assert main(["run", str(path), "--workdir", str(workdir)]) == 2
    err = capsys.readouterr().err
    assert str(path) + message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not workdir.exists()


def test_train_jobs_no_machine_can_run_at_once_names_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text("train_jobs: 100000\n" + STUDY.format(count=4, train="", predict=""))
    workdir = tmp_path / "work"
    assert main(["run", str(path), "--workdir", str(workdir)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: train_jobs: must be at most 1024" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not workdir.exists()


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("numbers") / "data"
    argv = [*GENERATE, "--sizes", "3", "--count", "2", "--inputs", "grid", "--cots", "none", "--no-progress"]
    assert main([str(out) if a == "OUT" else a for a in argv]) == 0
    return out


def test_max_new_tokens_beyond_the_model_s_context_is_refused_before_any_answer(
    small_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "p.jsonl"
    argv = ["predict", "--model", "mini-cells-base", "--data", small_data, "--split", "s", "--input", "grid"]
    code, err = quiet_main([*argv, "--cot", "none", "--out", out, "--max-new-tokens", "40000"])
    one_error_line(code, err, "--max-new-tokens 40000", "32768 positions", "mini-cells-base/config.json")
    assert not out.exists()


def test_a_default_max_new_tokens_beyond_the_model_s_context_is_capped_with_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = resolve_model("mini-cells-base")
    assert bounded_max_new_tokens(None, False, spec) is None  # the openai backend sends no limit
    assert bounded_max_new_tokens(32767, True, spec) == 32767
    assert bounded_max_new_tokens(50000, False, spec) == 32767
    assert "capped at 32767" in capsys.readouterr().err
    with pytest.raises(LakeshiftError, match="--max-new-tokens 32768: the model has 32768 positions"):
        bounded_max_new_tokens(32768, True, spec)


def test_top_p_without_a_temperature_is_refused_not_dropped_unrecorded(tmp_path: Path) -> None:
    argv = [*_concrete(PREDICT, tmp_path), "--input", "grid", "--top-p", "0.9"]
    code, err = quiet_main(argv)
    one_error_line(code, err, "--top-p 0.9: nucleus sampling needs --temperature > 0")
    assert list(tmp_path.iterdir()) == []
