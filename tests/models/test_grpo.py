"""``lakeshift train --method grpo``: bad input, a micro run end to end, resume, and a planted check that GRPO
raises the reward it is given.

The planted check: one 3x3 map whose goal is two moves away (RIGHT, DOWN or DOWN, RIGHT), and an SFT file
whose answers are uniformly random two-move plans, so the SFT model writes well-formed boxes but solves the
map about 2 times in 16. GRPO with the ``success`` reward must then raise the success rate of sampled
answers, measured by ``lakeshift predict --temperature 1`` and ``lakeshift score`` on 128 samples before and
after, by a margin that chance cannot produce.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from model_fixtures import generate_split

from lakeshift.cli import main
from lakeshift.data.maps import record_from_map
from lakeshift.env import FrozenLakeMap


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    generate_split(root, "id-train", sizes=(3,), count=4, cots=("none", "grid"), train=True, seed=1)
    return root


@pytest.fixture(scope="module")
def sft_run(data, tmp_path_factory):
    """A micro model that has seen the answers a little: it writes boxes, not always the right ones."""
    run = tmp_path_factory.mktemp("runs") / "sft"
    argv = ["train", "--data", str(data), "--input", "grid", "--cot", "none", "--model", "micro"]
    argv += [
        "--out",
        str(run),
        "--prompt",
        "map-only",
        "--max-steps",
        "20",
        "--batch-size",
        "4",
        "--lr",
        "5e-3",
    ]
    assert main(argv) == 0
    return run


def grpo_argv(data: Path, model: Path | str, out: Path, *extra: str) -> list[str]:
    argv = ["train", "--method", "grpo", "--data", str(data), "--input", "grid", "--cot", "none"]
    return [*argv, "--model", str(model), "--out", str(out), *extra]


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.slow  # the SFT fixture trains a micro model first
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--reward", "succes"], "unknown reward 'succes'"),
        (["--reward", "success=much"], "weight of 'success' is not a number: 'much'"),
        (["--num-generations", "1"], "argument --num-generations: must be an integer >= 2, got '1'"),
        (["--reward", "faithful"], "'faithful' needs a CoT format that writes a trace"),
        (["--batch-size", "3"], "not a multiple of --num-generations 8"),
        (["--preset", "paper"], "--preset is an SFT option"),
        (["--cot", "grid"], "was trained on cot_format 'none'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_model_loads(
    data, sft_run, tmp_path, capsys, extra, message
):
    out = tmp_path / "out"
    assert main(grpo_argv(data, sft_run, out, *extra)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_a_named_size_cannot_start_grpo(data, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(grpo_argv(data, "micro", out)) == 2
    err = capsys.readouterr().err
    assert "named size is a model with random weights" in err and "run folder" in err
    assert not out.exists()


def test_grpo_options_are_refused_under_sft(data, tmp_path, capsys):
    argv = ["train", "--data", str(data), "--input", "grid", "--cot", "none", "--model", "micro"]
    assert main([*argv, "--out", str(tmp_path / "o"), "--reward", "success"]) == 2
    assert "--reward is a --method grpo option" in capsys.readouterr().err


def test_default_learning_rate_follows_where_the_model_came_from():
    from lakeshift.models.grpo import GrpoOptions, resolve_grpo_hparams

    opts = GrpoOptions("d", "grid", "none", "m", "o")
    named_sft = {"model": {"kind": "named"}}
    grpo_after_named = {"model": {"kind": "path"}, "init": {"from_named_size": True}}
    for init, lr in (
        (named_sft, 1e-4),
        (grpo_after_named, 1e-4),
        ({"model": {"kind": "hub"}}, 1e-6),
        ({}, 1e-6),
    ):
        hp = resolve_grpo_hparams(opts, init, n_prompts=10, world=1, cuda=False)
        assert hp.lr == lr, init
    # an SFT run that fine-tuned a shipped base (its kind is "path"): the spec says it is small
    from lakeshift.models.registry import ModelSpec

    base_sft = {"model": {"kind": "path"}}
    for small, lr in ((True, 1e-4), (False, 1e-6)):
        spec = ModelSpec("runs/x", "path", "runs/x/model", False, "lakeshift_cells", small=small)
        assert resolve_grpo_hparams(opts, base_sft, 10, 1, False, spec).lr == lr
    hp = resolve_grpo_hparams(opts, named_sft, n_prompts=10, world=1, cuda=False)
    # One prompt group of 8 per step: 10 prompts, one epoch = 10 steps, about 5 checkpoints.
    assert hp.batch_size == 8 and hp.prompts_per_step == 1 and hp.save_steps == 2


@pytest.mark.slow
def test_micro_grpo_through_the_cli_logs_rewards_saves_a_model_and_resumes(data, sft_run, tmp_path):
    out = tmp_path / "grpo"
    extra = ["--reward", "success,format=0.5,progress", "--num-generations", "4", "--max-steps", "3"]
    extra += ["--lr", "1e-3", "--save-steps", "2"]
    assert main(grpo_argv(data, sft_run, out, *extra)) == 0

    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "done" and record["method"] == "grpo" and record["global_step"] == 3
    assert record["rewards"] == {"success": 1.0, "format": 0.5, "progress": 1.0}
    assert record["prompt"] == "map-only"  # taken from the initial run's run.json
    assert record["init"]["run"]["model"]["name"] == "micro" and record["init"]["model"] == str(sft_run)
    assert record["init"]["from_named_size"] is True
    cfg = record["grpo_config"]
    assert cfg["num_generations"] == 4 and cfg["reward_weights"] == [1.0, 0.5, 1.0]
    assert cfg["max_completion_length"] == record["hparams"]["max_completion_length"] > 0

    metrics = [m for m in rows(out / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for m in metrics:
        for key in ("rewards/success/mean", "rewards/format/mean", "rewards/progress/mean", "success_rate"):
            assert 0.0 <= m[key] <= 1.0, (key, m)
        assert m["completions/mean_length"] > 0
        assert m["reward"] == pytest.approx(
            m["rewards/success/mean"] + 0.5 * m["rewards/format/mean"] + m["rewards/progress/mean"]
        )
    # One line per sampled completion, its rewards the scorer's verdict.
    done = rows(out / "completions.jsonl")
    assert len(done) == 3 * 4
    for row in done:
        assert row["rewards"]["success"] == float(row["verdict"] == "success")
        assert row["rewards"]["format"] == float(row["verdict"] not in ("no_answer", "unparseable"))
    per_step = {}
    for row in done:
        per_step.setdefault(row["step"], []).append(row["rewards"]["success"])
    assert [sum(v) / len(v) for _, v in sorted(per_step.items())] == pytest.approx(
        [m["rewards/success/mean"] for m in metrics]
    )

    # lakeshift predict loads the GRPO run like an SFT run (formats and prompt from its run.json).
    preds = tmp_path / "preds.jsonl"
    assert (
        main(
            ["predict", "--model", str(out), "--data", str(data), "--split", "id-train", "--out", str(preds)]
        )
        == 0
    )
    got = rows(preds)
    assert len(got) == 4 and all(r["prompt"] == "map-only" and r["cot_format"] == "none" for r in got)

    # Resume: the run lost its final model after checkpoint-2; two more steps continue from there.
    import shutil

    shutil.rmtree(out / "model")
    shutil.rmtree(out / "checkpoint-3", ignore_errors=True)
    extra[extra.index("--max-steps") + 1] = "5"
    assert main(grpo_argv(data, sft_run, out, *extra, "--resume")) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "done" and record["global_step"] == 5 and len(record["resumed"]) == 1
    # Another reward is another run, not a resume.
    assert (
        main(grpo_argv(data, sft_run, out, "--reward", "success", "--num-generations", "4", "--resume")) == 2
    )


# ----- the planted check ------------------------------------------------------------------------------------
TOY = FrozenLakeMap.from_rows(["FFF", "FSF", "FFG"])  # start (1,1), goal (2,2): RIGHT,DOWN or DOWN,RIGHT
MOVES = ("UP", "DOWN", "LEFT", "RIGHT")


def toy_data(root: Path, n: int, seed: int) -> Path:
    """``root/id-train``: ``n`` copies of the toy map, each answered by a uniformly random 2-move plan."""
    split = root / "id-train"
    (split / "sft").mkdir(parents=True)
    rng = random.Random(seed)
    maps, records = [], []
    for i in range(n):
        mid = f"toy-{i:04d}"
        maps.append(record_from_map(TOY, mid, "id-train"))
        plan = [rng.choice(MOVES), rng.choice(MOVES)]
        messages = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "map"},  # --prompt map-only replaces it by the grid
            {"role": "assistant", "content": "\\boxed{" + ", ".join(plan) + "}"},
        ]
        records.append({"id": mid, "messages": messages})
    (split / "maps.jsonl").write_text("".join(json.dumps(m) + "\n" for m in maps))
    (split / "sft" / "grid__none.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


def sampled_success(model: Path, data: Path, out: Path) -> float:
    preds, scored = out.with_suffix(".preds.jsonl"), out.with_suffix(".scored.jsonl")
    argv = ["predict", "--model", str(model), "--data", str(data), "--split", "id-train", "--out", str(preds)]
    assert main([*argv, "--temperature", "1", "--seed", "0"]) == 0
    maps = str(data / "id-train" / "maps.jsonl")
    assert main(["score", "--maps", maps, "--predictions", str(preds), "--out", str(scored)]) == 0
    verdicts = rows(scored)
    return sum(v["success"] for v in verdicts) / len(verdicts)


@pytest.mark.slow
def test_grpo_raises_the_success_rate_that_sft_left_low(tmp_path):
    data = toy_data(tmp_path / "toy", 128, seed=0)
    sft = tmp_path / "sft"
    argv = [
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
        str(sft),
    ]
    assert main([*argv, "--prompt", "map-only", "--epochs", "6", "--batch-size", "8", "--lr", "5e-3"]) == 0
    before = sampled_success(sft, data, tmp_path / "before")

    grpo = tmp_path / "grpo"
    extra = [
        "--reward",
        "success",
        "--num-generations",
        "8",
        "--max-steps",
        "40",
        "--lr",
        "2e-3",
        "--seed",
        "0",
    ]
    assert main(grpo_argv(data, sft, grpo, *extra)) == 0
    after = sampled_success(grpo, data, tmp_path / "after")

    # SFT learnt the format and the random moves: about 2 plans in 16 solve the map.
    # Measured after 40 steps: 99/128 (GRPO seeds 1, 2, 3: 102, 113, 90 of 128).
    assert before < 0.3, before
    # 128 samples: a rise of 0.4 is > 8 standard deviations of the sampling noise at these rates.
    assert after >= before + 0.4, (before, after)
    curve = [m["rewards/success/mean"] for m in rows(grpo / "metrics.jsonl") if "reward" in m]
    assert sum(curve[-10:]) / 10 > sum(curve[:10]) / 10 + 0.3, curve


# ----- studies: SFT -> GRPO ---------------------------------------------------------------------------------
STUDY = """\
name: rl
data:
  splits:
    - name: id-train
      train: true
      groups: [{size: 3, count: 4, hole_prob: 0.2}]
    - name: id-test
      exclude: [id-train]
      groups: [{size: 3, count: 2, hole_prob: 0.2}]
  inputs: [grid]
  cots: [none, grid]
train: {model: micro, prompt: map-only, epochs: 1, lr: 5e-3, seed: 3}
predict: {splits: [id-test]}
models:
  - {input: grid, cot: none}
  - {method: grpo, init: grid__none, train: {reward: "success=1,progress=0.5", num_generations: 4,
      max_steps: 2}}
  - {input: grid, cot: grid}
"""


def plan(tmp_path: Path, text: str):
    from lakeshift.studies import load_study

    path = tmp_path / "study.yaml"
    path.write_text(text)
    return load_study(path, workdir=tmp_path / "work")


def test_a_study_chains_sft_then_grpo(tmp_path):
    study = plan(tmp_path, STUDY)
    names = [(s.kind, s.name) for s in study.stages]
    sft, grpo = names.index(("train", "grid__none")), names.index(("train", "grid__none+grpo"))
    assert sft < grpo < names.index(("predict", "grid__none+grpo/id-test"))
    stage = study.stages[grpo]
    argv = stage.argv
    assert argv[:3] == ["train", "--method", "grpo"]
    assert argv[argv.index("--model") + 1] == str(tmp_path / "work" / "models" / "grid__none")
    assert (
        argv[argv.index("--cot") + 1] == "none"
        and argv[argv.index("--reward") + 1] == "success=1,progress=0.5"
    )
    # Only split and seed come from the study's SFT defaults.
    assert argv[argv.index("--seed") + 1] == "3" and "--epochs" not in argv and "--prompt" not in argv
    predict = study.stages[names.index(("predict", "grid__none+grpo/id-test"))].argv
    assert predict[predict.index("--name") + 1] == "grid__none+grpo"

    # Retraining the init (another SFT setting) changes the GRPO key too; the other SFT model keeps its key.
    before = {s.name: s.key for s in study.stages}
    changed = STUDY.replace(
        "  - {input: grid, cot: none}\n", "  - {input: grid, cot: none, train: {epochs: 2}}\n"
    )
    after = {s.name: s.key for s in plan(tmp_path, changed).stages}
    assert (
        after["grid__none"] != before["grid__none"] and after["grid__none+grpo"] != before["grid__none+grpo"]
    )
    assert after["grid__grid"] == before["grid__grid"]
    # A GRPO setting changes the GRPO stage only.
    changed = STUDY.replace("max_steps: 2", "max_steps: 3")
    after = {s.name: s.key for s in plan(tmp_path, changed).stages}
    assert (
        after["grid__none"] == before["grid__none"] and after["grid__none+grpo"] != before["grid__none+grpo"]
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{method: grpo, init: grid__grid}", "'grid__grid' is not an earlier trained model entry"),
        ("{method: grpo}", "method: grpo needs 'init'"),
        ("{method: ppo, init: grid__none}", "unknown method 'ppo'"),
        ("{input: grid, cot: none, init: grid__none}", "'init' is for method: grpo or predict"),
        ("{method: grpo, init: grid__none, cot: grid}", "differs from its init 'grid__none'"),
        ("{method: grpo, init: grid__none, train: {reward: succes}}", "unknown reward 'succes'"),
        (
            "{method: grpo, init: grid__none, train: {num_generations: 1}}",
            "train.num_generations: must be an integer >= 2, got 1",
        ),
        (
            "{method: grpo, init: grid__none, train: {num_generations: 100000}}",
            "train.num_generations: must be at most 65536",
        ),
        (
            "{method: grpo, init: grid__none, train: {max_completion_length: 2097152}}",
            "train.max_completion_length: must be at most 1048576",
        ),
        ("{method: grpo, init: grid__none, train: {preset: paper}}", "unknown key 'preset'"),
        ("{method: grpo, init: grid__none, model: micro}", "uses its 'init' entry's model"),
    ],
)
def test_bad_grpo_entries_name_key_and_line(tmp_path, entry, message):
    from lakeshift.errors import LakeshiftError

    grpo = STUDY[STUDY.index("  - {method: grpo") : STUDY.index("  - {input: grid, cot: grid}")]
    text = STUDY.replace(grpo, f"  - {entry}\n")
    text = text.replace("  - {input: grid, cot: grid}\n", "") + "  - {input: grid, cot: grid}\n"
    with pytest.raises(LakeshiftError, match=r"study\.yaml:") as err:
        plan(tmp_path, text)
    assert message in str(err.value)
