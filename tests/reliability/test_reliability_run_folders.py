"""Run and model folders: nothing lost, no tracebacks (real micro runs through the CLI).

``--resume`` on a finished GRPO run is a no-op, and a resumed GRPO run logs each sampled completion once; a
model folder whose weights or JSON files are missing or torn, or a run still marked ``running``, is one line
in ``train``, GRPO and ``predict`` (its complete checkpoints stay usable); ``RUN/model`` and
``RUN/checkpoint-N`` are their run's (its formats, prompt and recipe); ``--max-length`` shorter than the
prompts and a GRPO batch the machine cannot hold are refused before training; a full disk while a
checkpoint is saved is one line, and the run resumes from there.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_checks import tmpfs
from model_fixtures import generate_split

from tests.cli_checks import one_error_line, quiet_main

pytestmark = pytest.mark.slow


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    generate_split(root, "id-train", sizes=(3,), count=4, train=True, seed=1)
    return root


def sft_argv(data: Path, out: Path, model: str | Path = "micro", *extra: str) -> list[str | Path]:
    argv: list[str | Path] = ["train", "--data", data, "--input", "grid", "--cot", "none", "--model", model]
    return [*argv, "--out", out, "--prompt", "map-only", "--batch-size", "4", "--lr", "5e-3", *extra]


def grpo_argv(data: Path, model: str | Path, out: Path, *extra: str) -> list[str | Path]:
    argv: list[str | Path] = ["train", "--method", "grpo", "--data", data, "--input", "grid", "--cot", "none"]
    return [*argv, "--model", model, "--out", out, *extra]


def predict_argv(data: Path, model: str | Path, out: Path, *extra: str) -> list[str | Path]:
    return ["predict", "--model", model, "--data", data, "--split", "id-train", "--out", out, *extra]


@pytest.fixture(scope="module")
def sft_run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished micro SFT run (map-only prompt): checkpoints 4 and 8, then model/."""
    run = tmp_path_factory.mktemp("runs") / "sft"
    code, err = quiet_main(sft_argv(data, run, "micro", "--max-steps", "8", "--save-steps", "4"))
    assert code == 0, err
    return run


GRPO_EXTRA = (
    "--num-generations",
    "2",
    "--max-steps",
    "4",
    "--save-steps",
    "2",
    "--lr",
    "1e-3",
    "--seed",
    "1",
)


@pytest.fixture(scope="module")
def grpo_run(data: Path, sft_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 4-step GRPO run from ``sft_run``: checkpoints 2 and 4, 2 completions a step."""
    run = tmp_path_factory.mktemp("runs") / "grpo"
    code, err = quiet_main(grpo_argv(data, sft_run, run, *GRPO_EXTRA))
    assert code == 0, err
    return run


# ----- GRPO resume: nothing past the end, nothing logged twice ---------------------------------------------
def test_resume_on_a_finished_grpo_run_is_a_no_op(
    data: Path, sft_run: Path, grpo_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "grpo"
    shutil.copytree(grpo_run, run)
    before = snapshot(run)
    code, err = quiet_main(grpo_argv(data, sft_run, run, *GRPO_EXTRA, "--resume"))
    assert code == 0, err
    assert f"{run} already finished (step 4" in err and "nothing to do" in err
    assert snapshot(run) == before  # no step past --max-steps, the model untouched


def test_a_resumed_grpo_run_logs_each_completion_once(
    data: Path, sft_run: Path, grpo_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "grpo"
    shutil.copytree(grpo_run, run)
    # Killed after checkpoint-2, two steps later: their completions were logged, one line torn by the kill.
    shutil.rmtree(run / "model")
    shutil.rmtree(run / "checkpoint-4")
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "status": "running"}))
    with (run / "completions.jsonl").open("a") as f:
        f.write('{"step": 3, "map_id": "id-tr')
    code, err = quiet_main(grpo_argv(data, sft_run, run, *GRPO_EXTRA, "--resume"))
    assert code == 0, err
    assert f"resuming from {run / 'checkpoint-2'} (step 2)" in err
    steps = [r["step"] for r in rows(run / "completions.jsonl")]
    assert sorted(steps) == [0, 0, 1, 1, 2, 2, 3, 3]  # 2 completions per step, each step once


# ----- damaged or half-saved model folders ------------------------------------------------------------------
def _truncate(name: str) -> Callable[[Path], str]:
    def damage(model: Path) -> str:
        path = model / name
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        return name

    return damage


def _delete(name: str) -> Callable[[Path], str]:
    def damage(model: Path) -> str:
        (model / name).unlink()
        return "no model weights"

    return damage


DAMAGES = {
    "truncated weights": _truncate("model.safetensors"),
    "deleted weights": _delete("model.safetensors"),
    "truncated generation config": _truncate("generation_config.json"),
    "truncated tokenizer config": _truncate("tokenizer_config.json"),
}
READERS = {
    "sft": lambda data, model, out: sft_argv(data, out, model, "--max-steps", "1"),
    "grpo": lambda data, model, out: grpo_argv(
        data, model, out, "--num-generations", "2", "--max-steps", "1"
    ),
    "predict": lambda data, model, out: predict_argv(data, model, out / "p.jsonl"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_model_folder_is_one_line_in_every_reader(
    damage: str, reader: str, data: Path, sft_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(sft_run, run)
    what = DAMAGES[damage](run / "model")
    out = tmp_path / "out"
    code, err = quiet_main(READERS[reader](data, run, out))
    one_error_line(code, err, f"--model {run}: ", str(run / "model"), what)
    # nothing is written: no run folder, and for predict no predictions file (its lock may make the folder)
    assert not (out / "p.jsonl").exists() if reader == "predict" else not out.exists()


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_run_still_marked_running_is_refused_but_its_checkpoints_are_not(
    reader: str, data: Path, sft_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(sft_run, run)
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "status": "running"}))
    out = tmp_path / "out"
    for model in (run, run / "model"):
        code, err = quiet_main(READERS[reader](data, model, out))
        one_error_line(
            code, err, f"{run / 'run.json'}: status 'running', so {run / 'model'} is not a complete"
        )
    assert not out.exists()
    if reader == "predict":  # a complete checkpoint of the run is the run's: its formats and prompt
        code, err = quiet_main(predict_argv(data, run / "checkpoint-8", out / "p.jsonl"))
        assert code == 0, err
        assert {(r["prompt"], r["input_format"]) for r in rows(out / "p.jsonl")} == {("map-only", "grid")}


def test_a_runs_own_folders_are_the_run(data: Path, sft_run: Path, tmp_path: Path) -> None:
    """``RUN/model`` takes RUN's formats and prompt (predict) and its recipe (GRPO's prompt and rate)."""
    preds = tmp_path / "p.jsonl"
    code, err = quiet_main(predict_argv(data, sft_run / "model", preds))  # no --input: the run's
    assert code == 0, err
    assert {(r["prompt"], r["input_format"], r["cot_format"]) for r in rows(preds)} == {
        ("map-only", "grid", "none")
    }

    from lakeshift.models.grpo import GrpoOptions, resolve_grpo, resolve_grpo_hparams

    for model in (sft_run, sft_run / "model", sft_run / "checkpoint-8"):
        opts, spec, init, _ = resolve_grpo(
            GrpoOptions(str(data), "grid", "none", str(model), str(tmp_path / "o"))
        )
        assert opts.prompt == "map-only", model
        assert resolve_grpo_hparams(opts, init, 4, 1, False, spec).lr == 1e-4, model


# ----- numbers checked before training ----------------------------------------------------------------------
def test_a_max_length_shorter_than_the_prompts_is_refused(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, err = quiet_main(sft_argv(data, out, "micro", "--max-length", "5", "--max-steps", "1"))
    one_error_line(code, err, "--max-length 5: the longest prompts of", "would be cut away entirely")
    assert not out.exists()


@pytest.mark.parametrize("n", ["1024", "65536"])
def test_a_grpo_batch_the_machine_cannot_hold_is_refused(
    n: str, data: Path, sft_run: Path, tmp_path: Path
) -> None:
    # Both within the options' bounds: the estimate is what refuses them.
    out = tmp_path / "out"
    extra = ("--num-generations", n, "--max-completion-length", "1048576", "--max-steps", "1")
    code, err = quiet_main(grpo_argv(data, sft_run, out, *extra))
    one_error_line(code, err, f"--num-generations {n} ({n} sequences of up to", "would need about")
    assert not out.exists()


# ----- a full disk while a checkpoint is saved --------------------------------------------------------------
def test_a_full_disk_while_a_checkpoint_is_saved_is_one_line_and_resumes(
    data: Path, sft_run: Path, tmp_path: Path
) -> None:
    ckpt = sft_run / "checkpoint-4"
    # Room for the run's files and the checkpoint's weights, not for its optimizer state (torch.save).
    tokenizer = sum(p.stat().st_size for p in (sft_run / "tokenizer").rglob("*") if p.is_file())
    room = 2 * tokenizer + (ckpt / "model.safetensors").stat().st_size  # the run's and the checkpoint's
    room += (ckpt / "optimizer.pt").stat().st_size // 2
    with tmpfs(tmp_path / "disk", size=str(room + 256 * 1024)) as disk:
        run = disk / "run"
        code, err = quiet_main(sft_argv(data, run, "micro", "--max-steps", "8", "--save-steps", "4"))
        one_error_line(code, err, f"{run}: no space left on device")
        moved = tmp_path / "run"
        shutil.copytree(run, moved)
    code, err = quiet_main(
        sft_argv(data, moved, "micro", "--max-steps", "8", "--save-steps", "4", "--resume")
    )
    assert code == 0, err
    assert json.loads((moved / "run.json").read_text())["global_step"] == 8


# ----- output folders: a user's folder is not a run, a named size is not a folder --------------------------
def test_grpo_refuses_a_folder_that_is_not_a_run(data: Path, sft_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    (folder / "checkpoint-1").mkdir(parents=True)
    (folder / "checkpoint-1" / "notes.txt").write_text("my own checkpoint\n")
    (folder / "README.md").write_text("my readme\n")
    before = snapshot(folder)
    code, err = quiet_main(grpo_argv(data, sft_run, folder, "--num-generations", "2", "--max-steps", "1"))
    one_error_line(code, err, f"--out {folder} is a folder that is not empty and not a previous run folder")
    assert snapshot(folder) == before


def test_a_named_size_is_not_an_input_folder_of_the_output(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--model micro --out .`` in an empty folder: ``micro`` is a named size, not a folder held by ``.``."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, err = quiet_main(sft_argv(data, Path("."), "micro", "--max-steps", "1"))
    assert code == 0, err
    assert (here / "model" / "config.json").is_file()


# ----- a cells model on maps larger than its row and column positions --------------------------------------
@pytest.fixture(scope="module")
def big_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with one 31x31 map (split ``big``): one row and column more than a cells model has."""
    root = tmp_path_factory.mktemp("big")
    generate_split(root, "big", sizes=(31,), count=1, train=True, seed=1)
    return root


@pytest.fixture(scope="module")
def cells_run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-step micro-cells SFT run on 3x3 maps (map-only prompt)."""
    run = tmp_path_factory.mktemp("runs") / "cells"
    code, err = quiet_main(sft_argv(data, run, "micro-cells", "--max-steps", "2"))
    assert code == 0, err
    return run


CELLS_READERS = {
    "sft": lambda data, run, out: sft_argv(data, out, "micro-cells", "--split", "big", "--max-steps", "1"),
    "grpo": lambda data, run, out: grpo_argv(
        data, run, out, "--split", "big", "--num-generations", "2", "--max-steps", "1"
    ),
    "predict": lambda data, run, out: predict_argv(data, run, out / "p.jsonl", "--split", "big"),
}


@pytest.mark.parametrize("reader", sorted(CELLS_READERS))
def test_a_cells_model_on_maps_beyond_its_positions_is_one_line(
    reader: str, big_data: Path, cells_run: Path, tmp_path: Path
) -> None:
    """Rows and columns 31 and beyond would all get position 0, without a word: one line, nothing written."""
    out = tmp_path / "out"
    code, err = quiet_main(CELLS_READERS[reader](big_data, cells_run, out))
    sft = big_data / "big" / "sft" / "grid__none.jsonl"
    one_error_line(code, err, f"{sft}: 31x31 maps: a cells model has row and column positions up to 30")
    assert not (out / "p.jsonl").exists() if reader == "predict" else not out.exists()
