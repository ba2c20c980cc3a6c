"""``lakeshift train`` / ``predict`` end to end on a tiny model: overfit to 100%, LoRA, resume, bad input.

The data comes from ``lakeshift generate`` (see ``model_fixtures``); models train on ``--prompt map-only`` so
the conversations stay short enough to memorise in seconds.
"""

from __future__ import annotations

import json
import shutil

import pytest
from model_fixtures import generate_split

from lakeshift.cli import main
from lakeshift.models.registry import resolve_model
from lakeshift.models.train_options import PRESETS, TrainOptions, resolve_hparams

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    generate_split(root, "id-train", sizes=(3, 4), count=2, cots=("grid", "none"), train=True, seed=1)
    return root


def test_tiny_model_overfits_a_handful_of_maps_through_the_cli(data, tmp_path):
    run = tmp_path / "run"
    argv = ["train", "--data", str(data), "--input", "grid", "--cot", "grid", "--model", "micro"]
    argv += ["--out", str(run), "--prompt", "map-only", "--epochs", "150"]
    argv += ["--batch-size", "4", "--lr", "5e-3"]
    assert main(argv) == 0
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "done" and record["cot_format"] == "grid" and record["prompt"] == "map-only"
    assert len(record["data"]["sha256"]) == 64 and record["versions"]["trl"]
    assert record["hparams"]["sampling"] == "group_by_length" and not record["hparams"]["packing"]
    assert record["hparams"]["tokenizer"] == "structured"
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("tokens_per_s" in m for m in metrics)
    losses = [m["loss"] for m in metrics if "loss" in m]
    assert losses[-1] < losses[0] / 10

    preds = tmp_path / "preds.jsonl"
    # --input, --cot and --prompt default to the run's (run.json).
    predict = ["predict", "--model", str(run), "--data", str(data), "--split", "id-train"]
    predict += ["--out", str(preds)]
    assert main(predict) == 0
    rows = [json.loads(x) for x in preds.read_text().splitlines()]
    ids = [json.loads(x)["id"] for x in (data / "id-train" / "maps.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(ids) and len(ids) == 4
    assert all(r["finish_reason"] == "stop" and r["decoding"]["greedy"] for r in rows)
    assert all(
        (r["input_format"], r["cot_format"], r["prompt"], r["split"])
        == ("grid", "grid", "map-only", "id-train")
        for r in rows
    )
    scored = tmp_path / "scored.jsonl"
    maps = str(data / "id-train" / "maps.jsonl")
    assert main(["score", "--maps", maps, "--predictions", str(preds), "--out", str(scored)]) == 0
    verdicts = [json.loads(x) for x in scored.read_text().splitlines()]
    assert len(verdicts) == 4
    assert sum(v["success"] for v in verdicts) / len(verdicts) == 1.0, verdicts

    # Rerunning is a no-op: every id is done.
    before = preds.read_text()
    assert main(predict) == 0
    assert preds.read_text() == before
    # Another prompt may not be mixed into the same file.
    assert main([*predict, "--prompt", "mirage"]) == 2


def test_lora_and_resume_after_an_interrupted_run(data, tmp_path, capsys):
    run = tmp_path / "lora"
    base = [
        "train",
        "--data",
        str(data),
        "--input",
        "grid",
        "--cot",
        "none",
        "--model",
        "micro",
        "--out",
        str(run),
    ]
    base += ["--lora", "--lora-r", "4", "--batch-size", "2", "--save-steps", "2", "--logging-steps", "1"]
    assert main([*base, "--max-steps", "2"]) == 0
    assert (run / "adapter" / "adapter_config.json").is_file() and (run / "checkpoint-2").is_dir()
    record = json.loads((run / "run.json").read_text())
    assert record["model"]["n_trainable_params"] < record["model"]["n_params"]
    # Simulate a crash after checkpoint-2: no final model, run still marked running.
    shutil.rmtree(run / "model")
    assert main([*base, "--max-steps", "4"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*base, "--max-steps", "4", "--resume"]) == 0
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "done" and record["global_step"] == 4 and record["resumed"]
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps.count(1) == 1 and 4 in steps  # steps 1-2 were not trained twice
    assert record["prompt"] == "mirage"  # the default
    # The merged model predicts through the normal path.
    preds = tmp_path / "p.jsonl"
    argv = ["predict", "--model", str(run), "--data", str(data), "--split", "id-train", "--limit", "1"]
    assert main([*argv, "--out", str(preds), "--max-new-tokens", "5"]) == 0
    assert len(preds.read_text().splitlines()) == 1


def test_resume_refuses_a_changed_recipe(data, tmp_path, capsys):
    run = tmp_path / "r"
    base = [
        "train",
        "--data",
        str(data),
        "--input",
        "grid",
        "--cot",
        "none",
        "--model",
        "micro",
        "--out",
        str(run),
    ]
    assert main([*base, "--max-steps", "1", "--batch-size", "2"]) == 0
    assert main([*base, "--max-steps", "2", "--batch-size", "4", "--resume"]) == 2
    assert "batch_size" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "no-such-model"], "unknown model"),
        (["--model", "micro", "--cot", "table"], "grid x grid"),
        (["--model", "micro", "--input", "image", "--cot", "none"], "text-only model"),
        (["--model", "micro", "--split", "ood-size"], "no split 'ood-size'"),
        (["--model", "micro", "--sizes", "9"], "no records left"),
    ],
)
def test_train_bad_input_is_one_clear_error(data, tmp_path, capsys, argv, message):
    base = {"--input": "grid", "--cot": "grid", "--data": str(data), "--out": str(tmp_path / "x")}
    for i in range(0, len(argv), 2):
        base[argv[i]] = argv[i + 1]
    assert main(["train", *[x for kv in base.items() for x in kv]]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x" / "run.json").exists()


def test_predict_bad_input(data, tmp_path, capsys):
    common = [
        "--data",
        str(data),
        "--split",
        "id-train",
        "--input",
        "grid",
        "--out",
        str(tmp_path / "p.jsonl"),
    ]
    assert main(["predict", "--model", "micro", *common]) == 2
    assert "train it first" in capsys.readouterr().err
    try:
        import vllm  # noqa: F401
    except ImportError:
        assert main(["predict", "--backend", "vllm", "--model", "x/y", *common]) == 2
        assert "separate environment" in capsys.readouterr().err
    assert (
        main(
            ["predict", "--backend", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", *common]
        )
        == 2
    )
    assert "cannot reach" in capsys.readouterr().err


def test_presets_follow_table_8():
    spec = resolve_model("micro")
    paper = resolve_hparams(TrainOptions("d", "grid", "none", "micro", "o", preset="paper"), spec, cuda=False)
    assert (paper.epochs, paper.batch_size, paper.grad_accum, paper.warmup_steps) == (
        10,
        1,
        1,
        10,
    )
    assert (paper.lr, paper.weight_decay) == (1e-5, 0.01)
    assert PRESETS["paper-code"]["grad_accum"] == 2
    override = resolve_hparams(TrainOptions("d", "grid", "none", "micro", "o", lr=0.5), spec, cuda=False)
    assert override.preset == "scratch" and override.lr == 0.5
    assert not override.gradient_checkpointing


def test_time_budget_stops_training_early_and_is_recorded(data, tmp_path):
    run = tmp_path / "run"
    argv = ["train", "--data", str(data), "--input", "grid", "--cot", "none", "--model", "micro"]
    argv += ["--out", str(run), "--prompt", "map-only", "--epochs", "100000", "--batch-size", "1"]
    argv += ["--max-minutes", "0.02"]  # ~1 s: far fewer steps than 100,000 epochs of 4 maps
    assert main(argv) == 0
    record = json.loads((run / "run.json").read_text())
    assert record["stopped_by_time_budget"] is True
    assert 0 < record["global_step"] < 400_000
    assert record["hparams"]["max_minutes"] == 0.02
    assert (run / "model" / "config.json").is_file()


def test_time_budget_schedule_warms_up_by_step_then_decays_to_zero_with_the_clock(monkeypatch):
    from lakeshift.models import run_folder

    now = [1000.0]
    monkeypatch.setattr(run_folder.time, "time", lambda: now[0])
    budget = run_folder.TimeBudget(minutes=10)
    assert budget.lr_factor(step=4, warmup_steps=50) == pytest.approx(0.1)
    now[0] += 150  # a quarter of the budget
    assert budget.lr_factor(step=49, warmup_steps=50) == pytest.approx(0.75)
    assert budget.lr_factor(step=5000, warmup_steps=50) == pytest.approx(0.75)
    now[0] += 450
    assert budget.lr_factor(step=5001, warmup_steps=50) == 0.0
    assert budget.fraction() == 1.0


def test_bf16_is_the_default_only_where_it_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    from lakeshift.models import train_options
    from lakeshift.models.registry import resolve_model

    monkeypatch.setattr(train_options, "cpu_has_bf16", lambda: True)
    assert not train_options.default_bf16(resolve_model("mini"), cuda=False)  # hidden 128: slower in bf16
    assert train_options.default_bf16(resolve_model("tiny"), cuda=False)
    assert train_options.default_bf16(resolve_model("micro"), cuda=True)
    monkeypatch.setattr(train_options, "cpu_has_bf16", lambda: False)
    assert not train_options.default_bf16(resolve_model("tiny"), cuda=False)
