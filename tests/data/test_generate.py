"""Map generation: determinism, single-map regeneration, constraints, embedding, duplicates, bad specs."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift.data.generate import (
    Group,
    SplitSpec,
    generate_map,
    generate_split,
    map_rng,
    rows_key,
    validate_group,
)
from lakeshift.env import FrozenLakeMap
from lakeshift.errors import LakeshiftError


def check_record(rec: dict) -> FrozenLakeMap:
    """Every field of a generated record agrees with the map it describes."""
    m = FrozenLakeMap.from_rows(rec["rows"])
    assert rec["size"] == m.size == len(rec["rows"])
    assert tuple(rec["start"]) == m.start and tuple(rec["goal"]) == m.goal
    assert rec["holes"] == m.n_holes and rec["d_inf"] == m.d_inf
    assert rec["optimal_length"] == m.optimal_length == len(rec["optimal_path"])
    assert rec["n_optimal_paths"] == m.n_optimal_paths
    assert m.simulate(rec["optimal_path"]).success
    return m


def test_map_rng_is_the_documented_seeding() -> None:
    digest = hashlib.sha256(b"7/ood-dist/42").digest()
    expected = random.Random(int.from_bytes(digest, "big"))
    got = map_rng(7, "ood-dist", 42)
    assert [got.random() for _ in range(5)] == [expected.random() for _ in range(5)]
    assert got.gauss(0, 1) == expected.gauss(0, 1)


def test_same_output_for_any_number_of_workers() -> None:
    spec = SplitSpec("s", (Group(3, 40, 0.2), Group(7, 40, 0.1, d_inf_min=6)), tie_break="uniform")
    one, st1 = generate_split(spec, 5, workers=1, chunk=16)
    two, st2 = generate_split(spec, 5, workers=2, chunk=16)
    assert one == two
    assert st1.attempts == st2.attempts and st1.constraints == st2.constraints
    assert [r["id"] for r in one] == [f"s-{i:05d}" for i in range(80)]


def test_a_map_regenerates_alone() -> None:
    train = SplitSpec("tr", (Group(2, 30, 0.2),), train=True)
    test = SplitSpec("te", (Group(2, 30, 0.2),), exclude=("tr",))
    train_recs, _ = generate_split(train, 1)
    forbidden = {rows_key(r) for r in train_recs}
    test_recs, _ = generate_split(test, 1, forbidden=forbidden)
    for i in (0, 7, 29):
        assert generate_map(train, 1, i) == train_recs[i]
        assert generate_map(test, 1, i, forbidden=forbidden) == test_recs[i]
    emb = SplitSpec("em", embed_source="tr", embed_size=6)
    emb_recs, _ = generate_split(emb, 1, sources=train_recs)
    assert generate_map(emb, 1, 11, sources=train_recs) == emb_recs[11]


def test_seed_and_split_name_change_the_maps() -> None:
    g = (Group(6, 20, 0.2),)
    a, _ = generate_split(SplitSpec("a", g), 0)
    b, _ = generate_split(SplitSpec("a", g), 1)
    c, _ = generate_split(SplitSpec("c", g), 0)
    assert [r["rows"] for r in a] != [r["rows"] for r in b]
    assert [r["rows"] for r in a] != [r["rows"] for r in c]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 9),
    hole_prob=st.sampled_from([0.0, 0.1, 0.3]),
    data=st.data(),
)
def test_constraints_hold(n: int, hole_prob: float, data: st.DataObject) -> None:
    dmin = data.draw(st.integers(1, n - 1))
    dmax = data.draw(st.integers(dmin, n - 1))
    lmin = data.draw(st.integers(dmin, dmin + 2))
    group = Group(n, 15, hole_prob, d_inf_min=dmin, d_inf_max=dmax, length_min=lmin, length_max=lmin + 4)
    try:
        validate_group(group)
        recs, _ = generate_split(
            SplitSpec("c", (group,)), data.draw(st.integers(0, 100)), max_attempts=20_000
        )
    except LakeshiftError:
        return  # a legal but (nearly) unreachable optimal-length range (e.g. without holes)
    for rec in recs:
        check_record(rec)
        assert rec["size"] == n
        assert dmin <= rec["d_inf"] <= dmax
        assert lmin <= rec["optimal_length"] <= lmin + 4


def test_hole_distribution_matches_the_model() -> None:
    # Holes i.i.d. with probability q, start and goal on frozen cells: E[holes] = q * n^2 before the
    # (rare at q = 0.1) unsolvable redraws.
    recs, stats = generate_split(SplitSpec("h", (Group(10, 3000, 0.1),)), 0)
    frac = sum(r["holes"] for r in recs) / (100 * len(recs))
    assert 0.095 < frac < 0.103
    assert stats.unsolvable < 200
    starts = {tuple(r["start"]) for r in recs}
    assert len(starts) == 100  # every cell can be the start


def test_test_split_avoids_training_maps() -> None:
    # 2x2 maps with holes: few distinct maps, so duplicates are drawn and must be redrawn.
    train, _ = generate_split(SplitSpec("tr", (Group(2, 20, 0.3),), train=True), 0)
    forbidden = {rows_key(r) for r in train}
    test, stats = generate_split(SplitSpec("te", (Group(2, 20, 0.3),)), 0, forbidden=forbidden)
    assert stats.duplicate_of_train > 0
    assert not forbidden & {rows_key(r) for r in test}


def test_embedding_keeps_the_source_map_and_path() -> None:
    src, _ = generate_split(SplitSpec("id", tuple(Group(n, 25, 0.2) for n in (3, 4, 5, 6))), 3)
    emb, stats = generate_split(SplitSpec("em", embed_source="id"), 3, sources=src)
    assert len(emb) == len(src)
    for s, e in zip(src, emb, strict=True):
        m = check_record(e)
        assert e["source_id"] == s["id"] and e["size"] == 10
        r0, c0 = e["offset"]
        k = s["size"]
        assert [row[c0 : c0 + k] for row in e["rows"][r0 : r0 + k]] == s["rows"]
        assert e["optimal_path"] == s["optimal_path"]
        assert e["optimal_length"] == s["optimal_length"] == m.optimal_length
        assert e["d_inf"] == s["d_inf"]
    assert stats.embed_shortcut >= 0


def test_embedding_rejects_shortcuts() -> None:
    # The 3x3 map's only path detours through row 2; just above it, a free row would be shorter.
    rows = ["SHG", "FHF", "FFF"]
    m = FrozenLakeMap.from_rows(rows)
    src = [
        {
            "id": "x",
            "size": 3,
            "rows": rows,
            "optimal_length": m.optimal_length,
            "optimal_path": m.optimal_path(),
        }
    ]
    spec = SplitSpec("em", embed_source="src", embed_size=5, embed_hole_prob=0.0)
    for i in range(20):
        rec = generate_map(spec, i, 0, sources=src)
        assert rec["offset"][0] == 0  # any row offset > 0 opens the shortcut above the map
        assert check_record(rec).optimal_length == 6


@pytest.mark.parametrize(
    ("group", "message"),
    [
        (Group(5, 10, 0.1, d_inf_min=6), "d_inf >= 6 on a 5x5"),
        (Group(7, 10, 0.1, d_inf_min=6, length_max=5), "at least d_inf"),
        (Group(4, 10, 1.0), "hole_prob must be a probability"),
        (Group(4, 10, 0.0, length_min=7), "optimal length >= 7"),
        (Group(1, 10, 0.1), "size"),
        (Group(4, -1, 0.1), "count"),
        (Group(4, 10, 0.1, d_inf_min=3, d_inf_max=2), "empty d_inf range"),
    ],
)
def test_impossible_constraints_fail_before_work(group: Group, message: str) -> None:
    with pytest.raises(LakeshiftError, match=message):
        validate_group(group)


def test_unreachable_constraints_give_up_with_a_message() -> None:
    spec = SplitSpec("u", (Group(5, 1, 0.05, length_min=16),))
    with pytest.raises(LakeshiftError, match="no 5x5 map met the constraints"):
        generate_split(spec, 0, max_attempts=2000)


def test_paper_ood_splits_match_table_2() -> None:
    """Mean d_inf of the generated OOD splits (seed 0) is within sampling error of the paper's Table 2."""
    from lakeshift.data.catalog import paper_suite
    from lakeshift.data.stats import split_stats

    specs = {s.name: s for s in paper_suite()}
    paper = {"ood-size": [3.27, 3.66, 4.01, 4.47], "ood-dist": [6.00, 6.35, 6.72, 7.00]}
    for name, expected in paper.items():
        recs, _ = generate_split(specs[name], 0)
        rows = {r["size"]: r["mean_d_inf"] for r in split_stats(name, recs)}
        for size, want in zip(("7", "8", "9", "10"), expected, strict=True):
            assert abs(rows[size] - want) < 0.35, (name, size, rows[size], want)


@pytest.mark.parametrize("tie_break", ["direct", "priority"])
def test_generated_paths_follow_the_tie_break(tie_break: str) -> None:
    spec = SplitSpec("s", (Group(4, 30, 0.2), Group(8, 30, 0.1)), tie_break=tie_break)
    recs, _ = generate_split(spec, 3)
    for rec in recs:
        m = check_record(rec)
        assert rec["optimal_path"] == m.optimal_path(tie_break)


def test_default_tie_break_is_direct() -> None:
    assert SplitSpec("s").tie_break == "direct"
