"""Every bad argument to the public Python API (``import lakeshift``) is a ``LakeshiftError`` whose message
names the parameter, never a raw ``TypeError``/``AttributeError``/``IndexError`` and never a silent result:
``score_output(rec, None)``, ``render(record, "grid")``, a group of size 1 or hole probability 1, a seed of
-1, ``select_maps(per_size="abc")`` or ``limit=0``, an unknown CoT format, compat mode or input format. Where
a range applies, hypothesis checks that values inside it work as before and values outside are refused."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift import (
    FrozenLakeMap,
    Group,
    LakeshiftError,
    SplitSpec,
    build_suite,
    completion,
    extract,
    generate_map,
    load_maps,
    map_from_record,
    parse,
    parse_steps,
    render,
    score_output,
    scoring_map,
    select_maps,
    sft_record,
    user_prompt,
)
from lakeshift.data import record_from_map

FIGURE_3 = ["FGF", "FHF", "FSH"]
LAKE = FrozenLakeMap.from_rows(FIGURE_3)
RECORD = record_from_map(LAKE, "figure-3", "mine")
PATH = ["LEFT", "UP", "UP", "RIGHT"]
SPLIT = SplitSpec("mine", (Group(size=4, count=10, hole_prob=0.3),))
MAPS = [generate_map(SPLIT, 0, i) for i in range(10)]


def _split(**group: Any) -> SplitSpec:
    return SplitSpec("s", (Group(**{"size": 3, "count": 4, "hole_prob": 0.2, **group}),))


# (what is called, a regular expression the message must match: it names the parameter)
CASES: dict[str, tuple[Callable[[], object], str]] = {
    # score_output: the map, the output, the names
    "score_output output None": (lambda: score_output(RECORD, None), r"^output must be a string"),
    "score_output output bytes": (lambda: score_output(RECORD, rb"\boxed{U}"), r"^output must be a string"),
    "score_output map None": (lambda: score_output(None, r"\boxed{U}"), r"^sm must be a ScoringMap"),
    "score_output map rows": (lambda: score_output(FIGURE_3, r"\boxed{U}"), r"^sm must be a ScoringMap"),
    "score_output cot bogus": (
        lambda: score_output(RECORD, "x", cot="bogus"),
        r"^cot: unknown CoT format 'bogus'",
    ),
    "score_output cot number": (lambda: score_output(LAKE, "x", cot=5), r"^cot: unknown CoT format 5"),
    "score_output compat bogus": (
        lambda: score_output(LAKE, "x", compat="gym"),
        r"^compat: unknown compat mode",
    ),
    "extract text None": (lambda: extract(None), r"^text must be a string"),
    "scoring_map None": (lambda: scoring_map(None), r"^rec must be a maps.jsonl record"),
    "scoring_map a map": (lambda: scoring_map(LAKE), r"^rec must be a maps.jsonl record.*record_from_map"),
    "map_from_record None": (lambda: map_from_record(None), r"^rec must be a maps.jsonl record"),
    # render and parse: a record for a map, unknown names, a player off the map
    "render a record": (lambda: render(RECORD, "grid"), r"^m must be a FrozenLakeMap.*map_from_record"),
    "render an image of a record": (lambda: render(RECORD, "image"), r"^m must be a FrozenLakeMap"),
    "render fmt bogus": (lambda: render(LAKE, "yaml"), r"^fmt: unknown input format 'yaml'"),
    "render fmt list": (lambda: render(LAKE, ["grid"]), r"^fmt: unknown input format"),
    "render style bogus": (lambda: render(LAKE, "table", style="fancy"), r"^style: unknown table style"),
    "render style on grid": (lambda: render(LAKE, "grid", style="aligned"), r"^style 'aligned' applies"),
    "render style on image": (lambda: render(LAKE, "image", style="aligned"), r"^style 'aligned' applies"),
    "render player text": (lambda: render(LAKE, "grid", player="a1"), r"^player must be a \(row, column\)"),
    "render player short": (lambda: render(LAKE, "desc", player=(0,)), r"^player must be a \(row, column\)"),
    "render player on a hole": (
        lambda: render(LAKE, "grid", player=(1, 1)),
        r"^player cell \(1, 1\) is a hole",
    ),
    "render image player off": (
        lambda: render(LAKE, "image", player=(5, 0)),
        r"^player cell \(5, 0\) is outside",
    ),
    "parse text None": (lambda: parse(None, "grid"), r"^text must be a string"),
    "parse fmt image": (lambda: parse("Grid:", "image"), r"^fmt: unknown text format 'image'"),
    "user_prompt variant": (lambda: user_prompt("eval", None), r"^variant: unknown prompt variant 'eval'"),
    "user_prompt map_text": (lambda: user_prompt("test", LAKE), r"^map_text must be a string"),
    # traces
    "completion cot bogus": (lambda: completion(LAKE, PATH, "tree"), r"^cot: unknown CoT format 'tree'"),
    "completion a record": (lambda: completion(RECORD, PATH, "grid"), r"^m must be a FrozenLakeMap"),
    "completion path None": (lambda: completion(LAKE, None, "grid"), r"^path must be a sequence of moves"),
    "completion path move": (
        lambda: completion(LAKE, ["LEFT", "NORTH"], "grid"),
        r"unknown move 'NORTH' at move 2 of path",
    ),
    "completion table_style": (
        lambda: completion(LAKE, PATH, "table", table_style="fancy"),
        r"^table_style: unknown table style 'fancy'",
    ),
    "completion path into a hole": (lambda: completion(LAKE, ["UP"], "grid"), r"the path falls into a hole"),
    "parse_steps cot bogus": (lambda: parse_steps("", "video"), r"^cot: unknown CoT format 'video'"),
    "parse_steps text None": (lambda: parse_steps(None, "grid"), r"^text must be a string"),
    "parse_steps m record": (lambda: parse_steps("", "grid", RECORD), r"^m must be a FrozenLakeMap or None"),
    "sft_record record None": (
        lambda: sft_record(None, "grid", "none", "train"),
        r"^map_record must be a maps.jsonl",
    ),
    # maps and the environment
    "from_rows None": (lambda: FrozenLakeMap.from_rows(None), r"^rows must be a list of strings"),
    "FrozenLakeMap start": (
        lambda: FrozenLakeMap(3, frozenset(), 5, (0, 1)),
        r"^start must be a \(row, column\)",
    ),
    "FrozenLakeMap holes": (lambda: FrozenLakeMap(3, None, (0, 0), (0, 1)), r"^holes must be a frozenset"),
    "simulate moves None": (lambda: LAKE.simulate(None), r"^moves must be a sequence of moves"),
    "simulate move bogus": (lambda: LAKE.simulate(["L", "NORTH"]), r"^moves: unknown move 'NORTH' at move 2"),
    "step move bogus": (lambda: LAKE.step((0, 0), "NORTH"), r"^move: unknown move 'NORTH'"),
    "optimal_path tie_break": (lambda: LAKE.optimal_path("zigzag"), r"unknown tie_break 'zigzag'"),
    "optimal_path uniform": (lambda: LAKE.optimal_path("uniform"), r"^rng: tie_break='uniform' needs an rng"),
    "load_maps None": (lambda: load_maps(None), r"^path must be a split folder or a maps.jsonl file"),
    # generation
    "Group size 1": (lambda: generate_map(_split(size=1), 0, 0), r"size must be an integer >= 2, got 1"),
    "Group size text": (
        lambda: generate_map(_split(size="4"), 0, 0),
        r"size must be an integer >= 2, got '4'",
    ),
    "Group hole_prob 1": (
        lambda: generate_map(_split(hole_prob=1.0), 0, 0),
        r"hole_prob must be a probability in \[0, 1\), got 1.0",
    ),
    "Group hole_prob text": (
        lambda: generate_map(_split(hole_prob="0.2"), 0, 0),
        r"hole_prob must be a probability",
    ),
    "Group count 0": (lambda: generate_map(_split(count=0), 0, 0), r"count must be an integer >= 1, got 0"),
    "spec groups of dicts": (
        lambda: generate_map(SplitSpec("s", ({"size": 3},)), 0, 0),
        r"groups must be a tuple of Group",
    ),
    "spec not a spec": (lambda: generate_map({"name": "s"}, 0, 0), r"^spec must be a SplitSpec"),
    "spec no groups": (lambda: generate_map(SplitSpec("s"), 0, 0), r"no maps to generate"),
    "spec tie_break": (
        lambda: generate_map(SplitSpec("s", SPLIT.groups, tie_break="zigzag"), 0, 0),
        r"unknown tie-break 'zigzag'",
    ),
    "seed -1": (lambda: generate_map(SPLIT, -1, 0), r"^seed must be an integer >= 0, got int -1"),
    "seed true": (lambda: generate_map(SPLIT, True, 0), r"^seed must be an integer >= 0, got bool True"),
    "seed text": (lambda: generate_map(SPLIT, "0", 0), r"^seed must be an integer >= 0, got str '0'"),
    "index past the end": (lambda: generate_map(SPLIT, 0, 10), r"^index must be an integer in \[0, 10\)"),
    "index negative": (lambda: generate_map(SPLIT, 0, -1), r"^index must be an integer in \[0, 10\)"),
    "max_attempts 0": (
        lambda: generate_map(SPLIT, 0, 0, max_attempts=0),
        r"^max_attempts must be an integer >= 1",
    ),
    "embedded without sources": (
        lambda: generate_map(SplitSpec("e", embed_source="mine", embed_size=6), 0, 0),
        r"^sources: split e embeds the maps of split 'mine'",
    ),
    # selecting maps
    "select_maps per_size text": (
        lambda: select_maps(MAPS, per_size="abc"),
        r"^per_size must be an integer >= 1, got str 'abc'",
    ),
    "select_maps per_size 0": (
        lambda: select_maps(MAPS, per_size=0),
        r"^per_size must be an integer >= 1, got int 0",
    ),
    "select_maps limit 0": (lambda: select_maps(MAPS, limit=0), r"^limit must be an integer >= 1, got int 0"),
    "select_maps limit float": (lambda: select_maps(MAPS, limit=2.0), r"^limit must be an integer >= 1"),
    "select_maps sizes int": (lambda: select_maps(MAPS, sizes=4), r"^sizes must be None or a collection"),
    "select_maps sizes text": (
        lambda: select_maps(MAPS, sizes=["4"]),
        r"^sizes must be None or a collection",
    ),
    "select_maps maps None": (lambda: select_maps(None), r"^maps must be a sequence of maps.jsonl records"),
    "select_maps a map without size": (
        lambda: select_maps([{"id": "a"}]),
        r"^maps\[0\] must be a maps.jsonl record",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_argument_is_a_lakeshift_error_naming_the_parameter(name: str) -> None:
    call, message = CASES[name]
    with pytest.raises(LakeshiftError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("out", "kwargs", "message"),
    [
        (None, {}, r"^out must be a folder path"),
        ("data", {"seed": -1}, r"^seed must be an integer >= 0, got int -1"),
        ("data", {"specs": [{"name": "s"}]}, r"^specs must be a list of SplitSpec"),
    ],
)
def test_build_suite_refuses_bad_arguments_before_writing(
    out: str | None, kwargs: dict[str, Any], message: str, tmp_path: Path
) -> None:
    folder = None if out is None else tmp_path / out
    specs = kwargs.pop("specs", [SPLIT])
    with pytest.raises(LakeshiftError, match=message):
        build_suite(specs, folder, images=False, progress=False, **kwargs)
    assert not any(tmp_path.iterdir())


def test_the_errors_of_bad_values_are_value_errors_too() -> None:
    """Code that caught the ValueError of an unknown name or a bad path keeps working."""
    for call in (
        lambda: render(LAKE, "yaml"),
        lambda: completion(LAKE, ["UP"], "grid"),
        lambda: extract("", "gym"),
    ):
        with pytest.raises(ValueError):
            call()


# ----- ranges: inside works as before, outside is refused ---------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(hole_prob=st.floats(0.0, 0.5), size=st.integers(2, 6))
def test_group_values_inside_the_range_give_maps(hole_prob: float, size: int) -> None:
    rec = generate_map(_split(size=size, hole_prob=hole_prob), 0, 3)
    assert rec["size"] == size and rec["id"] == "s-00003"
    assert FrozenLakeMap.from_rows(rec["rows"]).optimal_length == rec["optimal_length"]


@settings(max_examples=40, deadline=None)
@given(
    hole_prob=st.one_of(
        st.floats(min_value=1.0),
        st.floats(max_value=-1e-300),
        st.just(math.nan),
        st.just(math.inf),
        st.booleans(),
    )
)
def test_hole_probabilities_outside_0_to_1_are_refused(hole_prob: float) -> None:
    with pytest.raises(LakeshiftError, match=r"hole_prob must be a probability in \[0, 1\)"):
        generate_map(_split(hole_prob=hole_prob), 0, 0)


@settings(max_examples=30, deadline=None)
@given(size=st.integers(max_value=1))
def test_group_sizes_below_2_are_refused(size: int) -> None:
    with pytest.raises(LakeshiftError, match=r"size must be an integer >= 2"):
        generate_map(_split(size=size), 0, 0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**70), index=st.integers(0, 9))
def test_seeds_from_0_up_and_indices_inside_the_split_give_the_splits_maps(seed: int, index: int) -> None:
    rec = generate_map(SPLIT, seed, index)
    assert rec["id"] == f"mine-{index:05d}"
    assert rec == generate_map(SPLIT, seed, index)  # a map is its own (seed, split, index)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(max_value=-1))
def test_negative_seeds_are_refused(seed: int) -> None:
    with pytest.raises(LakeshiftError, match=r"^seed must be an integer >= 0"):
        generate_map(SPLIT, seed, 0)


@settings(max_examples=40, deadline=None)
@given(index=st.one_of(st.integers(max_value=-1), st.integers(min_value=10)))
def test_indices_outside_the_split_are_refused(index: int) -> None:
    with pytest.raises(LakeshiftError, match=r"^index must be an integer in \[0, 10\)"):
        generate_map(SPLIT, 0, index)


SIZED = [{"id": f"m{i}", "size": size} for i, size in enumerate([3, 4, 3, 5, 4, 3, 6, 3])]


@settings(max_examples=60, deadline=None)
@given(per_size=st.one_of(st.none(), st.integers(1, 10)), limit=st.one_of(st.none(), st.integers(1, 10)))
def test_per_size_and_limit_of_1_or_more_select_the_first_maps(
    per_size: int | None, limit: int | None
) -> None:
    chosen = select_maps(SIZED, per_size=per_size, limit=limit)
    taken: dict[int, int] = {}
    expected = []
    for rec in SIZED:
        if per_size is not None and taken.get(rec["size"], 0) >= per_size:
            continue
        taken[rec["size"]] = taken.get(rec["size"], 0) + 1
        expected.append(rec)
    assert chosen == expected[:limit]


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["per_size", "limit"]), value=st.integers(max_value=0))
def test_per_size_and_limit_below_1_are_refused(name: str, value: int) -> None:
    with pytest.raises(LakeshiftError, match=rf"^{name} must be an integer >= 1, got int {value}$"):
        select_maps(SIZED, **{name: value})


@settings(max_examples=60, deadline=None)
@given(row=st.integers(-3, 5), col=st.integers(-3, 5), fmt=st.sampled_from(["grid", "table", "desc"]))
def test_render_draws_every_safe_cell_and_refuses_the_rest(row: int, col: int, fmt: str) -> None:
    cell = (row, col)
    if LAKE.inside(cell) and cell not in LAKE.holes:
        assert parse(render(LAKE, fmt, player=cell), fmt).player == cell
    else:
        with pytest.raises(LakeshiftError, match=rf"^player cell \({row}, {col}\) is (outside|a hole)"):
            render(LAKE, fmt, player=cell)


def test_valid_calls_give_what_they_gave() -> None:
    """The valid neighbours of the refused calls: letters, a string of letters, a generator of moves, a
    list for a player cell, ``cot=None`` guessing the format, an empty ``sizes`` meaning all sizes."""
    assert score_output(RECORD, r"\boxed{L, U, U, R}", cot=None).optimal
    assert score_output(RECORD, completion(LAKE, PATH, "grid"), cot="grid").trace.faithful
    assert (
        completion(LAKE, "LUUR", "none")
        == completion(LAKE, iter(PATH), "none")
        == r"\boxed{LEFT, UP, UP, RIGHT}"
    )
    assert LAKE.simulate(m for m in "LUUR").success
    assert render(LAKE, "table", style="aligned") == render(LAKE, "table", player=[2, 1], style="aligned")
    rng = random.Random(0)
    assert LAKE.optimal_path("uniform", rng) == PATH
    assert select_maps(MAPS, sizes=[4], per_size=3, limit=2) == MAPS[:2]
    assert select_maps(MAPS, sizes=[]) == MAPS
