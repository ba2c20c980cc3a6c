"""Training resume is exact.

A kill (or a full disk) while a checkpoint is written leaves it torn: ``--resume`` detects it, says so,
removes it and resumes from the last complete one; ``metrics.jsonl`` never holds a log event twice; and
``--resume`` on a finished run is a no-op that says so (it used to train one step past ``--max-steps`` and
overwrite the model). Real runs of the ``micro`` model through the CLI, torn by deleting or truncating files.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from model_fixtures import generate_split

from lakeshift.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    generate_split(root, "id-train", sizes=(3,), count=4, train=True, seed=2)
    return root


def _argv(data: Path, run: Path) -> list[str]:
    argv = ["train", "--data", str(data), "--input", "grid", "--cot", "none", "--model", "micro"]
    argv += ["--out", str(run), "--prompt", "map-only", "--batch-size", "2", "--save-steps", "2"]
    return [*argv, "--logging-steps", "1", "--max-steps", "4", "--seed", "3"]


@pytest.fixture(scope="module")
def finished(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted 4-step run (checkpoints 2 and 4, then model/)."""
    run = tmp_path_factory.mktemp("runs") / "done"
    assert main(_argv(data, run)) == 0
    assert {p.name for p in run.glob("checkpoint-*")} == {"checkpoint-2", "checkpoint-4"}
    return run


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _loss_steps(run: Path) -> list[int]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum("train_runtime" in r for r in rows) == 1  # one end-of-training summary
    return [r["step"] for r in rows if "loss" in r]


def _truncate(name: str) -> Callable[[Path], None]:
    def tear(ckpt: Path) -> None:
        path = ckpt / name
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return tear


def _delete(name: str) -> Callable[[Path], None]:
    return lambda ckpt: (ckpt / name).unlink()


@pytest.mark.parametrize(
    ("tear", "problem"),
    [
        (_truncate("optimizer.pt"), "optimizer.pt is unreadable"),
        (_delete("scheduler.pt"), "no scheduler.pt"),
        (_truncate("model.safetensors"), "model.safetensors is"),
        (_truncate("trainer_state.json"), "trainer_state.json is unreadable"),
        (_delete("trainer_state.json"), "no trainer_state.json"),
    ],
)
def test_a_torn_last_checkpoint_is_skipped_and_the_resume_is_exact(
    tear: Callable[[Path], None],
    problem: str,
    data: Path,
    finished: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    # Killed while writing checkpoint-4: no final model, the run still marked running, the checkpoint torn.
    shutil.rmtree(run / "model")
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "status": "running"}))
    tear(run / "checkpoint-4")
    capsys.readouterr()

    assert main([*_argv(data, run), "--resume"]) == 0
    err = capsys.readouterr().err
    assert f"{run / 'checkpoint-4'} is incomplete ({problem}" in err
    assert f"resuming from {run / 'checkpoint-2'} (step 2)" in err
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "done" and record["global_step"] == 4
    # Steps 3 and 4 were trained once more and logged once: no step twice.
    assert _loss_steps(run) == [1, 2, 3, 4]
    # Exact: the same weights as the uninterrupted run (same data order and RNG state from checkpoint-2).
    resumed, reference = _weights(run / "model"), _weights(finished / "model")
    assert resumed.keys() == reference.keys()
    for name, tensor in reference.items():
        assert resumed[name].equal(tensor), name


def test_no_complete_checkpoint_starts_over_and_says_so(
    data: Path, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    shutil.rmtree(run / "model")
    _delete("optimizer.pt")(run / "checkpoint-2")
    _truncate("scheduler.pt")(run / "checkpoint-4")
    capsys.readouterr()
    assert main([*_argv(data, run), "--resume"]) == 0
    err = capsys.readouterr().err
    assert err.count("is incomplete") == 2
    assert "no complete checkpoint" in err and "starting from the beginning" in err
    assert _loss_steps(run) == [1, 2, 3, 4]  # the old rows were dropped, every step logged once
    assert json.loads((run / "run.json").read_text())["global_step"] == 4


def test_resume_on_a_finished_run_is_a_no_op_that_says_so(
    data: Path, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main([*_argv(data, run), "--resume"]) == 0
    err = capsys.readouterr().err
    assert f"{run} already finished (step 4" in err and "nothing to do" in err
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert after == before  # no step past --max-steps, no new checkpoint, the model untouched
