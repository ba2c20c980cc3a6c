"""Predictions made for a subset of a split (``predict --per-size``) are scored on that subset only."""

from __future__ import annotations

import json
from pathlib import Path

from lakeshift.cli import main
from lakeshift.data.maps import record_from_map, select_maps
from lakeshift.env import FrozenLakeMap
from lakeshift.io import write_jsonl

ROWS = {
    3: [["SFF", "FHF", "FFG"], ["FSF", "FFF", "GFF"], ["GFS", "FFF", "FFF"]],
    4: [["SFFF", "FFFF", "FFFF", "FFFG"], ["GFFF", "FFFF", "FFFF", "FFFS"]],
}


def _maps() -> list[dict]:
    recs = []
    for size, maps in ROWS.items():
        for i, rows in enumerate(maps):
            recs.append(record_from_map(FrozenLakeMap.from_rows(rows), f"m{size}-{i}", "toy"))
    return recs


def _score(tmp_path: Path) -> list[dict]:
    """``lakeshift score`` of ``preds.jsonl`` against ``maps.jsonl`` in ``tmp_path``: the scored records."""
    out = tmp_path / "scored.jsonl"
    rc = main(
        [
            "score",
            "--maps",
            str(tmp_path / "maps.jsonl"),
            "--predictions",
            str(tmp_path / "preds.jsonl"),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_select_maps_per_size_sizes_limit() -> None:
    maps = _maps()
    ids = lambda sel: [m["id"] for m in sel]  # noqa: E731
    assert ids(select_maps(maps, per_size=1)) == ["m3-0", "m4-0"]
    assert ids(select_maps(maps, sizes=[4])) == ["m4-0", "m4-1"]
    assert ids(select_maps(maps, per_size=2, limit=3)) == ["m3-0", "m3-1", "m4-0"]
    assert ids(select_maps(maps)) == [m["id"] for m in maps]


def test_score_counts_missing_only_inside_the_selection(tmp_path: Path) -> None:
    maps = _maps()
    write_jsonl(tmp_path / "maps.jsonl", maps)
    by_id = {m["id"]: m for m in maps}
    answer = "\\boxed{" + ", ".join(by_id["m3-0"]["optimal_path"]) + "}"
    # Made with --per-size 1 (m3-0 and m4-0), but m4-0's prediction was lost.
    write_jsonl(tmp_path / "preds.jsonl", [{"id": "m3-0", "output": answer, "selection": {"per_size": 1}}])
    scored = _score(tmp_path)
    assert {r["id"]: r["verdict"] for r in scored} == {"m3-0": "success", "m4-0": "missing"}

    # Without a selection every map of the split counts.
    write_jsonl(tmp_path / "preds.jsonl", [{"id": "m3-0", "output": answer}])
    scored = _score(tmp_path)
    assert len(scored) == len(maps)


def test_rows_from_an_extended_run_widen_the_selection(tmp_path: Path) -> None:
    maps = _maps()
    write_jsonl(tmp_path / "maps.jsonl", maps)
    rows = [
        {"id": "m3-0", "output": "\\boxed{}", "selection": {"limit": 1}},
        {"id": "m3-1", "output": "\\boxed{}"},  # a later run over the whole split
    ]
    write_jsonl(tmp_path / "preds.jsonl", rows)
    scored = _score(tmp_path)
    assert len(scored) == len(maps)


def test_report_baselines_answer_the_maps_the_models_were_asked(tmp_path: Path) -> None:
    from lakeshift.report import RunInput, build_report

    maps = _maps()
    split = tmp_path / "toy"
    split.mkdir()
    write_jsonl(split / "maps.jsonl", maps)
    asked = [m["id"] for m in select_maps(maps, per_size=1)]
    write_jsonl(
        tmp_path / "model.jsonl",
        [{"id": i, "output": "\\boxed{}", "selection": {"per_size": 1}} for i in asked],
    )
    run = RunInput(tmp_path / "model.jsonl", split / "maps.jsonl", {"model": "m"}, "m")
    build_report([run], tmp_path / "out", progress=False, images=False)
    for policy in ("oracle", "greedy", "random"):
        scored = (tmp_path / "out" / "scored" / f"baseline-{policy}__toy.jsonl").read_text().splitlines()
        assert sorted(json.loads(line)["id"] for line in scored) == sorted(asked)
