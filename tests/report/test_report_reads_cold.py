"""A report that reads cold: a run card per trained model (from its run.json), the paper's published rows
set apart after the user's, an interval on every plotted point, a progress that is a share (never
negative), and no ``None`` in the page's header."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from suite_fixtures import make_maps, make_suite, noisy_predictions, write_jsonl

from lakeshift import report
from lakeshift.cli import main
from lakeshift.report import analysis, build, figures
from lakeshift.report.tables import PUBLISHED_HEADING

RUN_JSON = {
    "kind": "lakeshift-train",
    "status": "done",
    "data": {"split": "id-train", "sha256": "a64aabda059d56f892f85c1ba9dc3d8f", "n_records": 24000},
    "input_format": "grid",
    "cot_format": "none",
    "model": {"name": "mini-cells-base", "kind": "path"},
    "train_seconds": 450.0,
    "global_step": 1200,
}


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose predictions name their run folder, reported with the paper's reference."""
    root = tmp_path_factory.mktemp("cold")
    data = make_suite(root, per_size=3)
    runs = root / "runs"
    noisy_predictions(data, runs, "grid__none", 4)
    run_dir = root / "models" / "grid__none"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps(RUN_JSON))
    for path in (runs / "grid__none").glob("*.jsonl"):
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        write_jsonl(path, [dict(r, model="grid__none", model_path=str(run_dir)) for r in rows])
    out = root / "rep"
    argv = ["report", runs, "--out", out, "--data", data, "--reference", "paper", "--examples", "5"]
    assert main([str(a) for a in argv]) == 0
    return out


def test_each_trained_model_has_a_run_card_from_its_run_json(reported: Path) -> None:
    (row,) = list(csv.DictReader((reported / "runs.csv").open()))
    assert row["Model"] == "grid__none" and row["Base model"] == "mini-cells-base"
    assert row["Trained on"] == "id-train grid/none" and row["Data sha256"] == "a64aabda059d"
    assert float(row["train steps"]) == 1200 and float(row["train minutes"]) == 7.5
    assert float(row["train maps"]) == 24000
    html = (reported / "report.html").read_text(encoding="utf-8")
    assert html.index('id="tbl-runs"') < html.index('id="tbl-table1"')


def test_the_papers_rows_come_after_the_users_under_their_own_heading(reported: Path) -> None:
    lines = (reported / "table1.md").read_text().splitlines()
    heading = next(i for i, line in enumerate(lines) if PUBLISHED_HEADING in line)
    rows = [(i, line) for i, line in enumerate(lines) if line.startswith("| ")]
    local = [i for i, line in rows if "grid__none" in line]
    paper = [i for i, line in rows if "paper: Qwen2.5-VL-7B" in line]
    assert local and paper
    assert max(local) < heading < min(paper)
    html = (reported / "report.html").read_text(encoding="utf-8")
    assert '<tr class="published"><th colspan="' in html and '<tr class="ref">' in html


def test_the_header_names_no_unknown_as_none(reported: Path) -> None:
    html = (reported / "report.html").read_text(encoding="utf-8")
    info = html[html.index('<p class="info">') : html.index("</p>", html.index('<p class="info">'))]
    assert "None" not in info and "compat: " in info


def test_the_reports_progress_is_a_share_never_negative(tmp_path: Path) -> None:
    """A plan that walks away from the goal covered none of the distance: its report progress is 0, not
    below (the scored record keeps the scorer's signed value)."""
    data = tmp_path / "data"
    maps = write_jsonl(data / "id-test" / "maps.jsonl", make_maps("id-test", (5, 6), 6))
    away = []
    for line in maps.read_text().splitlines():  # the opposite of the first optimal move, three times
        rec = json.loads(line)
        opposite = {"UP": "DOWN", "DOWN": "UP", "LEFT": "RIGHT", "RIGHT": "LEFT"}[rec["optimal_path"][0]]
        away.append(
            {"id": rec["id"], "output": "\\boxed{" + ", ".join([opposite] * 3) + "}", "model": "away"}
        )
    write_jsonl(tmp_path / "runs" / "away" / "id-test.jsonl", away)
    out = tmp_path / "rep"
    assert (
        main(["report", str(tmp_path / "runs"), "--out", str(out), "--data", str(data), "--examples", "0"])
        == 0
    )
    scored = [json.loads(x) for x in (out / "scored" / "away__id-test.jsonl").read_text().splitlines()]
    assert min(r["progress"] for r in scored) < 0  # the scorer's own value is signed
    rows = {r["Model"]: r for r in csv.DictReader((out / "verdicts.csv").open())}
    assert float(rows["away"]["progress"]) == 0.0
    assert all(float(r["progress"]) >= 0 for r in rows.values())


def test_every_plotted_point_carries_its_interval_at_small_n(tmp_path: Path) -> None:
    data = make_suite(tmp_path, per_size=6)
    runs = tmp_path / "runs"
    noisy_predictions(data, runs, "grid__none", 2)
    inputs = [
        report.RunInput(
            p, data / p.stem / "maps.jsonl", {"model": "m", "input_format": "grid", "cot_format": "none"}
        )
        for p in sorted((runs / "grid__none").glob("*.jsonl"))
    ]
    jobs, _ = build._scoring_jobs(inputs, False, ())
    records = []
    for _name, _mp, maps, pf, defaults in jobs:
        records += build.score_predictions(maps, pf, check_trace=False, defaults=defaults)
    keys = sorted({analysis.run_key(r) for r in records}, key=analysis.run_sort_key)
    cells = build._Cells.of(records, keys)
    fig = report.fig_accuracy_vs_size(cells.by_split_size, keys)
    from matplotlib.container import ErrorbarContainer

    for ax in fig.axes:
        points = sum(len(line.get_xdata()) for line in ax.get_lines() if not line.get_label().startswith("_"))
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        with_bars = sum(len(c.lines[2][0].get_segments()) for c in bars if c.lines[2])
        assert with_bars == points, (ax.get_title(), with_bars, points)
    figures._plt().close(fig)


def test_a_folder_named_for_a_path_cot_gives_its_formats(tmp_path: Path) -> None:
    """A model trained on the coordinate-path CoT: its folder ``grid__coords`` names its formats as
    ``grid__none`` does, instead of leaving them unknown (``?``)."""
    data = make_suite(tmp_path, per_size=2)
    runs = tmp_path / "runs"
    noisy_predictions(data, runs, "grid__coords", 1, cot="coords")
    out = tmp_path / "rep"
    argv = ["report", str(runs), "--out", str(out), "--data", str(data), "--no-baselines", "--examples", "0"]
    assert main(argv) == 0
    rows = list(csv.DictReader((out / "by_split.csv").open()))
    assert {(r["input_format"], r["cot_format"]) for r in rows} == {("grid", "coords")}
    assert "| Grid | Coords |" in (out / "table1.md").read_text()
