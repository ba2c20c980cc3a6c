"""Solution augmentation: every augmented record solves its own map optimally, transforms are distinct,
paths are distinct, the output does not depend on the worker count, and test splits avoid every transform."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lakeshift import traces
from lakeshift.cli import main
from lakeshift.data import augment, build_suite, check_suite, load_maps, record_from_map
from lakeshift.data.generate import Group, SplitSpec
from lakeshift.data.records import map_of
from lakeshift.data.stats import split_stats
from lakeshift.env import MOVES, FrozenLakeMap
from lakeshift.errors import LakeshiftError


@st.composite
def map_records(draw: st.DrawFn) -> dict:
    """A ``maps.jsonl`` record of a solvable random map of size 2-7 (some symmetric: no holes, corners)."""
    n = draw(st.integers(2, 7))
    rng = random.Random(draw(st.integers(0, 2**32)))
    cells = [(r, c) for r in range(n) for c in range(n)]
    if draw(st.booleans()):
        start, goal = (0, 0), (n - 1, n - 1)  # symmetric under transpose and antitranspose when hole-free
    else:
        start, goal = rng.sample(cells, 2)
    p_hole = draw(st.sampled_from([0.0, 0.0, 0.1, 0.3]))
    holes = frozenset(c for c in cells if c not in (start, goal) and rng.random() < p_hole)
    m = FrozenLakeMap(n, holes, start, goal)
    assume(m.solvable)
    return record_from_map(m, "m-00000", "train")


@settings(max_examples=120, deadline=None)
@given(rec=map_records(), k=st.integers(1, 6), dihedral=st.booleans(), seed=st.integers(0, 99))
def test_every_augmented_record_solves_its_own_map_optimally(
    rec: dict, k: int, dihedral: bool, seed: int
) -> None:
    aug = augment.Augment(k, dihedral)
    out, dropped = augment.augment_record(rec, aug, random.Random(seed))
    assert out[0]["id"] == rec["id"] and out[0]["optimal_path"] == rec["optimal_path"]
    assert augment.is_original(out[0]) and not any(augment.is_original(r) for r in out[1:])
    by_transform: dict[str, list[dict]] = {}
    for r in out:
        m = map_of(r)  # start/goal fields agree with the rows (map_of checks them)
        roll = m.simulate(r["optimal_path"])
        assert roll.success and len(r["optimal_path"]) == m.optimal_length == rec["optimal_length"]
        assert m.n_optimal_paths == r["n_optimal_paths"] and m.d_inf == r["d_inf"]
        assert r["augmented_from"] == rec["id"] and r["split"] == rec["split"]
        by_transform.setdefault(r["augmentation"]["transform"], []).append(r)
    # Transforms: distinct maps (a symmetric map's repeats dropped), kept in TRANSFORMS order.
    kept = list(by_transform)
    assert kept == [t for t in augment.TRANSFORMS if t in by_transform]
    rows = [tuple(recs[0]["rows"]) for recs in by_transform.values()]
    assert len(set(rows)) == len(rows)
    expected = {
        tuple(augment.transform_map(map_of(rec), t).rows) for t in augment.TRANSFORMS[: 8 if dihedral else 1]
    }
    assert set(rows) == expected and len(rows) + dropped == (8 if dihedral else 1)
    if dihedral and not dropped:  # the 8 images of a path start with each move exactly twice
        firsts = [recs[0]["optimal_path"][0] for recs in by_transform.values()]
        assert sorted(firsts) == sorted(MOVES * 2)
    # Paths: up to k distinct optimal paths per transform (all when fewer), the first the mapped answer.
    for t, recs in by_transform.items():
        paths = [tuple(r["optimal_path"]) for r in recs]
        assert len(set(paths)) == len(paths) == min(k, rec["n_optimal_paths"])
        assert list(paths[0]) == augment.transform_path(rec["optimal_path"], t)
        assert [r["augmentation"]["path"] for r in recs] == list(range(len(recs)))
        assert len({r["id"] for r in recs}) == len(recs)
        assert {augment.image_id(r) for r in recs} == {recs[0]["id"]}
    assert len({r["id"] for r in out}) == len(out)


@settings(max_examples=60, deadline=None)
@given(rec=map_records())
def test_transforms_move_cells_and_moves_together(rec: dict) -> None:
    m = map_of(rec)
    for t in augment.TRANSFORMS:
        mt = augment.transform_map(m, t)
        path = augment.transform_path(rec["optimal_path"], t)
        positions = m.simulate(rec["optimal_path"]).positions
        moved = mt.simulate(path).positions
        assert list(moved) == [augment.transform_cell(p, m.size, t) for p in positions]
    assert sorted(augment.MOVE_MAPS["rot90"].items()) == sorted(
        {"UP": "RIGHT", "RIGHT": "DOWN", "DOWN": "LEFT", "LEFT": "UP"}.items()
    )
    assert all(sorted(table.values()) == sorted(MOVES) for table in augment.MOVE_MAPS.values())


def test_all_optimal_paths_are_enumerated_and_the_count_matches() -> None:
    m = FrozenLakeMap.from_rows(["SFF", "FHF", "FFG"])
    paths = augment.optimal_paths(m)
    assert paths == [["RIGHT", "RIGHT", "DOWN", "DOWN"], ["DOWN", "DOWN", "RIGHT", "RIGHT"]]
    open4 = FrozenLakeMap.from_rows(["SFFF", "FFFF", "FFFF", "FFFG"])
    assert len(augment.optimal_paths(open4)) == open4.n_optimal_paths == 20
    big = FrozenLakeMap.from_rows(["S" + "F" * 7, *["F" * 8] * 6, "F" * 7 + "G"])  # 3432 paths: drawn
    chosen = augment.choose_paths(big, big.optimal_path(), 6, big.n_optimal_paths, random.Random(1))
    assert len({tuple(p) for p in chosen}) == 6 and all(big.simulate(p).success for p in chosen)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("paths=0", "1 <= K <= 64"),
        ("paths=-2", "1 <= K <= 64"),
        ("paths=65", "1 <= K <= 64"),
        ("paths=x", "needs an integer K"),
        ("mirror", "unknown augmentation 'mirror'"),
        ("dihedral=2", "takes no value"),
        ("dihedral,dihedral", "given twice"),
        ("", "nothing to augment"),
    ],
)
def test_bad_augment_specs_are_refused(text: str, message: str) -> None:
    with pytest.raises(LakeshiftError, match=message):
        augment.parse_augment(text)


def test_augment_spec_spelling_is_canonical() -> None:
    assert str(augment.parse_augment(" dihedral , paths=4")) == "paths=4,dihedral"
    assert str(augment.parse_augment("paths=1")) == "" and not augment.parse_augment("paths=1").active


def test_test_splits_refuse_augment_in_suite_files() -> None:
    spec = SplitSpec("te", (Group(3, 2, 0.2),), augment="dihedral")
    with pytest.raises(LakeshiftError, match="split te: augment applies to training splits only"):
        check_suite([spec])
    with pytest.raises(LakeshiftError, match="split tr: augment: unknown augmentation 'x'"):
        check_suite([SplitSpec("tr", (Group(3, 2, 0.2),), train=True, augment="x")])


SPECS = [
    SplitSpec("tr", (Group(3, 12, 0.3), Group(4, 6, 0.2)), train=True, augment="paths=3,dihedral"),
    SplitSpec("te", (Group(3, 40, 0.3),), exclude=("tr",)),
    SplitSpec("emb", train=True, embed_source="tr", embed_size=6),
]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_augmented_suite_is_identical_for_any_worker_count_and_disjoint_from_test(tmp_path: Path) -> None:
    kw = dict(seed=3, cot_formats=("none", "astar", "coords"), progress=False, log=lambda _: None)
    one = build_suite(SPECS, tmp_path / "w1", workers=1, **kw)
    build_suite(SPECS, tmp_path / "w2", workers=2, **kw)
    assert tree(tmp_path / "w1") == tree(tmp_path / "w2")
    root = tmp_path / "w1"
    train = load_maps(root / "tr")
    originals = [r for r in train if augment.is_original(r)]
    assert len(originals) == 18 and len(train) == one.reports["tr"]["count"] > 18
    meta = json.loads((root / "tr" / "split.json").read_text())
    assert meta["maps"] == 18 and meta["augmentation"]["records"] == len(train)
    assert meta["config"]["spec"]["augment"] == "paths=3,dihedral"
    # No test map equals any transform of a training map (3x3 maps collide often: some were redrawn).
    every_transform = {rows for r in originals for rows in augment.all_transform_rows(r["rows"])}
    test = load_maps(root / "te")
    assert not any(tuple(r["rows"]) in every_transform for r in test)
    assert (
        json.loads((root / "te" / "split.json").read_text())["generation"]["redrawn_duplicate_of_train"] > 0
    )
    assert "augment" not in json.loads((root / "te" / "split.json").read_text())["config"]["spec"]
    # The embedded split embeds the generated maps, not their augmented copies.
    assert [r["source_id"] for r in load_maps(root / "emb")] == [r["id"] for r in originals]
    # One SFT line per record, whose trace follows the record's own path; path variants share an image.
    for cot in ("coords", "astar"):
        lines = (root / "tr" / "sft" / f"grid__{cot}.jsonl").read_text().splitlines()
        sft = [json.loads(line) for line in lines]
        assert [s["id"] for s in sft] == [r["id"] for r in train]
        same = sum(
            s["messages"][2]["content"].endswith(traces.boxed(r["optimal_path"]))
            for s, r in zip(sft, train, strict=True)
        )
        differs = len(train) - same
        assert same == len(train) if cot == "coords" else differs == meta["astar_answer_differs"]
    images = [json.loads(line)["images"][0] for line in (root / "tr" / "sft" / "image__none.jsonl").open()]
    assert all((root / "tr" / p).is_file() for p in images)
    assert len(list((root / "tr" / "images").glob("*.png"))) == len(set(images)) < len(train)
    # Stats: records vs maps, and the dihedral group evens out the first moves exactly.
    rows = split_stats("tr", train)
    assert rows[-1]["count"] == len(train) and rows[-1]["maps"] == 18
    firsts = [r["optimal_path"][0] for r in train]
    assert rows[-1]["first_move"] == {m: firsts.count(m) / len(train) for m in MOVES}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--train", "--augment", "mirror"], "unknown augmentation 'mirror'"),
        (["--train", "--augment", "paths=0"], "1 <= K <= 64"),
        (["--augment", "paths=4,dihedral"], "training splits only"),
        (["--train", "--cots", "none,astar,bogus"], "unknown CoT format 'bogus'"),
    ],
)
def test_cli_refuses_bad_augment_and_cot_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "out"
    code, err = run_cli(capsys, "generate", "--out", str(out), "--sizes", "3", "--count", "2", *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_augments_a_custom_training_split_and_stats_show_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "D2"
    argv = ["generate", "--out", str(out), "--split", "big-train", "--train", "--sizes", "3", "4"]
    argv += ["--count", "3", "--augment", "paths=4,dihedral", "--no-images", "--workers", "1"]
    argv += ["--cots", "none,astar,coords", "--no-progress"]
    code, err = run_cli(capsys, *argv)
    assert code == 0 and "records (6 maps)" in err
    recs = load_maps(out / "big-train")
    assert len({r["augmented_from"] for r in recs}) == 6 and len(recs) > 6
    assert all("augmentation" in r for r in recs)
    assert main(["stats", str(out), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[-1]["maps"] == 6 and rows[-1]["count"] == len(recs)
    assert (
        main(["show", str(out / "big-train"), "--id", recs[1]["id"], "--format", "grid", "--cot", "coords"])
        == 0
    )
    shown = capsys.readouterr().out
    assert shown.endswith(traces.boxed(recs[1]["optimal_path"]))
    # With --suite, --augment applies to the suite's training splits only.
    code, err = run_cli(capsys, "generate", "--suite", "tiny", "--out", str(tmp_path / "t"), "--augment", "x")
    assert code == 2 and "unknown augmentation" in err


@settings(max_examples=60, deadline=None)
@given(rec=map_records(), t=st.sampled_from(augment.TRANSFORMS))
def test_astar_trace_of_a_transformed_map_follows_the_transformed_path(rec: dict, t: str) -> None:
    m = map_of(rec)
    text = traces.completion(m, rec["optimal_path"], "astar")
    assume(text.endswith(traces.boxed(rec["optimal_path"])))  # the trace follows the map's own path
    mt, path_t = augment.transform_map(m, t), augment.transform_path(rec["optimal_path"], t)
    text_t = traces.completion(mt, path_t, "astar")
    # The search with the transformed neighbour order is the transformed search, so it reaches the
    # transformed path, and that order is among the first 8 the reference trace tries.
    assert text_t.endswith(traces.boxed(path_t))
    assert traces.search_order(traces.parse_search(text_t)) in traces.SEARCH_ORDERS[:8]
    image_order = [augment.MOVE_MAPS[t][mv] for mv in traces.SEARCH_ORDER]
    letter = {mv[0]: augment.MOVE_MAPS[t][mv][0] for mv in MOVES}
    assert [
        (augment.transform_cell(e.cell, m.size, t), e.g, e.h, tuple((letter[a], b) for a, b in e.neighbours))
        for e in traces.parse_search(text).expansions
    ] == [(e.cell, e.g, e.h, e.neighbours) for e in traces.astar_search(mt, image_order).expansions]
