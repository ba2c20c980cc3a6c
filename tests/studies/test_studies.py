"""Studies: config validation (errors name key and line), the plan of the shipped configs, caching."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from lakeshift.cli import main
from lakeshift.errors import LakeshiftError
from lakeshift.studies import load_study

REPO = Path(__file__).resolve().parents[2]

TINY_STUDY = """\
name: tiny
data:
  splits:
    - name: id-train
      train: true
      groups:
        - {size: 3, count: 6, hole_prob: 0.2}
        - {size: 4, count: 6, hole_prob: 0.2}
    - name: id-test
      exclude: [id-train]
      groups:
        - {size: 3, count: 2, hole_prob: 0.2}
        - {size: 4, count: 2, hole_prob: 0.2}
    - name: ood-size
      exclude: [id-train]
      groups:
        - {size: 7, count: 2, hole_prob: 0.1}
  images: false
  inputs: [grid]
  cots: [none, grid]
  workers: 1
train:
  model: micro
  prompt: map-only
  epochs: 1
predict:
  splits: [id-test, ood-size]
  per_size: 1
  max_new_tokens: 64
models:
  - {input: grid, cot: none}
  - {input: grid, cot: grid}
report:
  examples: 10
"""


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("configs/studies/paper-table1.yaml", {"generate": 1, "train": 16, "predict": 60, "report": 1}),
        ("configs/studies/paper-table3.yaml", {"generate": 1, "train": 12, "predict": 12, "report": 1}),
        ("configs/studies/zero-shot-api.yaml", {"generate": 1, "predict": 12, "report": 1}),
        ("configs/studies/cpu-study.yaml", {"generate": 1, "train": 12, "predict": 36, "report": 1}),
        ("configs/studies/cpu-study-epochs.yaml", {"generate": 1, "train": 12, "predict": 36, "report": 1}),
        ("configs/studies/cpu-study-embedded.yaml", {"generate": 1, "train": 4, "predict": 4, "report": 1}),
        ("configs/studies/cpu-grid-cot-every.yaml", {"generate": 1, "train": 2, "predict": 6, "report": 1}),
        ("configs/studies/cpu-ood-moonshot.yaml", {"generate": 1, "train": 1, "predict": 3, "report": 1}),
        ("configs/studies/cpu-grid-pair.yaml", {"generate": 1, "train": 2, "predict": 6, "report": 1}),
        ("configs/studies/paper-protocol.yaml", {"generate": 1, "train": 14, "predict": 42, "report": 1}),
        (
            "configs/studies/paper-protocol-table-cells.yaml",
            {"generate": 1, "train": 4, "predict": 12, "report": 1},
        ),
        ("configs/studies/ood-strict.yaml", {"generate": 1, "train": 9, "predict": 55, "report": 1}),
        ("configs/studies/ood-strict-wave.yaml", {"generate": 1, "train": 7, "predict": 41, "report": 1}),
        ("src/lakeshift/studies/demo.yaml", {"generate": 1, "train": 2, "predict": 6, "report": 1}),
    ],
)
def test_shipped_configs_plan(config: str, expected: dict[str, int], tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)  # configs name files relative to the repository (configs/suites/suite-ood.yaml)
    study = load_study(REPO / config, workdir=tmp_path)
    assert study.summary() == expected


def test_the_compose_arm_plans_once_its_base_is_built_and_shares_the_strict_tracks_data(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from lakeshift.models.registry import build_named

    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(REPO / "configs")
    assert main(["run", "configs/studies/ood-strict-compose.yaml", "--dry-run"]) != 0
    line = (
        (REPO / "configs/studies/ood-strict-compose.yaml")
        .read_text()
        .splitlines()
        .index("  model: ./runs/mini-cells-compose-base")
    )
    assert f"ood-strict-compose.yaml:{line + 1}: train.model: --model ./runs/mini-cells-compose-base" in (
        capsys.readouterr().err
    )
    base = tmp_path / "runs/mini-cells-compose-base"
    model, tokenizer = build_named("micro", ["Grid:\nP  .  G\nPlan: \\boxed{RIGHT, RIGHT}"])
    model.save_pretrained(base)  # any checkpoint stands in for the 30-minute base
    tokenizer.save_pretrained(base)
    compose = load_study("configs/studies/ood-strict-compose.yaml", workdir=tmp_path / "w")
    strict = load_study("configs/studies/ood-strict.yaml", workdir=tmp_path / "w")
    assert compose.summary() == {"generate": 1, "train": 1, "predict": 5, "report": 1}
    assert compose.stages[0].key == strict.stages[0].key  # one data stage for both configs
    train = compose.stages[1]
    assert train.argv[train.argv.index("--model") + 1] == "./runs/mini-cells-compose-base"
    assert train.argv[train.argv.index("--max-minutes") + 1] == "15"


def test_the_wide_track_plans_from_its_shipped_base(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(REPO / "configs")
    assert main(["run", "configs/studies/ood-wide.yaml", "--dry-run", "--workdir", str(tmp_path / "w")]) == 0
    study = load_study("configs/studies/ood-wide.yaml", workdir=tmp_path / "w")
    assert study.summary() == {"generate": 1, "train": 8, "predict": 50, "report": 1}
    for s in study.stages:
        if s.kind == "train" and "--method" not in s.argv:  # GRPO starts from its SFT entry's run
            assert s.argv[s.argv.index("--model") + 1] == "mini-cells-trace-wide-base"
    grpo = [s for s in study.stages if "--method" in s.argv]
    assert [s.name for s in grpo] == ["grid__none@wide15-aug+grpo"]
    assert grpo[0].argv[grpo[0].argv.index("--model") + 1].endswith("models/grid__none@wide15-aug")


def test_paper_table1_has_the_papers_rows(tmp_path: Path) -> None:
    study = load_study(REPO / "configs/studies/paper-table1.yaml", workdir=tmp_path)
    trained = sorted(s.name for s in study.stages if s.kind == "train")
    assert len(trained) == 16
    assert "grid__grid+desc" in trained and "desc__table+desc" in trained and "image__desc" in trained
    # Every predict stage of a fine-tuned model reads that model's run folder.
    for s in study.stages:
        if s.kind == "predict" and "zero-shot" not in s.name:
            assert s.argv[s.argv.index("--model") + 1].startswith(str(tmp_path / "models"))


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        (
            "models:\n  - {input: grid, cot: none, colour: red}\n",
            ":4: models[0].colour: unknown key 'colour'",
        ),
        ("models:\n  - {input: grid, cot: zigzag}\n", ":4: models[0].cot: unknown CoT format 'zigzag'"),
        ("models:\n  - {input: braille, cot: none}\n", ":4: models[0].input: unknown input format 'braille'"),
        (
            "predict:\n  splits: [ood-moon]\nmodels:\n  - {input: grid, cot: none}\n",
            "predict.splits: unknown split 'ood-moon'",
        ),
        ("models:\n  - {input: image, cot: none}\n", "models[0].input: image input needs images"),
        (
            "models:\n  - {input: grid, cot: none, train: {epochs: many}}\n",
            "models[0].train.epochs: expected",
        ),
        ("models: []\n", "models: the study has no models"),
        (
            "models:\n  - {input: grid, cot: none, zero_shot: 1}\n",
            ":4: models[0].zero_shot: expected true or false, got 1",
        ),
        (
            "models:\n  - {input: grid, cot: none, train: 5}\n",
            ":4: models[0].train: expected dict, got int 5",
        ),
        (
            "report: {examples: -1}\nmodels:\n  - {input: grid, cot: none}\n",
            ":3: report.examples: must be an integer >= 0, got -1",
        ),
        (
            "report: {baselines: 1}\nmodels:\n  - {input: grid, cot: none}\n",
            ":3: report.baselines: expected true or false, got 1",
        ),
    ],
)
def test_bad_configs_name_key_and_line(tmp_path: Path, snippet: str, message: str, capsys) -> None:
    path = write(tmp_path, "name: bad\ndata: {suite: tiny}\n" + snippet)
    rc = main(["run", str(path), "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err
    assert str(path) in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_a_setting_a_study_turns_off_reaches_its_stage_as_off(tmp_path: Path) -> None:
    text = """\
        name: turned-off
        data: {suite: tiny, images: false, inputs: [grid], cots: [none, grid]}
        train: {model: micro, lora: true, epochs: 1}
        models:
          - {input: grid, cot: none, train: {lora: false}}
          - {input: grid, cot: grid, train: {model: mini-cells-trace-player-base, cells: {player: false}}}
        report: {baselines: false}
        """
    stages = {s.name: s.argv for s in load_study(write(tmp_path, text), tmp_path / "w").stages}
    assert "--lora" not in stages["grid__none"]  # the entry's false over the study's true
    player = stages["grid__grid"]
    assert "--lora" in player and player[player.index("--cells") + 1] == "player=false"
    assert "--no-images" in stages["data"] and "--no-baselines" in stages["report"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{suite: tiny, inputs: [grid, png]}", ":4: data.inputs[1]: unknown input format 'png' (known: "),
        ("{suite: tiny, workers: 0}", ":4: data.workers: must be an integer >= 1, got 0"),
        ("{suite: tiny, images: 1}", ":4: data.images: expected true or false, got 1"),
        (
            "{suite: tiny, id_source_missing: skip}",
            ":4: data.id_source_missing: expected one of error, generate",
        ),
        ("{suite: tiny, colour: red}", ":4: data.colour: unknown key 'colour'"),
    ],
)
def test_a_bad_data_section_names_key_and_line(tmp_path: Path, data: str, message: str) -> None:
    path = write(tmp_path, f"name: bad\nmodels: [{{input: grid, cot: none}}]\ndata:\n  {data}\n")
    with pytest.raises(LakeshiftError, match=re.escape(f"{path}{message}")):
        load_study(path)


def test_a_missing_id_source_that_the_study_generates_instead_is_not_passed_on(
    tmp_path: Path, capsys
) -> None:
    text = f"""\
        name: no-mirage
        data: {{suite: tiny, id_source: {tmp_path / "nowhere"}, id_source_missing: generate}}
        models: [{{input: grid, cot: none}}]
        """
    data = load_study(write(tmp_path, text), tmp_path / "w").stages[0]
    assert "--id-source" not in data.argv
    assert "id-train and id-test are generated instead" in capsys.readouterr().err
    with pytest.raises(LakeshiftError, match=r":2: data\.id_source: no such folder: "):
        load_study(write(tmp_path, text.replace("generate}", "error}"), "error.yaml"), tmp_path / "w")


def test_model_format_the_data_does_not_write(tmp_path: Path, capsys) -> None:
    path = write(
        tmp_path, "name: x\ndata: {suite: tiny, cots: [none]}\nmodels:\n  - {input: grid, cot: desc}\n"
    )
    assert main(["run", str(path), "--dry-run"]) == 2
    assert (
        f"{path}:4: models[0].cot: 'desc' is not among the formats the data writes" in capsys.readouterr().err
    )


def test_unknown_top_level_key_and_bad_yaml(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, "name: x\ndata: {suite: tiny}\nmodels: [{input: grid, cot: none}]\nmodles: []\n")
    assert main(["run", str(path), "--dry-run"]) == 2
    assert f"{path}:4: modles: unknown key 'modles'" in capsys.readouterr().err
    path = write(tmp_path, "name: x\ndata: [unclosed\n", "broken.yaml")
    assert main(["run", str(path), "--dry-run"]) == 2
    assert "invalid YAML" in capsys.readouterr().err


def test_changing_one_model_replans_only_that_model(tmp_path: Path) -> None:
    base = write(tmp_path, TINY_STUDY, "a.yaml")
    changed = write(
        tmp_path,
        TINY_STUDY.replace("{input: grid, cot: grid}", "{input: grid, cot: grid, train: {epochs: 2}}"),
        "b.yaml",
    )
    a = {s.name: s.key for s in load_study(base, tmp_path).stages}
    b = {s.name: s.key for s in load_study(changed, tmp_path).stages}
    same = {name for name in a if a[name] == b[name]}
    assert same == {"data", "grid__none", "grid__none/id-test", "grid__none/ood-size"}


def test_a_suite_file_names_the_splits_and_its_content_keys_the_data(tmp_path: Path, capsys) -> None:
    splits = TINY_STUDY.split("data:\n")[1].split("  images:")[0]
    suite = write(tmp_path, splits.replace("name: ood-size", "name: val-ood"), "suite.yaml")
    study_text = TINY_STUDY.replace(splits, f"  suite: {suite}\n").replace("ood-size]", "val-ood]")
    config = write(tmp_path, study_text)
    study = load_study(config, tmp_path / "w")
    assert {s.name for s in study.stages} >= {"grid__none/val-ood", "grid__grid/val-ood"}
    before = {s.name: s.key for s in study.stages}
    suite.write_text(suite.read_text().replace("count: 6", "count: 7"))
    after = {s.name: s.key for s in load_study(config, tmp_path / "w").stages}
    assert not any(before[name] == after[name] for name in before)
    suite.unlink()
    assert main(["run", str(config), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data.suite" in err and f"{suite}: no such suite file" in err


def test_a_predict_entry_samples_its_init_model_and_follows_its_training(tmp_path: Path, capsys) -> None:
    sampling = "predict: {decoding: frozen_ood, samples: 4}"
    entry = f"  - {{name: grid__none@k4, method: predict, init: grid__none, {sampling}}}\n"
    text = TINY_STUDY.replace("report:", entry + "report:")
    study = load_study(write(tmp_path, text), tmp_path / "w")
    stages = {s.name: s for s in study.stages}
    assert "grid__none@k4" not in stages  # no training of its own
    argv = stages["grid__none@k4/id-test"].argv
    assert argv[argv.index("--model") + 1] == str(tmp_path / "w" / "models" / "grid__none")
    assert argv[argv.index("--samples") + 1] == "4" and argv[argv.index("--decoding") + 1] == "frozen_ood"
    retrained = text.replace("{input: grid, cot: none}", "{input: grid, cot: none, train: {epochs: 2}}")
    again = {s.name: s.key for s in load_study(write(tmp_path, retrained, "b.yaml"), tmp_path / "w").stages}
    assert again["grid__none@k4/id-test"] != stages["grid__none@k4/id-test"].key
    for bad, message in (
        (entry.replace("name: grid__none@k4, ", ""), "method: predict needs a 'name' of its own"),
        (
            entry.replace("init: grid__none", "init: grid__none, train: {epochs: 2}"),
            "method: predict trains nothing",
        ),
        (
            entry.replace("init: grid__none", "init: grid__nope"),
            "'grid__nope' is not an earlier trained model",
        ),
    ):
        assert (
            main(["run", str(write(tmp_path, TINY_STUDY.replace("report:", bad + "report:"))), "--dry-run"])
            == 2
        )
        assert message in capsys.readouterr().err


def test_models_option_keeps_the_data_and_the_matching_models_and_names_a_pattern_that_matches_none(
    tmp_path: Path, capsys
) -> None:
    study = load_study(write(tmp_path, TINY_STUDY), tmp_path / "w")
    part = study.only(["*__none"])
    expected = ["data", "grid__none", "grid__none/id-test", "grid__none/ood-size"]
    assert [s.name for s in part.stages] == expected
    assert [s.name for s in study.only(["grid__*"]).stages] == [s.name for s in study.stages[:-1]]
    rc = main(["run", str(tmp_path / "study.yaml"), "--dry-run", "--models", "grid__none", "desc__*"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "--models 'desc__*' matches no model of study 'tiny' (its models: grid__none, grid__grid)" in err


@pytest.mark.slow
def test_tiny_study_end_to_end_then_cached(tmp_path: Path, capsys) -> None:
    import csv
    import json

    path = write(tmp_path, TINY_STUDY)
    workdir = tmp_path / "work"
    # first one model (a study split across sessions), then the rest and the report
    assert main(["run", str(path), "--workdir", str(workdir), "--models", "grid__g*"]) == 0
    assert "no report: part of the study ran" in capsys.readouterr().err
    assert (workdir / "predictions" / "grid__grid" / "id-test.jsonl").is_file()
    assert not (workdir / "models" / "grid__none").exists() and not (workdir / "report").exists()
    assert main(["run", str(path), "--workdir", str(workdir)]) == 0
    assert "[cached] train    grid__grid" in capsys.readouterr().err
    report = workdir / "report"
    assert (report / "report.html").is_file() and (report / "table1.md").is_file()

    # The report's accuracy per (model, split, size) equals a recount of the predictions' verdicts.
    recount: dict[tuple[str, str, int], list[bool]] = {}
    for scored in (report / "scored").glob("*.jsonl"):
        for line in scored.read_text().splitlines():
            rec = json.loads(line)
            recount.setdefault((rec["model"], rec["split"], rec["size"]), []).append(rec["success"])
    with (report / "by_size.csv").open() as f:
        rows = list(csv.DictReader(f))
    checked = 0
    for row in rows:
        key = (row["model"], row["split"], int(row["size"]))
        if key in recount:
            assert int(row["n"]) == len(recount[key])
            assert float(row["acc"]) == pytest.approx(sum(recount[key]) / len(recount[key]))
            checked += 1
    assert checked >= 6  # 2 models x (2 id-test sizes + 1 ood-size size)
    assert {"grid__none", "grid__grid"} <= {model for model, _, _ in recount}

    capsys.readouterr()
    assert main(["run", str(path), "--workdir", str(workdir)]) == 0
    assert "nothing to do: every stage is cached" in capsys.readouterr().err


def test_report_reference_reaches_the_report_stage_and_an_unknown_one_is_a_config_error(tmp_path, capsys):
    good = write(tmp_path, TINY_STUDY.replace("  examples: 10\n", "  examples: 10\n  reference: paper\n"))
    report = next(s for s in load_study(good, tmp_path / "w").stages if s.kind == "report")
    assert report.argv[report.argv.index("--reference") + 1] == "paper"
    bad = write(
        tmp_path, TINY_STUDY.replace("  examples: 10\n", "  examples: 10\n  reference: nope\n"), "b.yaml"
    )
    assert main(["run", str(bad), "--dry-run", "--workdir", str(tmp_path / "w2")]) == 2
    err = capsys.readouterr().err
    assert "report.reference" in err and "'nope'" in err and "known: paper" in err and err.count("\n") == 1


# 4-minute trainings (no epoch bound: the budget ends them)
BUDGET_STUDY = TINY_STUDY.replace("  model: micro\n", "  model: mini\n  max_minutes: 4\n").replace(
    "  epochs: 1\n", ""
)


def test_dry_run_estimates_the_time_and_refuses_a_study_over_its_budget(tmp_path: Path, capsys) -> None:
    fits = write(tmp_path, "budget_minutes: 20\n" + BUDGET_STUDY)
    assert main(["run", str(fits), "--dry-run", "--workdir", str(tmp_path / "w")]) == 0
    err = capsys.readouterr().err
    # two 4-minute trainings and their model loads, and a few tiny predictions
    from lakeshift.studies.estimates import STAGE_OVERHEAD_S

    estimate = next(line for line in err.splitlines() if line.startswith("estimated time"))
    train = 2 * (4 * 60 + STAGE_OVERHEAD_S) / 60
    assert f"train {train:.0f}," in estimate and "predict " in estimate, estimate

    over = write(tmp_path, "budget_minutes: 5\n" + BUDGET_STUDY, "over.yaml")
    for argv in (["run", str(over), "--dry-run"], ["run", str(over)]):
        assert main([*argv, "--workdir", str(tmp_path / "w2")]) == 2
        err = capsys.readouterr().err
        assert f"about {train:.0f} minutes" in err and "budget_minutes: 5" in err
    assert not (tmp_path / "w2" / "data").exists()  # refused before any work


def test_training_and_prediction_estimates_follow_budget_epochs_and_maps() -> None:
    from lakeshift.studies import estimates

    groups = [(3, 1000), (6, 1000)]
    by_budget = estimates.train_seconds(groups, "grid", "none", "mini", epochs=None, max_minutes=5)
    assert by_budget == estimates.STAGE_OVERHEAD_S + 300
    one = estimates.train_seconds(groups, "grid", "none", "mini", epochs=1, max_minutes=None)
    two = estimates.train_seconds(groups, "grid", "none", "mini", epochs=2, max_minutes=None)
    assert one is not None and two is not None
    assert two - estimates.STAGE_OVERHEAD_S == pytest.approx(2 * (one - estimates.STAGE_OVERHEAD_S))
    # the budget ends a long run first; a model without a measured rate has no epoch estimate
    assert estimates.train_seconds(groups, "grid", "none", "mini", epochs=1e6, max_minutes=5) == by_budget
    no_rate = estimates.train_seconds(groups, "grid", "none", "some/hub-model", epochs=1, max_minutes=None)
    assert no_rate is None
    # longer answers and more maps take longer
    short = estimates.predict_seconds([(6, 64)], "grid", "none")
    assert (
        short
        < estimates.predict_seconds([(6, 64)], "grid", "grid")
        < estimates.predict_seconds([(10, 64)], "grid", "grid")
    )
    assert short < estimates.predict_seconds([(6, 640)], "grid", "none")


def test_concurrent_trainings_share_the_clock_in_the_estimate_and_the_budget(tmp_path: Path, capsys) -> None:
    from lakeshift.studies.estimates import STAGE_OVERHEAD_S

    one_model = (4 * 60 + STAGE_OVERHEAD_S) / 60
    at_once = write(tmp_path, "train_jobs: 2\nbudget_minutes: 6\n" + BUDGET_STUDY)
    assert main(["run", str(at_once), "--dry-run", "--workdir", str(tmp_path / "w")]) == 0
    estimate = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("estimated"))
    assert f"train {one_model:.0f}," in estimate and "2 trainings at a time" in estimate, estimate
    one_by_one = write(tmp_path, "budget_minutes: 6\n" + BUDGET_STUDY, "b.yaml")  # the same, in turn
    assert main(["run", str(one_by_one), "--dry-run", "--workdir", str(tmp_path / "w")]) == 2
    assert "more than its budget_minutes: 6" in capsys.readouterr().err
    bad = write(tmp_path, "train_jobs: 0\n" + BUDGET_STUDY, "c.yaml")
    assert main(["run", str(bad), "--dry-run", "--workdir", str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err.strip().endswith("c.yaml:1: train_jobs: must be an integer >= 1, got 0")


@pytest.mark.slow
def test_trainings_at_once_each_get_their_share_of_the_cores_then_cache(tmp_path: Path, capsys, monkeypatch):
    import json
    import os

    from lakeshift.studies import run as study_run

    monkeypatch.setattr(study_run, "PROGRESS_EVERY_S", 0.0)

    path = write(tmp_path, "train_jobs: 2\n" + TINY_STUDY)
    workdir = tmp_path / "work"
    assert main(["run", str(path), "--workdir", str(workdir)]) == 0
    err = capsys.readouterr().err
    trainings = err[err.index("2 models, 2 at a time") : err.index("== predict")]
    assert "\r" not in trainings  # their progress bars are shown as whole lines, named
    for model in ("grid__none", "grid__grid"):
        assert f"[{model}] " in err  # each training's own lines, named
        record = json.loads((workdir / "models" / model / "run.json").read_text())
        assert record["status"] == "done"
        assert record["host"]["threads"] == max(1, (os.cpu_count() or 1) // 2)
        assert (workdir / "predictions" / model / "id-test.jsonl").is_file()
    assert (workdir / "report" / "table1.md").is_file()
    assert main(["run", str(path), "--workdir", str(workdir)]) == 0
    assert "nothing to do: every stage is cached" in capsys.readouterr().err


def test_a_study_that_extends_another_plans_as_its_expanded_form(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(TINY_STUDY)
    child = tmp_path / "child.yaml"
    child.write_text(
        f"extends: {base}\nname: child\ntrain:\n  epochs: 2\nmodels:\n  - {{input: grid, cot: grid}}\n"
    )
    expanded = tmp_path / "expanded.yaml"
    expanded.write_text(
        TINY_STUDY.replace("name: tiny", "name: child")
        .replace("  epochs: 1", "  epochs: 2")
        .replace("  - {input: grid, cot: none}\n", "")
    )
    got, want = load_study(child, tmp_path / "w"), load_study(expanded, tmp_path / "w")
    assert got.name == want.name == "child"
    assert [(s.key, s.argv) for s in got.stages] == [(s.key, s.argv) for s in want.stages]
    assert [s.name for s in got.stages if s.kind == "train"] == ["grid__grid"]


def test_an_extended_study_names_the_file_and_line_of_each_mistake(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(TINY_STUDY)
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {base}\nname: child\ntrain:\n  lr: -1\n")
    with pytest.raises(LakeshiftError, match=rf"{child}:4: train\.lr: must be a number > 0"):
        load_study(child)
    base.write_text(TINY_STUDY.replace("  epochs: 1", "  epochs: 0"))
    child.write_text(f"extends: {base}\nname: child\n")
    line = TINY_STUDY.splitlines().index("  epochs: 1") + 1
    with pytest.raises(LakeshiftError, match=rf"{base}:{line}: train\.epochs: must be a number > 0"):
        load_study(child)
    base.write_text(f"extends: {child}\nname: base\n")
    with pytest.raises(LakeshiftError, match=r"extends: .* \(a cycle\)"):
        load_study(child)


@pytest.mark.parametrize("name", ["'../../escape'", "''", "null", "a/b", ".hidden"])
def test_a_study_name_that_is_not_a_plain_name_is_refused(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.cli_checks import one_error_line, quiet_main

    # The default workdir is runs/NAME: a name such as ../../escape, '' or null would put it elsewhere.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deep" / "er").mkdir(parents=True)
    path = write(tmp_path, f"name: {name}\ndata: {{suite: tiny}}\nmodels:\n  - {{input: grid, cot: none}}\n")
    for argv in (["run", path, "--dry-run"], ["run", path]):
        code, err = quiet_main(argv)
        one_error_line(code, err, f"{path}:1: name: study name", "must be a plain name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "study.yaml"]


def test_a_split_name_that_is_a_path_never_leaves_the_task_folder(tmp_path: Path) -> None:
    from tests.cli_checks import one_error_line, quiet_main

    out = tmp_path / "lm" / "x"
    for splits in ("../../pwn", "id-test,..", ".hidden"):
        code, err = quiet_main(["lmms-eval-tasks", "--out", out, "--splits", splits])
        one_error_line(code, err, "--splits: split", "must be a plain name")
    assert not (tmp_path / "lm").exists() and not (tmp_path / "pwn.jsonl").exists()
