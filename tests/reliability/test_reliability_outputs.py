"""No input is ever overwritten by an output, and every unwritable output is one
clear line naming its path, for every writing subcommand, with nothing half-written left looking finished.

Everything runs the real CLI (``lakeshift.cli.main`` in process, one test through ``python -m
lakeshift.cli``) on real files. Read-only and full-disk cases use a 1 MiB tmpfs, which needs root: the
full-disk cases skip with a message otherwise, the read-only ones fall back to a ``chmod 555`` folder (which
binds non-root users only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_checks import ROOT, tmpfs
from model_fixtures import FakeOpenAI

from lakeshift.cli import main
from tests.cli_checks import one_error_line
from tests.suite_fixtures import ZERO_SHOT_STUDY

SUITE = """\
splits:
  - name: small-train
    train: true
    groups:
      - {size: 3, count: 3, hole_prob: 0.2}
  - name: small-test
    exclude: [small-train]
    groups:
      - {size: 4, count: 3, hole_prob: 0.1}
"""


# ----- fixtures ---------------------------------------------------------------------------------------------
@dataclass
class Inputs:
    """A small generated suite, a predictions file in a runs folder, and a fake OpenAI server."""

    root: Path
    suite: Path  # the suite file
    data: Path  # the generated suite folder
    split: Path  # data/small-test
    maps: Path  # data/small-test/maps.jsonl
    runs: Path  # runs folder with one predictions file
    preds: Path
    url: str


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inputs]:
    root = tmp_path_factory.mktemp("outputs")
    (root / "suite.yaml").write_text(SUITE)
    data = root / "data"
    argv = ["generate", "--suite", str(root / "suite.yaml"), "--out", str(data), "--workers", "1"]
    assert main([*argv, "--no-progress", "--inputs", "grid,image", "--cots", "none"]) == 0
    maps = data / "small-test" / "maps.jsonl"
    preds = root / "runs" / "oracle" / "small-test.jsonl"
    assert main(["baseline", "--maps", str(maps), "--policy", "oracle", "--out", str(preds)]) == 0
    server = FakeOpenAI({}, failures=())
    try:
        yield Inputs(
            root, root / "suite.yaml", data, data / "small-test", maps, root / "runs", preds, server.url
        )
    finally:
        server.close()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on a read-only file system (root), else a ``chmod 555`` folder (non-root)."""
    path = tmp_path / "ro"
    if not ROOT:
        path.mkdir()
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
        return
    with tmpfs(path):
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        yield path


@pytest.fixture
def full_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on a file system with no space left (a 1 MiB tmpfs filled up)."""
    with tmpfs(tmp_path / "full") as path:
        fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass  # ENOSPC: full
        finally:
            os.close(fd)
        yield path


# ----- the writing subcommands ------------------------------------------------------------------------------
@dataclass
class Writer:
    """One writing subcommand: its argv for an output inside ``where``, and what it writes there."""

    argv: Callable[[Inputs, Path], list[str | Path]]
    output: str  # name of the output inside ``where``
    kind: str  # "file" or "dir"


def _study(i: Inputs, where: Path) -> list[str | Path]:
    config = i.root / "zs.yaml"
    config.write_text(ZERO_SHOT_STUDY.format(url=i.url, name="zs", count=2))
    return ["run", config, "--workdir", where / "study"]


WRITERS: dict[str, Writer] = {
    "score": Writer(
        lambda i, w: ["score", "--maps", i.maps, "--predictions", i.preds, "--out", w / "s.jsonl"],
        "s.jsonl",
        "file",
    ),
    "baseline": Writer(
        lambda i, w: ["baseline", "--maps", i.maps, "--policy", "greedy", "--out", w / "b.jsonl"],
        "b.jsonl",
        "file",
    ),
    "report": Writer(
        lambda i, w: ["report", i.runs, "--data", i.data, "--out", w / "rep", "--examples", "2"], "rep", "dir"
    ),
    "export-parquet": Writer(lambda i, w: ["export", i.split, "--out", w / "m.parquet"], "m.parquet", "file"),
    "export-arrow": Writer(
        lambda i, w: ["export", i.split, "--sft", "image__none", "--format", "arrow", "--out", w / "arr"],
        "arr",
        "dir",
    ),
    "show": Writer(
        lambda i, w: ["show", i.split, "--id", "small-test-00000", "--format", "image", "--out", w / "m.png"],
        "m.png",
        "file",
    ),
    "generate": Writer(
        lambda i, w: ["generate", "--suite", i.suite, "--out", w / "gen", "--workers", "1", "--no-progress"],
        "gen",
        "dir",
    ),
    "predict": Writer(
        lambda i, w: [
            *("predict", "--backend", "openai", "--model", "fake", "--base-url", i.url, "--data", i.data),
            *("--split", "small-test", "--input", "grid", "--out", w / "p.jsonl"),
        ],
        "p.jsonl",
        "file",
    ),
    "run": Writer(_study, "study", "dir"),
    "train": Writer(
        lambda i, w: [
            *("train", "--data", i.data, "--split", "small-train", "--input", "grid", "--cot", "none"),
            *("--model", "micro", "--prompt", "map-only", "--max-steps", "1", "--out", w / "run"),
        ],
        "run",
        "dir",
    ),
}
# Training imports torch and builds a model before its first write: only the full-disk case pays for it.
SLOW_ON_FULL = {"train"}


def _leftovers(where: Path) -> list[Path]:
    """Temporary files a failed write must not leave behind."""
    return [p for p in where.rglob("*") if p.name.endswith(".tmp") or ".partial" in p.name]


def _looks_finished(i: Inputs, name: str, where: Path) -> bool:
    out = where / WRITERS[name].output
    if name == "predict":
        if not out.is_file():
            return False
        lines = out.read_bytes().split(b"\n")
        # Complete lines must be whole records; a torn last line (no newline) is cut on resume.
        return any(line and not _is_json(line) for line in lines[:-1])
    if name == "run":
        return (out / "report" / "report.html").exists()
    if name == "generate":
        return (out / "suite.json").exists()
    if name == "report":
        return (out / "report.html").exists()
    if name == "train":
        return (out / "model").exists()
    if name == "export-arrow":
        return (out / "state.json").exists()
    return out.exists()


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_read_only_output_is_one_line(
    name: str, inputs: Inputs, readonly_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, *WRITERS[name].argv(inputs, readonly_dir))
    reason = "read-only file system" if ROOT else "permission denied"
    one_error_line(code, err, str(readonly_dir), reason)
    assert not _looks_finished(inputs, name, readonly_dir)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_ON_FULL else n for n in sorted(WRITERS)]
)
def test_full_disk_is_one_line_and_leaves_nothing_finished(
    name: str, inputs: Inputs, full_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, *WRITERS[name].argv(inputs, full_dir))
    line = one_error_line(code, err, str(full_dir))
    # generate (and run's generate stage) estimate their disk use up front and refuse before writing.
    assert "no space left on device" in line or " MB free" in line, line
    assert not _looks_finished(inputs, name, full_dir)
    assert _leftovers(full_dir) == []


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_file_where_a_folder_goes(
    name: str, inputs: Inputs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder\n")
    code, _, err = run_cli(capsys, *WRITERS[name].argv(inputs, blocker))
    one_error_line(code, err, str(blocker))
    assert blocker.read_text() == "not a folder\n"


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_the_output_itself_is_the_wrong_kind(
    name: str, inputs: Inputs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder where the output file goes, or a file where the output folder goes."""
    writer = WRITERS[name]
    out = tmp_path / writer.output
    if writer.kind == "file":
        (out / "inside").mkdir(parents=True)
    else:
        out.write_text("a file, not a folder\n")
    code, _, err = run_cli(capsys, *writer.argv(inputs, tmp_path))
    one_error_line(code, err, str(out))
    if writer.kind == "file":
        assert (out / "inside").is_dir()
    else:
        assert out.read_text() == "a file, not a folder\n"


def test_the_real_entry_point_reports_a_full_disk(inputs: Inputs, full_dir: Path) -> None:
    argv = WRITERS["score"].argv(inputs, full_dir)
    result = subprocess.run(
        [sys.executable, "-m", "lakeshift.cli", *map(str, argv)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"lakeshift score: error: {full_dir / 's.jsonl'}: no space left on device"
    ]


# ----- class 1: an output never replaces an input or a file of another kind ---------------------------------
INPUT_CASES = {
    "score-predictions": lambda i: ["score", "--maps", i.maps, "--predictions", i.preds, "--out", i.preds],
    "score-maps": lambda i: ["score", "--maps", i.maps, "--predictions", i.preds, "--out", i.maps],
    "baseline-maps": lambda i: ["baseline", "--maps", i.maps, "--policy", "random", "--out", i.maps],
    "report-runs": lambda i: ["report", i.runs, "--data", i.data, "--out", i.runs],
    "report-data": lambda i: ["report", i.runs, "--data", i.data, "--out", i.data],
    "report-split": lambda i: ["report", i.runs, "--data", i.data, "--out", i.split],
    "export-maps": lambda i: ["export", i.split, "--out", i.maps],
    "export-sft": lambda i: [
        "export",
        i.split,
        "--sft",
        "grid__none",
        "--out",
        i.split / "sft/grid__none.jsonl",
    ],
    "export-split": lambda i: ["export", i.split, "--format", "arrow", "--out", i.split],
    "predict-sft": lambda i: [
        *("predict", "--backend", "openai", "--model", "fake", "--base-url", i.url, "--data", i.data),
        *("--split", "small-test", "--input", "grid", "--out", i.split / "sft" / "grid__none.jsonl"),
    ],
    "predict-maps": lambda i: [
        *("predict", "--backend", "openai", "--model", "fake", "--base-url", i.url, "--data", i.data),
        *("--split", "small-test", "--input", "grid", "--out", i.maps),
    ],
}


def _snapshot(i: Inputs) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(i.root.rglob("*")) if p.is_file() and "lock" not in p.name}


@pytest.mark.parametrize("case", sorted(INPUT_CASES))
def test_an_output_that_is_an_input_is_refused(
    case: str, inputs: Inputs, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(inputs)
    code, _, err = run_cli(capsys, *INPUT_CASES[case](inputs))
    line = one_error_line(code, err, "--out")
    assert any(why in line for why in ("is the input", "holding the input", "not a previous")), line
    assert _snapshot(inputs) == before


def test_a_link_to_an_input_is_the_input(inputs: Inputs, tmp_path: Path, capsys) -> None:
    link = tmp_path / "scored.jsonl"
    link.symlink_to(inputs.preds)
    before = inputs.preds.read_bytes()
    code, _, err = run_cli(
        capsys, "score", "--maps", inputs.maps, "--predictions", inputs.preds, "--out", link
    )
    one_error_line(code, err, f"--out {link} is the input {inputs.preds}")
    assert inputs.preds.read_bytes() == before and link.is_symlink()
    # A hard link too: same file, other name.
    hard = tmp_path / "hard.jsonl"
    os.link(inputs.maps, hard)
    code, _, err = run_cli(capsys, "baseline", "--maps", inputs.maps, "--policy", "oracle", "--out", hard)
    one_error_line(code, err, "is the input")


FOREIGN = b"my notes, not an output of lakeshift\n"


@pytest.mark.parametrize("name", ["score", "baseline", "export-parquet", "predict", "show"])
def test_an_existing_file_of_another_kind_is_not_replaced(
    name: str, inputs: Inputs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / WRITERS[name].output
    out.write_bytes(FOREIGN)
    code, _, err = run_cli(capsys, *WRITERS[name].argv(inputs, tmp_path))
    one_error_line(code, err, str(out), "not a previous")
    assert out.read_bytes() == FOREIGN


def test_outputs_of_the_wrong_command_are_not_replaced(inputs: Inputs, tmp_path: Path, capsys) -> None:
    """Scored records are not predictions and the reverse: each command replaces only its own kind."""
    scored = tmp_path / "s.jsonl"
    assert run_cli(capsys, *WRITERS["score"].argv(inputs, tmp_path))[0] == 0
    code, _, err = run_cli(capsys, "baseline", "--maps", inputs.maps, "--policy", "oracle", "--out", scored)
    one_error_line(code, err, "not a previous predictions file")
    other = tmp_path / "other.jsonl"
    other.write_bytes(inputs.preds.read_bytes())
    code, _, err = run_cli(
        capsys, "score", "--maps", inputs.maps, "--predictions", inputs.preds, "--out", other
    )
    one_error_line(code, err, "not a previous score output")
    assert other.read_bytes() == inputs.preds.read_bytes()


@pytest.mark.parametrize("name", ["score", "baseline", "report", "export-parquet", "export-arrow", "show"])
def test_a_previous_output_of_the_same_command_is_replaced(
    name: str, inputs: Inputs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = WRITERS[name].argv(inputs, tmp_path)
    assert run_cli(capsys, *argv)[0] == 0
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err


def test_a_report_folder_that_holds_other_files_is_refused(inputs: Inputs, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rep"
    out.mkdir()
    (out / "thesis.tex").write_text("\\section{x}\n")
    code, _, err = run_cli(capsys, *WRITERS["report"].argv(inputs, tmp_path))
    one_error_line(code, err, str(out), "not a previous report folder")
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]


def test_show_into_a_full_disk_is_one_line(inputs: Inputs, full_dir: Path) -> None:
    """``show`` writes to stdout: redirected to a file on a full disk, the failure is still one line."""
    argv = ["show", inputs.split, "--id", "small-test-00000", "--format", "table"]
    with (full_dir / "table.txt").open("w") as stdout:
        result = subprocess.run(
            [sys.executable, "-m", "lakeshift.cli", *map(str, argv)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "lakeshift show: error: standard output: no space left on device"
    ]


@pytest.mark.slow
def test_a_disk_that_fills_up_during_training_is_one_line(
    inputs: Inputs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Room for run.json and metrics, not for the first checkpoint: safetensors' own error type (not an
    OSError) still becomes one line naming the run folder."""
    with tmpfs(tmp_path / "small", size="256k") as where:
        code, _, err = run_cli(capsys, *WRITERS["train"].argv(inputs, where))
        one_error_line(code, err, str(where / "run"), "no space left on device")
        assert (where / "run" / "run.json").is_file() and not (where / "run" / "model").exists()


def test_predict_refuses_a_model_whose_saving_was_cut_short(inputs: Inputs, tmp_path: Path, capsys) -> None:
    """A full disk while saving ``model/`` leaves run.json at status 'running': predict does not load the
    half-written weights."""
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "model" / "model.safetensors").write_bytes(b"\0" * 100)
    (run / "run.json").write_text(
        json.dumps({"status": "running", "input_format": "grid", "cot_format": "none"})
    )
    argv = WRITERS["predict"].argv(inputs, tmp_path)
    argv[argv.index("openai")] = "hf"
    argv[argv.index("fake")] = run
    code, _, err = run_cli(capsys, *argv)
    one_error_line(code, err, str(run / "run.json"), "status 'running'", "--resume")


def test_a_report_rerun_that_fails_leaves_no_old_report_html(inputs: Inputs, tmp_path: Path, capsys) -> None:
    """report.html marks a finished report: a rerun that fails part-way (here on a torn PNG, after the
    scored records are rewritten) does not keep the old page next to half of the new files."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(inputs.data, data)
    argv = ["report", inputs.runs, "--data", data, "--out", tmp_path / "rep", "--examples", "6"]
    assert run_cli(capsys, *argv)[0] == 0
    assert (tmp_path / "rep" / "report.html").is_file()
    for png in (data / "small-test" / "images").glob("*.png"):
        png.write_bytes(png.read_bytes()[:100])
    code, _, err = run_cli(capsys, *argv)
    one_error_line(code, err, "not a readable PNG")
    assert not (tmp_path / "rep" / "report.html").exists()
