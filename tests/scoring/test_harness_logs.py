"""Harness logs in lakeshift's scores and report: an inspect ``.eval`` log written by inspect's own ``eval()``
(its ``mockllm`` model, offline) and an lmms-eval ``--log_samples`` file are scored like predictions files,
the maps they evaluated taken from the log, never the unasked ones counted as missing."""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import pytest
from model_fixtures import generate_split
from suite_fixtures import write_jsonl

from lakeshift.cli import main
from lakeshift.scoring.harness_logs import prediction_rows

inspect_ai = pytest.importorskip("inspect_ai", reason="the inspect extra is not installed")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    generate_split(root, "id-test", sizes=(3, 4), count=4, cots=("grid",), seed=3)
    return root


def maps_of(data: Path) -> list[dict]:
    return [json.loads(x) for x in (data / "id-test" / "maps.jsonl").read_text().splitlines()]


def right_or_wrong(rec: dict, k: int) -> str:
    return "\\boxed{" + ", ".join(rec["optimal_path"]) + "}" if k % 2 == 0 else "\\boxed{}"


@pytest.fixture(scope="module")
def inspect_log(data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from lakeshift.integrations.inspect_ai import frozenlake

    sft = [json.loads(x) for x in (data / "id-test" / "sft" / "grid__grid.jsonl").read_text().splitlines()]
    by_id = {m["id"]: (k, m) for k, m in enumerate(maps_of(data))}
    by_prompt = {
        r["messages"][1]["content"]: right_or_wrong(by_id[r["id"]][1], by_id[r["id"]][0]) for r in sft
    }

    def answer(messages, tools, tool_choice, config):
        output = ModelOutput.from_content(model="mockllm", content=by_prompt[messages[-1].text])
        output.usage = ModelUsage(input_tokens=1, output_tokens=5, total_tokens=6)
        return output

    model = get_model("mockllm/model", custom_outputs=answer, memoize=False)
    task = frozenlake(split="id-test", input="grid", cot="grid", data=str(data), per_size=3)
    logs = tmp_path_factory.mktemp("logs")
    # per_size 3 and --limit 5: five of the eight maps were asked.
    [log] = inspect_eval(task, model=model, log_dir=str(logs), display="none", limit=5)
    assert log.status == "success"
    (path,) = logs.glob("*.eval")
    return path, log.samples


def test_an_inspect_log_reports_its_evaluated_maps_with_inspects_accuracy(
    inspect_log: tuple[Path, list], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path, samples = inspect_log
    runs = tmp_path / "runs" / "inspect"
    runs.mkdir(parents=True)
    (runs / path.name).write_bytes(path.read_bytes())
    out = tmp_path / "rep"
    assert (
        main(["report", str(tmp_path / "runs"), "--out", str(out), "--no-baselines", "--examples", "5"]) == 0
    )
    printed = capsys.readouterr()
    assert "no prediction" not in printed.out + printed.err
    (row,) = [r for r in csv.DictReader((out / "by_split.csv").open())]
    successes = sum(s.scores["frozenlake_scorer"].value == 1.0 for s in samples)
    assert (row["model"], row["input_format"], row["cot_format"]) == ("mockllm/model", "grid", "grid")
    assert int(row["n"]) == len(samples) == 5
    assert float(row["acc"]) == pytest.approx(successes / 5, abs=1e-4)
    # lakeshift score reads the log too, against the maps its scorer read.
    maps = Path(prediction_rows(path)[0][1]["maps"])
    for given in (path, runs):  # the log, or a folder holding it
        assert main(["score", "--maps", str(maps), "--predictions", str(given)]) == 0
        assert f"accuracy {successes}/5 " in capsys.readouterr().out


def test_an_lmms_eval_samples_file_reports_its_logged_maps(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from lakeshift.integrations.lmms_eval import score_record

    maps = maps_of(data)[:3]  # lmms-eval --limit 3: the first three documents
    rows = []
    for k, doc in enumerate(maps):
        output = right_or_wrong(doc, k)
        record = score_record(doc, output)
        rows.append(
            {"doc_id": k, "target": "", "resps": [[output]], "filtered_resps": [output], "accuracy": record}
        )
    runs = tmp_path / "runs"
    write_jsonl(runs / "tiny-vl" / "20261205_0101_samples_frozenlake_id-test_grid.jsonl", rows)
    out = tmp_path / "rep"
    argv = ["report", str(runs), "--out", str(out), "--data", str(data), "--no-baselines", "--examples", "5"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "no prediction" not in printed.out + printed.err
    (row,) = [r for r in csv.DictReader((out / "by_split.csv").open())]
    assert (row["model"], row["input_format"], row["split"]) == ("tiny-vl", "grid", "id-test")
    assert int(row["n"]) == 3 and int(row["success"]) == 2


def documented_report_commands() -> dict[str, list[str]]:
    """The ``lakeshift report`` command lines of docs/harnesses.md's "Back to lakeshift's report", by the
    harness their comment names."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "harnesses.md").read_text(encoding="utf-8")
    section = page.split("\n## Back to lakeshift's report\n", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands, harness = {}, ""
    for line in block.splitlines():
        if line.startswith("# "):
            harness = line[2:].split(" ", 1)[0]
        elif line.startswith("lakeshift report "):
            commands[harness] = shlex.split(line)[1:]
    return commands


def test_the_harness_page_s_report_commands_report_the_logs_where_the_harnesses_write_them(
    inspect_log: tuple[Path, list],
    data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    from lakeshift.integrations.lmms_eval import score_record

    commands = documented_report_commands()
    assert set(commands) == {"inspect", "lmms-eval"}
    monkeypatch.chdir(tmp_path)
    path, samples = inspect_log
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / path.name).write_bytes(path.read_bytes())  # inspect's default log folder
    doc = maps_of(data)[0]
    write_jsonl(
        tmp_path / "results" / "tiny-vl" / "20261205_0101_samples_frozenlake_id-test_grid.jsonl",
        [{"doc_id": 0, "resps": [["\\boxed{}"]], "accuracy": score_record(doc, "\\boxed{}")}],
    )
    for harness, model, n in (("inspect", "mockllm/model", len(samples)), ("lmms-eval", "tiny-vl", 1)):
        argv = [str(data) if a == "DATA" else a for a in commands[harness]]
        assert main([*argv, "--no-baselines"]) == 0, capsys.readouterr().err
        (row,) = list(csv.DictReader((tmp_path / "report" / "by_split.csv").open()))
        assert (row["model"], int(row["n"])) == (model, n), harness
        assert (tmp_path / "report" / "report.html").is_file()


@pytest.mark.slow
def test_a_json_log_of_inspects_cli_on_a_model_trained_here_reports_as_its_scorer_scored(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``inspect eval lakeshift/frozenlake --model lakeshift/RUN --limit 3 --log-format json`` on a tiny cells
    model trained here (offline): the report counts the three maps inspect evaluated, each with the verdict
    inspect's scorer gave it; a log of another task in the folder is passed over."""
    import os
    import subprocess
    import sys

    run = tmp_path / "run"
    train = ["train", "--data", str(data), "--split", "id-test", "--input", "grid", "--cot", "grid"]
    train += ["--model", "micro-cells", "--max-steps", "20", "--out", str(run)]
    assert main(train) == 0
    logs = tmp_path / "runs" / "inspect"
    argv = ["eval", "lakeshift/frozenlake", "-T", f"data={data}", "-T", "cot=grid", "--limit", "3"]
    argv += ["--model", f"lakeshift/{run}", "--max-tokens", "24", "--log-dir", str(logs)]
    argv += ["--log-format", "json", "--display", "none"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "inspect_ai", *argv], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (log_file,) = logs.glob("*.json")
    log = json.loads(log_file.read_text())
    other = dict(log, eval={**log["eval"], "task": "other/task"})
    (logs / "other-task.json").write_text(json.dumps(other))
    verdicts = {s["id"]: s["scores"]["frozenlake_scorer"]["explanation"] for s in log["samples"]}
    out = tmp_path / "rep"
    assert (
        main(["report", str(tmp_path / "runs"), "--out", str(out), "--no-baselines", "--examples", "0"]) == 0
    )
    capsys.readouterr()
    (scored_file,) = (out / "scored").glob("*.jsonl")
    scored = {r["id"]: r["verdict"] for r in map(json.loads, scored_file.read_text().splitlines())}
    assert scored == verdicts and len(scored) == 3
