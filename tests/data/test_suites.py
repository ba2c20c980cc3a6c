"""Suites on disk: layout, caching, atomicity, determinism, SFT records, the official ID import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakeshift.data import (
    MAP_FIELDS,
    build_suite,
    check_suite,
    import_official,
    load_maps,
    load_suite,
    map_from_record,
    paper_suite,
    records,
    suites,
)
from lakeshift.data.generate import Group, SplitSpec, generate_split, rows_key
from lakeshift.data.stats import split_stats
from lakeshift.errors import LakeshiftError
from lakeshift.io import dumps


def small_suite() -> list[SplitSpec]:
    return [
        SplitSpec("tr", (Group(2, 12, 0.3), Group(3, 6, 0.2)), train=True),
        SplitSpec("te", (Group(2, 8, 0.3), Group(3, 4, 0.2)), exclude=("tr",)),
        SplitSpec("far", (Group(7, 3, 0.1, d_inf_min=6),), exclude=("tr",)),
        SplitSpec("emb", train=True, embed_source="tr", embed_size=5),
    ]


def build(out: Path, **kw) -> object:
    kw.setdefault("images", False)
    kw.setdefault("progress", False)
    kw.setdefault("log", lambda msg: None)
    return build_suite(small_suite(), out, seed=kw.pop("seed", 0), **kw)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_paper_suite_holds_the_papers_splits() -> None:
    specs = {s.name: s for s in paper_suite()}
    assert list(specs) == ["id-train", "id-test", "ood-size", "ood-dist", "embed10-train", "embed10-test"]
    sizes = {name: [(g.size, g.count) for g in s.groups] for name, s in specs.items()}
    assert sizes["id-train"] == [(3, 100), (4, 200), (5, 300), (6, 400)]
    assert sizes["id-test"] == [(n, 100) for n in (3, 4, 5, 6)]
    assert sizes["ood-size"] == sizes["ood-dist"] == [(n, 200) for n in (7, 8, 9, 10)]
    assert all(g.d_inf_min == 6 for g in specs["ood-dist"].groups)
    assert [(g.d_inf_min, g.d_inf_max, g.size, g.count) for g in specs["embed10-test"].groups] == [
        (d, d, 10, 200) for d in range(2, 10)
    ]
    assert specs["embed10-train"].embed_source == "id-train" and specs["embed10-train"].train
    assert {g.hole_prob for g in specs["id-train"].groups} == {0.2}
    assert {g.hole_prob for g in specs["ood-dist"].groups} == {0.1}
    check_suite(paper_suite())


def test_layout_and_records(tmp_path: Path) -> None:
    result = build(tmp_path, images=True, workers=1)
    assert result.written == ["tr", "te", "far", "emb"]
    assert json.loads((tmp_path / "suite.json").read_text())["splits"] == result.written
    for split in result.written:
        d = tmp_path / split
        maps = load_maps(d)
        meta = json.loads((d / "split.json").read_text())
        assert meta["count"] == len(maps) and meta["hash"] == result.reports[split]["hash"]
        assert len(list((d / "sft").glob("*.jsonl"))) == 4 * len(records.traces.COT_FORMATS)
        assert sorted(p.stem for p in (d / "images").glob("*.png")) == sorted(r["id"] for r in maps)
        for rec in maps:
            assert all(f in rec for f in MAP_FIELDS) and rec["split"] == split
            assert map_from_record(rec).simulate(rec["optimal_path"]).success
        variant = "train" if split in ("tr", "emb") else "test"
        lines = (d / "sft" / "image__grid+desc.jsonl").read_text().splitlines()
        assert len(lines) == len(maps)
        for rec, line in zip(maps[:3], lines, strict=False):
            assert line == dumps(records.sft_record(rec, "image", "grid+desc", variant))
        text = (d / "sft" / "table__desc.jsonl").read_text().splitlines()
        assert text[0] == dumps(records.sft_record(maps[0], "table", "desc", variant))
    emb = load_maps(tmp_path / "emb")
    assert [r["source_id"] for r in emb] == [r["id"] for r in load_maps(tmp_path / "tr")]


def test_batch_sft_records_equal_sft_record_byte_for_byte() -> None:
    """The suite writes :func:`records.sft_records` (all pairs at once): each equals its single record."""
    spec = SplitSpec("x", (Group(5, 4, 0.2), Group(9, 4, 0.1, d_inf_min=6)))
    recs, _ = generate_split(spec, 0)
    inputs, cots = records.formats.INPUT_FORMATS, records.traces.COT_FORMATS
    for rec in recs:
        batch = records.sft_records(rec, "test", inputs, cots)
        assert list(batch) == [(i, c) for i in inputs for c in cots]
        got = [dumps(r) for r in batch.values()]
        assert got == [dumps(records.sft_record(rec, i, c, "test")) for i in inputs for c in cots]


def test_no_test_map_equals_a_training_map(tmp_path: Path) -> None:
    result = build(tmp_path)
    train = {rows_key(r) for r in load_maps(tmp_path / "tr")}
    assert not train & {rows_key(r) for r in load_maps(tmp_path / "te")}
    # 2x2 maps collide often: the report says how many were redrawn.
    assert result.reports["te"]["generation"]["redrawn_duplicate_of_train"] > 0
    assert result.reports["te"]["identical_to_train"] == 0


def test_identical_for_any_number_of_workers(tmp_path: Path) -> None:
    build(tmp_path / "a", workers=1, images=True)
    build(tmp_path / "b", workers=2, images=True)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")


def test_cache_noop_conflict_and_force(tmp_path: Path) -> None:
    first = build(tmp_path)
    before = tree(tmp_path)
    again = build(tmp_path)
    assert again.up_to_date and again.written == []
    assert tree(tmp_path) == before
    with pytest.raises(LakeshiftError, match="different suite"):
        build(tmp_path, seed=1)
    assert tree(tmp_path) == before  # nothing touched
    forced = build(tmp_path, seed=1, force=True)
    assert forced.written == first.written and forced.hash != first.hash
    assert tree(tmp_path) != before


def test_interrupted_split_leaves_nothing_that_looks_finished(tmp_path: Path, monkeypatch) -> None:
    calls = {"n": 0}
    real = suites._render_chunk

    def failing(args):
        calls["n"] += 1
        if args[0] and args[0][0]["split"] == "far":
            raise KeyboardInterrupt
        return real(args)

    monkeypatch.setattr(suites, "_render_chunk", failing)
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path, workers=1)
    assert (tmp_path / "tr" / "split.json").is_file() and (tmp_path / "te" / "split.json").is_file()
    assert not (tmp_path / "far").exists() and not (tmp_path / "suite.json").exists()
    assert not list(tmp_path.glob(".*partial*"))
    monkeypatch.setattr(suites, "_render_chunk", real)
    resumed = build(tmp_path, workers=1)
    assert resumed.skipped == ["tr", "te"] and resumed.written == ["far", "emb"]
    fresh = tmp_path.parent / "fresh"
    build(fresh, workers=1)
    assert tree(fresh) == tree(tmp_path)


def test_bad_suites_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(LakeshiftError, match="unknown suite"):
        load_suite("nope")
    with pytest.raises(LakeshiftError, match="defined before"):
        check_suite([SplitSpec("a", (Group(3, 1, 0.1),), exclude=("b",))])
    with pytest.raises(LakeshiftError, match="d_inf >= 6 on a 5x5"):
        check_suite([SplitSpec("a", (Group(5, 1, 0.1, d_inf_min=6),))])
    bad = tmp_path / "s.json"
    bad.write_text(
        '{"splits": [{"name": "a", "groups": [{"size": 3, "count": 1, "hole_prob": 0.1, "x": 1}]}]}'
    )
    with pytest.raises(LakeshiftError, match="group 1"):
        load_suite(str(bad))
    with pytest.raises(LakeshiftError, match="unknown input format"):
        build(tmp_path / "o", input_formats=["desc", "png"])
    assert not (tmp_path / "o").exists()


def test_load_maps_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "maps.jsonl"
    p.write_text('{"id": "a"}\n')
    with pytest.raises(LakeshiftError, match=r"maps.jsonl, line 1: missing field 'split'"):
        load_maps(tmp_path)


# ----- official data ----------------------------------------------------------------------------------------
def test_import_official_id_data(mirage_dir: Path) -> None:
    train, rep = import_official(mirage_dir, "id-train")
    test, _ = import_official(mirage_dir, "id-test")
    assert len(train) == 1000 and len(test) == 400
    assert len({r["id"] for r in train}) == 1000 and len({r["id"] for r in test}) == 400
    assert rep["official_answers_kept"] == 1000 and rep["renamed_duplicate_ids"] == 0
    ids = {r["id"]: r for r in train}
    assert ids["5x5-1454"]["official_id"] == "1454" and ids["5x5-1454"]["optimal_path"] == ["DOWN"]
    assert any(r["id"] == "3x3-31" for r in test)
    for rec in train:
        m = map_from_record(rec)
        assert m.simulate(rec["optimal_path"]).success and len(rec["optimal_path"]) == m.optimal_length
    train_rows = {rows_key(r) for r in train}
    assert sum(rows_key(r) in train_rows for r in test) == 8  # the published id-test overlaps id-train


def test_id_source_suite(mirage_dir: Path, tmp_path: Path) -> None:
    specs = [s for s in paper_suite() if s.name in ("id-train", "id-test")]
    result = build_suite(
        specs,
        tmp_path,
        id_source=mirage_dir,
        images=False,
        progress=False,
        log=lambda m: None,
        input_formats=["desc"],
        cot_formats=["none"],
    )
    assert result.reports["id-test"]["identical_to_train"] == 8
    assert len(load_maps(tmp_path / "id-train")) == 1000


def test_malformed_id_source(tmp_path: Path) -> None:
    with pytest.raises(LakeshiftError, match="no such folder"):
        import_official(tmp_path / "missing", "id-train")
    (tmp_path / "train_direct.jsonl").write_text(
        '{"map_id": 1, "map_desc": [[1, 2], [0, 0]], "text_output": "\\\\boxed{RIGHT}"}\n'
        '{"map_id": 2, "map_desc": [[1, 7], [0, 2]], "text_output": "\\\\boxed{DOWN}"}\n'
    )
    with pytest.raises(LakeshiftError, match=r"train_direct.jsonl, line 2: field 'map_desc'"):
        import_official(tmp_path, "id-train")
    (tmp_path / "test_direct.jsonl").write_text('{"map_id": "1"}\n')
    with pytest.raises(LakeshiftError, match=r"test_direct.jsonl, line 1: missing field 'map_desc'"):
        import_official(tmp_path, "id-test")


def test_official_id_data_reproduces_paper_tables(mirage_dir: Path) -> None:
    """Paper Table 7 (training data) and Table 2 (ID test mean d_inf), to the printed two decimals."""
    train = {r["size"]: r for r in split_stats("id-train", import_official(mirage_dir, "id-train")[0])}
    assert [round(train[s]["mean_d_inf"], 2) for s in ("3", "4", "5", "6", "all")] == [
        1.40,
        1.80,
        2.23,
        2.72,
        2.26,
    ]
    lengths = [round(train[s]["mean_optimal_length"], 2) for s in ("3", "4", "5", "6", "all")]
    assert lengths == [2.03, 2.65, 3.58, 4.18, 3.48]
    test = {r["size"]: r for r in split_stats("id-test", import_official(mirage_dir, "id-test")[0])}
    assert [round(test[s]["mean_d_inf"], 2) for s in ("3", "4", "5", "6")] == [1.50, 1.79, 2.16, 2.75]
