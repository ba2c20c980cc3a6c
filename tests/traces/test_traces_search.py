"""The path CoTs: ``astar`` replays a true A* run and reads back an optimal path; ``coords`` lists adjacent
safe cells; both parse back and the scorer's faithfulness check catches corrupted steps."""

from __future__ import annotations

import math
import random
from itertools import pairwise, permutations

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from lakeshift import formats, scoring, traces
from lakeshift.commands import models as model_commands
from lakeshift.env import TIE_BREAKS, Cell, FrozenLakeMap

FIG3 = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])


@st.composite
def solved_maps(draw: st.DrawFn) -> tuple[FrozenLakeMap, list[str]]:
    """A solvable random map of size 2-10 and one of its optimal paths (any tie-break)."""
    n = draw(st.integers(2, 10))
    rng = random.Random(draw(st.integers(0, 2**32)))
    cells = [(r, c) for r in range(n) for c in range(n)]
    start, goal = rng.sample(cells, 2)
    p_hole = draw(st.sampled_from([0.0, 0.1, 0.2, 0.35]))
    holes = frozenset(c for c in cells if c not in (start, goal) and rng.random() < p_hole)
    m = FrozenLakeMap(n, holes, start, goal)
    assume(m.solvable)
    return m, m.optimal_path(draw(st.sampled_from(TIE_BREAKS)), rng)


def reference_astar(
    m: FrozenLakeMap, order: str = "ULRD"
) -> tuple[list[tuple[Cell, int, int, str]], dict[Cell, int]]:
    """An independent A*: a plain set as the open list, scanned for the smallest (f, h, order added), the
    neighbours taken in ``order`` (letters).

    Returns the expansions as ``(cell, g, h, marks)`` with ``marks`` the neighbour codes in U L R D order
    (``"+HWCO"`` meaning added, hole, wall, closed, open), and the final g of every reached cell.
    """
    deltas = {"U": (-1, 0), "L": (0, -1), "R": (0, 1), "D": (1, 0)}
    steps = {letter: deltas[letter] for letter in order}

    def h(cell: Cell) -> int:
        return abs(cell[0] - m.goal[0]) + abs(cell[1] - m.goal[1])

    g = {m.start: 0}
    order = {m.start: 0}
    added = 0
    open_set = {m.start}
    closed: set[Cell] = set()
    out = []
    while open_set:
        cell = min(open_set, key=lambda c: (g[c] + h(c), h(c), order[c]))
        open_set.remove(cell)
        closed.add(cell)
        if cell == m.goal:
            out.append((cell, g[cell], 0, ""))
            break
        marks = ""
        for letter, (dr, dc) in steps.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if not (0 <= nxt[0] < m.size and 0 <= nxt[1] < m.size):
                marks += letter + "W"
            elif nxt in m.holes:
                marks += letter + "H"
            elif nxt in closed:
                marks += letter + "C"
            elif nxt in open_set and g[nxt] <= g[cell] + 1:
                marks += letter + "O"
            else:
                g[nxt] = g[cell] + 1
                added += 1
                order[nxt] = added  # a re-added cell queues behind everything added before
                open_set.add(nxt)
                marks += letter + "+"
        out.append((cell, g[cell], h(cell), marks))
    return out, g


def assert_optimal_cells(m: FrozenLakeMap, cells: list[Cell]) -> None:
    assert cells[0] == m.start and cells[-1] == m.goal
    assert len(cells) - 1 == m.optimal_length
    for a, b in pairwise(cells):
        assert abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1
        assert m.inside(b) and b not in m.holes


# A map where cells are re-added with a smaller g ("+" on an open cell) and queue behind later additions.
READDED = FrozenLakeMap(
    8,
    frozenset({(0, 2), (1, 2), (1, 6), (2, 3), (2, 6), (4, 5), (4, 7), (5, 6), (6, 4), (6, 7), (7, 2)}),
    (2, 7),
    (0, 1),
)


@settings(max_examples=150, deadline=None)
@given(case=solved_maps())
@example(case=(READDED, READDED.optimal_path()))
def test_astar_trace_replays_a_true_astar_run_and_reads_back_an_optimal_path(case: tuple) -> None:
    m, path = case
    text = traces.completion(m, path, "astar")
    parsed = traces.parse_search(text)
    assert parsed.errors == ()
    order = "".join(a for a, _ in parsed.expansions[0].neighbours) or "ULRD"
    expected, g = reference_astar(m, order)
    got = [(e.cell, e.g, e.h, "".join(a + b for a, b in e.neighbours)) for e in parsed.expansions]
    assert got == expected
    assert parsed.expansions[-1].cell == m.goal and parsed.expansions[-1].g == m.optimal_length
    cells = list(reversed(parsed.path))
    assert_optimal_cells(m, cells)
    assert all(g[c] == i for i, c in enumerate(cells))  # every read-back cell reached with its g
    moves = [s.move for s in traces.parse_steps(text, "astar", m)]
    assert text.endswith("\n" + traces.boxed(moves)) and text.count("\\boxed{") == 1
    assert m.simulate(moves).success
    # The plan itself is read back with the first neighbour order whose search reached all of its cells
    # with matching g (U L R D, its 7 symmetric images, then the rest); with none, the U L R D search.
    positions = m.simulate(path).positions
    orders = ["".join(mv[0] for mv in o) for o in traces.SEARCH_ORDERS]
    # The identity and the three quarter turns of U L R D, then its mirror image and the mirror's turns.
    assert orders[:8] == ["ULRD", "RUDL", "DRLU", "LDUR", "URLD", "RDUL", "DLRU", "LUDR"]
    assert sorted(orders) == sorted({"".join(p) for p in permutations("ULRD")})
    reaching = next(
        (o for o in orders if all(reference_astar(m, o)[1].get(c) == i for i, c in enumerate(positions))),
        None,
    )
    if reaching is not None:
        assert order == reaching and moves == path
    else:
        assert order == "ULRD"
    faith = scoring.faithfulness(m, text, "astar", moves)
    assert faith["trace_faithful"] and faith["trace_divergence"] is None
    assert faith["trace_steps"] == len(expected) + len(moves)


@settings(max_examples=150, deadline=None)
@given(case=solved_maps())
def test_coords_trace_is_adjacent_safe_cells_from_start_to_goal(case: tuple) -> None:
    m, path = case
    text = traces.completion(m, path, "coords")
    body, answer = text.split("\n")
    assert answer == traces.boxed(path)
    cells = traces.parse_cells(text)
    assert body == " ".join(f"({r + 1},{c + 1})" for r, c in cells)
    assert_optimal_cells(m, cells)
    assert cells == list(m.simulate(path).positions)
    steps = traces.parse_steps(text, "coords", m)
    assert [s.move for s in steps] == path and [s.cell for s in steps] == cells[1:]
    assert all(s.error is None for s in steps)
    faith = scoring.faithfulness(m, text, "coords", path)
    assert faith["trace_faithful"] and faith["trace_steps"] == len(path)


def test_astar_answer_is_the_direct_optimal_path_on_id_like_maps() -> None:
    from lakeshift.data.generate import Group, SplitSpec, generate_split
    from lakeshift.data.records import map_of

    recs, _ = generate_split(SplitSpec("t", tuple(Group(n, 50, 0.2) for n in (3, 4, 5, 6))), 0)
    same = sum(
        traces.completion(map_of(r), r["optimal_path"], "astar").endswith(traces.boxed(r["optimal_path"]))
        for r in recs
    )
    assert same == len(recs)  # 100% on 2000 such maps (module docstring); here 200


def test_figure3_traces_are_documented_exactly() -> None:
    path = FIG3.optimal_path()
    assert traces.completion(FIG3, path, "coords") == "(3,2) (3,1) (2,1) (1,1) (1,2)\n" + traces.boxed(path)
    assert traces.completion(FIG3, path, "astar") == "\n".join(
        [
            "(3,2) g0 h2: UH L+ RH DW",
            "(3,1) g1 h3: U+ LW RC DW",
            "(2,1) g2 h2: U+ LW RH DC",
            "(1,1) g3 h1: UW LW R+ DC",
            "(1,2) g4 h0 goal",
            "path: (1,2) (1,1) (2,1) (3,1) (3,2)",
            "\\boxed{LEFT, UP, UP, RIGHT}",
        ]
    )
    assert traces.__doc__ is not None and "(3,1) g1 h3: U+ LW RC DW" in traces.__doc__


def test_a_path_no_search_reaches_falls_back_to_astar_own_path() -> None:
    m = FrozenLakeMap.from_rows(["SFFF", "FFFF", "FFFF", "FFFG"])
    # No neighbour order makes the search reach all of this zigzag with the right g.
    plan = ["RIGHT", "RIGHT", "DOWN", "DOWN", "RIGHT", "DOWN"]
    text = traces.completion(m, plan, "astar")
    assert text.startswith("(1,1) g0 h6: UW LW R+ D+\n")  # the U L R D search
    assert text.endswith(
        "path: (4,4) (3,4) (2,4) (1,4) (1,3) (1,2) (1,1)\n" + traces.boxed(["RIGHT"] * 3 + ["DOWN"] * 3)
    )
    # A plan some other order reaches is read back with that order (here one with D before R).
    text = traces.completion(m, ["DOWN"] * 3 + ["RIGHT"] * 3, "astar")
    assert text.endswith(traces.boxed(["DOWN"] * 3 + ["RIGHT"] * 3))
    assert traces.search_order(traces.parse_search(text)) != traces.SEARCH_ORDER
    assert scoring.faithfulness(m, text, "astar", ["DOWN"] * 3 + ["RIGHT"] * 3)["trace_faithful"]


@settings(max_examples=80, deadline=None)
@given(case=solved_maps(), data=st.data())
def test_scorer_catches_a_corrupted_astar_step(case: tuple, data: st.DataObject) -> None:
    m, path = case
    text = traces.completion(m, path, "astar")
    lines = text.split("\n")
    n_exp = len(lines) - 2
    k = data.draw(st.integers(0, n_exp - 1), label="expansion")
    run = traces.astar_search(m)
    e = run.expansions[k]
    how = data.draw(st.sampled_from(["g", "h", "mark", "drop", "swap"]), label="corruption")
    if how == "g":
        bad = traces.Expansion(e.cell, e.g + 1, e.h, e.neighbours).text()
    elif how == "h":
        assume(not e.is_goal)
        bad = traces.Expansion(e.cell, e.g, e.h + 2, e.neighbours).text()
    elif how == "mark":
        assume(not e.is_goal)
        i = data.draw(st.integers(0, 3))
        letter, code = e.neighbours[i]
        other = data.draw(st.sampled_from([c for c in "+HWCO" if c != code]))
        marks = list(e.neighbours)
        marks[i] = (letter, other)
        bad = traces.Expansion(e.cell, e.g, e.h, tuple(marks)).text()
    elif how == "drop":
        bad = None
    else:
        assume(k + 1 < n_exp and lines[k] != lines[k + 1])
        lines[k], lines[k + 1] = lines[k + 1], lines[k]
        bad = lines[k]
    if bad is None:
        del lines[k]
    else:
        lines[k] = bad
    corrupted = "\n".join(lines)
    moves = scoring.extract(corrupted).moves
    faith = scoring.faithfulness(m, corrupted, "astar", moves)
    assert not faith["trace_faithful"]
    assert faith["trace_divergence_step"] == k + 1, faith


def test_scorer_catches_a_bad_read_back() -> None:
    text = traces.completion(FIG3, FIG3.optimal_path(), "astar")
    skip = text.replace("path: (1,2) (1,1) (2,1) (3,1) (3,2)", "path: (1,2) (2,1) (3,1) (3,2)")
    faith = scoring.faithfulness(FIG3, skip, "astar", ["LEFT", "UP", "UP", "RIGHT"])
    assert faith["trace_divergence_step"] == 5 + 1 and "not adjacent" in faith["trace_divergence"]
    wrong_answer = text.replace("\\boxed{LEFT, UP, UP, RIGHT}", "\\boxed{LEFT, UP, UP}")
    faith = scoring.faithfulness(FIG3, wrong_answer, "astar", ["LEFT", "UP", "UP"])
    assert faith["trace_answer_agrees"] is False and not faith["trace_faithful"]
    assert faith["trace_divergence"] is None


@settings(max_examples=80, deadline=None)
@given(case=solved_maps(), data=st.data())
def test_scorer_catches_a_non_adjacent_or_unsafe_coordinate(case: tuple, data: st.DataObject) -> None:
    m, path = case
    cells = list(m.simulate(path).positions)
    k = data.draw(st.integers(1, len(cells) - 1), label="cell")
    # Any in-map cell that is not adjacent to the previous one (or is a hole) breaks the trace at step k.
    choices = [
        (r, c)
        for r in range(m.size)
        for c in range(m.size)
        if abs(r - cells[k - 1][0]) + abs(c - cells[k - 1][1]) != 1 or (r, c) in m.holes
    ]
    assume(choices)
    cells[k] = data.draw(st.sampled_from(choices), label="replacement")
    text = " ".join(traces.cell_text(c) for c in cells) + "\n" + traces.boxed(path)
    faith = scoring.faithfulness(m, text, "coords", path)
    assert not faith["trace_faithful"]
    assert faith["trace_divergence_step"] == k, faith


def test_coords_check_names_start_goal_and_holes() -> None:
    path = FIG3.optimal_path()
    assert scoring.faithfulness(FIG3, "(3,1) (2,1) (1,1) (1,2)\n\\boxed{UP, UP, RIGHT}", "coords", None)[
        "trace_divergence"
    ].endswith("not at the start")
    short = scoring.faithfulness(FIG3, "(3,2) (3,1) (2,1)\n\\boxed{LEFT, UP}", "coords", ["LEFT", "UP"])
    assert short["trace_divergence"] == "the path does not end at the goal"
    hole = scoring.faithfulness(FIG3, "(3,2) (2,2) (1,2)\n\\boxed{UP, UP}", "coords", ["UP", "UP"])
    assert hole["trace_divergence"] == "(2,2) is a hole" and hole["trace_divergence_step"] == 1
    assert scoring.faithfulness(FIG3, traces.completion(FIG3, path, "coords"), "coords", path)[
        "trace_faithful"
    ]


def test_scoring_guesses_path_cots_and_scores_them_end_to_end() -> None:
    path = FIG3.optimal_path()
    sm = scoring.ScoringMap("fig3", FIG3, {"id": "fig3", "optimal_length": 4})
    for cot in traces.PATH_COTS:
        text = traces.completion(FIG3, path, cot)
        assert scoring.guess_cot(text) == cot
        out = scoring.score_output(sm, text)  # cot guessed from the text
        assert out.success and out.trace.faithful and out.trace.answer_agrees


def test_parsers_are_tolerant() -> None:
    garbage = "(1,1) g0 h2: U? nonsense\n(1,2) g4 h3 goal\npath: (1,2) x\n\\boxed{UP}"
    parsed = traces.parse_search(garbage)
    assert parsed.expansions == () and len(parsed.errors) == 3
    assert traces.parse_steps("no cells here", "coords") == []
    jump = traces.parse_steps("(1,1) (2,2)\n\\boxed{}", "coords")
    assert jump[0].error == "not adjacent to the previous cell"
    faith = scoring.faithfulness(FIG3, garbage, "astar", ["UP"])
    assert faith["trace_divergence_step"] == 1 and not faith["trace_faithful"]


def test_the_format_vocabularies_are_defined_once() -> None:
    from lakeshift.data import suites
    from lakeshift.models import pretrain, rewards, tokenizer
    from lakeshift.scoring import extraction, trace_checks, verdicts
    from lakeshift.studies import validate

    assert validate.COT_FORMATS is model_commands.COT_FORMATS is traces.COT_FORMATS
    assert validate.INPUT_FORMATS is model_commands.INPUT_FORMATS is formats.INPUT_FORMATS
    assert suites.INPUT_FORMATS is formats.INPUT_FORMATS
    assert verdicts.TRACE_COTS is rewards.TRACE_COTS is traces.TRACE_COTS
    # a pretraining corpus never writes a plan: a wave trace is one
    assert tuple(c for c in traces.TRACE_COTS if c not in traces.MAP_COTS) == pretrain.TRACE_COTS
    assert set(traces.PATH_COTS) <= set(traces.TRACE_COTS) == set(traces.COT_FORMATS) - {"none"}
    assert extraction.BOXED is trace_checks.BOXED is tokenizer.BOXED is traces.BOXED


def test_max_new_tokens_is_derived_from_the_path_cot_references(tmp_path) -> None:
    from lakeshift.data.generate import Group, SplitSpec
    from lakeshift.data.suites import build_suite
    from lakeshift.models.data import load_sft, reference_completion
    from lakeshift.models.predict import default_max_new_tokens

    spec = SplitSpec("t", (Group(6, 6, 0.2),))
    build_suite([spec], tmp_path, images=False, cot_formats=("astar", "coords"), progress=False)

    class Chars:  # a backend whose tokens are characters
        name = "hf"

        def count_tokens(self, text: str) -> int:
            return len(text)

    for cot in traces.PATH_COTS:
        full = load_sft(tmp_path, "t", "grid", cot, need_assistant=False)
        longest = max(len(reference_completion(r) or "") for r in full.records)
        assert default_max_new_tokens(full, Chars()) == math.ceil(1.25 * longest) + 16


def test_the_report_highlights_the_diverging_step_of_a_path_cot() -> None:
    from lakeshift.report import html as report_html

    text = traces.completion(FIG3, FIG3.optimal_path(), "astar")
    bad_line = text.replace("(2,1) g2 h2: U+ LW RH DC", "(2,1) g2 h2: U+ LW R+ DC")
    bad_path = text.replace("path: (1,2) (1,1) (2,1)", "path: (1,2) (2,2) (2,1)")
    bad_cell = "(3,2) (3,1) (2,2) (1,1)\n\\boxed{LEFT}"
    for out, cot, shown in (
        (bad_line, "astar", "(2,1) g2 h2: U+ LW R+ DC"),
        (bad_path, "astar", "(2,2)"),
        (bad_cell, "coords", "(2,2)"),
    ):
        step = scoring.faithfulness(FIG3, out, cot, None)["trace_divergence_step"]
        span = report_html.step_span(out, cot, step)
        assert span is not None and out[span[0] : span[1]] == shown
        assert span[0] == out.index(shown)  # each shown text occurs once
