"""End-to-end ``lakeshift score``, ``report`` and ``baseline`` through the CLI entry point."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from suite_fixtures import make_maps, make_suite, noisy_predictions, write_jsonl

from lakeshift.cli import main


@pytest.fixture
def maps_file(tmp_path: Path) -> Path:
    return write_jsonl(
        tmp_path / "data" / "ood-dist" / "maps.jsonl", make_maps("ood-dist", (7, 8), 5, min_dinf=6)
    )


def test_baseline_then_score(tmp_path: Path, maps_file: Path, capsys: pytest.CaptureFixture) -> None:
    preds = tmp_path / "oracle.jsonl"
    assert main(["baseline", "--maps", str(maps_file), "--policy", "oracle", "--out", str(preds)]) == 0
    assert "accuracy 10/10" in capsys.readouterr().out
    scored = tmp_path / "scored.jsonl"
    assert main(["score", "--maps", str(maps_file), "--predictions", str(preds), "--out", str(scored)]) == 0
    out = capsys.readouterr().out
    assert "accuracy 10/10 = 1.000" in out and "7x7: 5/5" in out
    recs = [json.loads(x) for x in scored.read_text().splitlines()]
    assert len(recs) == 10 and all(r["success"] and r["verdict"] == "success" and r["moves"] for r in recs)
    assert (
        main(["score", "--maps", str(maps_file), "--predictions", str(preds), "--compat", "frozen_ood"]) == 0
    )
    assert "accuracy 10/10" in capsys.readouterr().out


@pytest.mark.parametrize("policy", ["greedy", "random"])
def test_other_policies_are_deterministic(tmp_path: Path, maps_file: Path, policy: str) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        assert main(["baseline", "--maps", str(maps_file), "--policy", policy, "--out", str(path)]) == 0
    assert a.read_bytes() == b.read_bytes()
    rows = [json.loads(x) for x in a.read_text().splitlines()]
    assert all(r["model"] == f"baseline-{policy}" and r["output"].startswith("\\boxed{") for r in rows)


def test_oracle_with_cot_is_faithful(tmp_path: Path, maps_file: Path, capsys: pytest.CaptureFixture) -> None:
    preds = tmp_path / "p.jsonl"
    main(
        [
            "baseline",
            "--maps",
            str(maps_file),
            "--policy",
            "oracle",
            "--cot",
            "grid+desc",
            "--out",
            str(preds),
        ]
    )
    capsys.readouterr()
    assert main(["score", "--maps", str(maps_file), "--predictions", str(preds)]) == 0
    assert "CoT faithfulness: 10/10" in capsys.readouterr().out


def test_bad_predictions_warn_or_fail_with_strict(
    tmp_path: Path, maps_file: Path, capsys: pytest.CaptureFixture
) -> None:
    preds = tmp_path / "bad.jsonl"
    preds.write_text(
        '{"id": "ood-dist-7-0", "output": "\\\\boxed{UP}"}\n{broken\n{"id": "zzz", "output": ""}\n'
    )
    assert main(["score", "--maps", str(maps_file), "--predictions", str(preds)]) == 0
    captured = capsys.readouterr()
    assert "9 maps without a prediction (scored missing)" in captured.out
    assert f"{preds}, line 2: malformed JSON" in captured.err
    assert f"{preds}, line 3: field 'id': 'zzz' is not in the maps file" in captured.err
    assert main(["score", "--maps", str(maps_file), "--predictions", str(preds), "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lakeshift score: error: ") and f"{preds}, line 2: malformed JSON" in err
    assert "Traceback" not in err


def test_report_command(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    data = make_suite(tmp_path, per_size=3)
    runs = tmp_path / "runs"
    noisy_predictions(data, runs, "grid__grid+desc", 5, cot="grid+desc")
    (runs / "notes.jsonl").write_text('{"step": 1, "loss": 0.5}\n')  # not a predictions file: skipped
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--data", str(data), "--examples", "20"]) == 0
    printed = capsys.readouterr().out
    assert "scored" in printed and (out / "report.html").is_file() and (out / "table1.md").is_file()
    # The terminal gets a compact table that fits 80 columns; the wide tables stay in the files.
    table = printed[printed.index("Accuracy per split") : printed.index("\nwrote ")].splitlines()[1:]
    assert table and all(len(line) <= 80 for line in table) and "|" not in "".join(table)
    by_split = {(r["model"], r["split"]): r for r in csv.DictReader((out / "by_split.csv").open())}
    row = by_split[("grid__grid+desc", "id-test")]
    expected = f"{float(row['acc']):.2f} ({float(row['lo']):.2f}-{float(row['hi']):.2f})"
    assert any(line.startswith("grid__grid+desc ") and expected in line for line in table)
    # Without --data nor a 'maps' field the maps cannot be found: a clear error.
    assert main(["report", str(runs), "--out", str(tmp_path / "x")]) == 2
    assert "no 'maps' field and no --data" in capsys.readouterr().err
    # A 'maps' field in the records is enough.
    solo = tmp_path / "solo"
    rows = [json.loads(x) for x in (runs / "grid__grid+desc" / "id-test.jsonl").read_text().splitlines()]
    write_jsonl(
        solo / "m" / "preds.jsonl", [dict(r, maps=str(data / "id-test" / "maps.jsonl")) for r in rows]
    )
    assert main(["report", str(solo), "--out", str(tmp_path / "y"), "--no-baselines", "--examples", "0"]) == 0
