"""One writer per output. A second ``predict``, ``generate``, ``train`` or ``run`` on an
output another process is writing is refused with a clear line (exit 2) naming the holder's pid; the lock is
an ``fcntl.flock`` (``lakeshift.io.output_lock``), so a run killed with SIGKILL never leaves it stuck. Every
command that writes (``score --out``, ``baseline --out`` and ``export`` too) refuses an output inside a study
workdir that a running ``lakeshift run`` holds.

Real processes throughout: a holder process takes the lock as a writer does, and two real ``lakeshift
predict`` processes race on one file against a slow local OpenAI-compatible server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from model_fixtures import FakeOpenAI

from lakeshift.errors import LakeshiftError
from lakeshift.io import lock_path, output_lock
from tests.cli_checks import one_error_line, quiet_main

HOLDER = """\
import sys, time
from lakeshift.io import output_lock
with output_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


def take_and_release(out: Path) -> None:
    with output_lock(out):
        pass


@contextlib.contextmanager
def holder(out: Path) -> Iterator[subprocess.Popen]:
    """Another process holding the output lock of ``out`` (as a running writer does)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


class SlowAnswers(dict):
    """The fake server's answers, each after a pause, so that a predict run lasts long enough to race."""

    def get(self, key: object, default: object = None) -> object:
        time.sleep(0.4)
        return default


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from model_fixtures import generate_split

    root = tmp_path_factory.mktemp("locks")
    generate_split(root, "id-test", sizes=(3, 4), count=3, seed=1)
    return root


@pytest.fixture(scope="module")
def slow_server() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(SlowAnswers(), failures=())
    yield server
    server.close()


def predict_argv(data: Path, url: str, out: Path) -> list[str]:
    return [
        *("predict", "--backend", "openai", "--model", "fake", "--base-url", url, "--data", str(data)),
        *("--input", "grid", "--concurrency", "1", "--out", str(out)),
    ]


def ids_in(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]


def wait_for_pid_in_lock(out: Path, pid: int, timeout: float = 60) -> None:
    lock, end = lock_path(out), time.time() + timeout
    while time.time() < end:
        if lock.is_file() and lock.read_text().strip() == str(pid):
            return
        time.sleep(0.05)
    raise AssertionError(f"{lock} never held pid {pid}")


def refused(code: int, err: str, out: Path, pid: int) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    assert f"{out} is being written by another" in lines[0] and f"(pid {pid})" in lines[0], lines[0]


# ----- the lock itself --------------------------------------------------------------------------------------
def test_the_lock_is_exclusive_released_on_exit_and_on_error(tmp_path: Path) -> None:
    out = tmp_path / "p.jsonl"
    # A second open file description conflicts even within one process.
    with output_lock(out), pytest.raises(LakeshiftError, match="is being written by another"):
        take_and_release(out)
    with pytest.raises(RuntimeError), output_lock(out):
        raise RuntimeError("the writer failed")
    with output_lock(out):  # free again after an exception
        pass
    assert not out.exists() and lock_path(out).parent == tmp_path  # the lock sits next to the output


def test_a_killed_holder_never_leaves_the_lock_stuck(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with holder(out) as proc:
        with pytest.raises(LakeshiftError, match=f"pid {proc.pid}"), output_lock(out):
            pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        with output_lock(out):  # the kernel dropped the dead process's flock
            pass
    assert lock_path(out).is_file()  # the stale file stays; only the flock matters


# ----- every writing command takes it -----------------------------------------------------------------------
def test_second_generate_train_predict_run_are_refused(data: Path, tmp_path: Path, slow_server) -> None:
    study = tmp_path / "study.yaml"
    study.write_text(
        "name: s\ndata: {suite: tiny, images: false, inputs: [grid], cots: [none], workers: 1}\n"
        "models:\n  - {name: f, input: grid, cot: none, zero_shot: true, model: fake}\n"
        f"predict: {{splits: [id-test], backend: openai, base_url: '{slow_server.url}', per_size: 1}}\n"
    )
    cases = {
        "generate": (tmp_path / "gen", ["generate", "--suite", "tiny", "--out", tmp_path / "gen"]),
        "train": (
            tmp_path / "run",
            [
                *("train", "--data", data, "--split", "id-test", "--input", "grid", "--cot", "none"),
                *("--model", "micro", "--max-steps", "1", "--out", tmp_path / "run"),
            ],
        ),
        "predict": (tmp_path / "p.jsonl", predict_argv(data, slow_server.url, tmp_path / "p.jsonl")),
        "run": (tmp_path / "work", ["run", study, "--workdir", tmp_path / "work"]),
    }
    for name, (out, argv) in cases.items():
        with holder(out) as proc:
            code, err = quiet_main(argv)
            refused(code, err, out, proc.pid)
        assert not (out / "suite.json").exists() and not (out / "run.json").exists(), name
        if out.suffix == ".jsonl":
            assert not out.exists()
    # Once the holder is gone the same generate runs.
    code, err = quiet_main([*cases["generate"][1], "--no-progress", "--workers", "1", "--no-images"])
    assert code == 0, err
    assert (tmp_path / "gen" / "suite.json").is_file()


def test_demo_takes_the_lock_of_its_workdir(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    # A folder the demo would refuse to replace, so that a demo that took no lock would fail at once (with
    # another message) instead of generating and training.
    (work / "data").mkdir(parents=True)
    (work / "data" / "mine.txt").write_text("not the demo's\n")
    with holder(work) as proc:
        code, err = quiet_main(["demo", "--workdir", work])
        refused(code, err, work, proc.pid)
        # A plan writes nothing and takes no lock: it gets as far as the folder it would not replace.
        code, err = quiet_main(["demo", "--workdir", work, "--dry-run"])
        one_error_line(code, err, "data exists but was not written by study 'demo'")
    assert sorted(p.name for p in work.rglob("*")) == ["data", "mine.txt"]


def test_writers_into_a_study_workdir_that_a_run_holds_are_refused(
    data: Path, tmp_path: Path, slow_server
) -> None:
    work = tmp_path / "work"
    maps, oracle = data / "id-test" / "maps.jsonl", tmp_path / "oracle.jsonl"
    code, err = quiet_main(["baseline", "--maps", maps, "--policy", "oracle", "--out", oracle])
    assert code == 0, err
    inside = {
        "generate": [
            *("generate", "--suite", "tiny", "--out", work / "data", "--force", "--seed", "7"),
            *("--no-progress", "--workers", "1", "--no-images"),
        ],
        "train": [
            *("train", "--data", data, "--split", "id-test", "--input", "grid", "--cot", "none"),
            *("--model", "micro", "--max-steps", "1", "--out", work / "models" / "grid__none"),
        ],
        "predict": predict_argv(data, slow_server.url, work / "predictions" / "f" / "id-test.jsonl"),
        "report": ["report", tmp_path / "runs", "--data", data, "--out", work / "report"],
        "score": ["score", "--maps", maps, "--predictions", oracle, "--out", work / "scored" / "f.jsonl"],
        "export": ["export", data / "id-test", "--out", work / "id-test.parquet"],
        "baseline": ["baseline", "--maps", maps, "--policy", "random", "--out", work / "random.jsonl"],
    }
    with holder(work) as proc:  # a study's run writing its workdir
        for name, argv in inside.items():
            code, err = quiet_main(argv)
            line = one_error_line(code, err, f"lies inside {work.resolve()}", f"(pid {proc.pid})")
            assert line.startswith(f"lakeshift {name}: error: "), line
    assert not work.exists()
    # Beside the workdir, and once the run is gone, the same generate, score and baseline write.
    for name in ("generate", "score", "baseline"):
        code, err = quiet_main(inside[name])
        assert code == 0, (name, err)
    assert (work / "data" / "suite.json").is_file()
    assert len((work / "scored" / "f.jsonl").read_text().splitlines()) == len(maps.read_text().splitlines())
    assert (work / "random.jsonl").is_file()


@pytest.mark.slow
def test_two_real_predict_runs_never_write_an_id_twice(data: Path, tmp_path: Path, slow_server) -> None:
    out = tmp_path / "p.jsonl"
    argv = [sys.executable, "-m", "lakeshift.cli", *predict_argv(data, slow_server.url, out)]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_pid_in_lock(out, first.pid)
        code, err = quiet_main(argv[3:])  # the second writer, while the first is answering
        refused(code, err, out, first.pid)
        assert first.wait(timeout=120) == 0, first.stderr.read() if first.stderr else ""
    finally:
        first.kill()
        first.wait(timeout=30)
    ids = ids_in(out)
    assert len(ids) == 6 and len(set(ids)) == 6
    code, err = quiet_main(argv[3:])
    assert code == 0 and "0 new, 6 already done" in err, err


@pytest.mark.slow
def test_a_predict_killed_mid_run_leaves_no_stuck_lock_and_resumes(data: Path, tmp_path: Path, slow_server):
    out = tmp_path / "p.jsonl"
    argv = [sys.executable, "-m", "lakeshift.cli", *predict_argv(data, slow_server.url, out)]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_pid_in_lock(out, first.pid)
    end = time.time() + 60
    while time.time() < end and not (out.is_file() and out.read_text().count("\n") >= 2):
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    done_before = len(ids_in(out))
    assert 2 <= done_before < 6
    code, err = quiet_main(argv[3:])
    assert code == 0, err
    assert f"{6 - done_before} new, {done_before} already done" in err
    ids = ids_in(out)
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 6
