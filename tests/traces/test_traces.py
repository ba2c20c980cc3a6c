"""CoT completions follow the answer path, show the simulated states, and read back with parse_steps."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lakeshift import formats, traces
from lakeshift.env import TIE_BREAKS, FrozenLakeMap
from lakeshift.formats import BoardState

FIG3 = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])  # player (2,1), goal (0,1), holes (1,1), (2,2)
FIG3_PATH = ["LEFT", "UP", "UP", "RIGHT"]
FIG3_STEPS = [
    "The direct path to the goal is moving UP. However, there is a hole UP, so I cannot move UP. "
    "As the direct path is blocked, I will move LEFT instead.",
    "The direct path to the goal is moving UP or RIGHT. Thus, I will move UP.",
    "The direct path to the goal is moving UP or RIGHT. "
    "However, there is a hole RIGHT, so I cannot move RIGHT. Thus, I will move UP.",
    "The direct path to the goal is moving RIGHT. Thus, I will move RIGHT.",
]


@st.composite
def solved_maps(draw: st.DrawFn) -> tuple[FrozenLakeMap, list[str]]:
    """A solvable random map of size 2-12 and one of its optimal paths (any tie-break)."""
    n = draw(st.integers(2, 12))
    rng = random.Random(draw(st.integers(0, 2**32)))
    cells = [(r, c) for r in range(n) for c in range(n)]
    start, goal = rng.sample(cells, 2)
    p_hole = draw(st.sampled_from([0.0, 0.1, 0.25, 0.4]))
    holes = frozenset(c for c in cells if c not in (start, goal) and rng.random() < p_hole)
    m = FrozenLakeMap(n, holes, start, goal)
    assume(m.solvable)
    return m, m.optimal_path(draw(st.sampled_from(TIE_BREAKS)), rng)


# astar answers with A*'s own path when the search never reached the plan's cells (test_traces_search.py);
# wave answers the path of its arrows (test_traces_wave.py).
@pytest.mark.parametrize("cot", [c for c in traces.COT_FORMATS if c not in ("astar", *traces.MAP_COTS)])
@settings(max_examples=60, deadline=None)
@given(case=solved_maps())
def test_trace_follows_path_and_shows_simulated_states(cot: str, case: tuple) -> None:
    m, path = case
    text = traces.completion(m, path, cot)
    assert text.endswith("\n" + traces.boxed(path)) or text == traces.boxed(path)
    assert text.count("\\boxed{") == 1
    steps = traces.parse_steps(text, cot, m)
    if cot == "none":
        assert text == traces.boxed(path) and steps == []
        return
    assert [s.move for s in steps] == path
    assert all(s.error is None for s in steps)
    positions = m.simulate(path).positions
    if cot in ("table", "grid", "table+desc", "grid+desc"):
        for i, step in enumerate(steps):
            assert step.state == BoardState.of(m, positions[i + 1])
            assert step.state_move == path[i]
            assert formats.parse(step.state_text, cot.split("+")[0]) == step.state
        assert steps[-1].state.goal is None  # the last map shows the player on the goal
    if cot.endswith("desc"):
        assert text.startswith(f"This is a {m.size}x{m.size} map.\n")
        for i, step in enumerate(steps):
            assert step.sentences.startswith("The direct path to the goal is moving ")
            assert step.sentences.endswith((f"I will move {path[i]}.", f"I will move {path[i]} instead."))
            # The announced move is the only move the step says it takes.
            assert step.sentences.count("I will move") == 1


@settings(max_examples=60, deadline=None)
@given(case=solved_maps())
def test_desc_sentences_follow_the_appendix_rule(case: tuple) -> None:
    m, path = case
    positions = m.simulate(path).positions
    for pos, move in zip(positions, path, strict=False):
        direct = traces.direct_moves(pos, m.goal)
        sentences = traces.step_sentences(m, pos, move)
        first = f"The direct path to the goal is moving {' or '.join(direct)}."
        assert sentences[0] == first
        for d in direct:
            hole_sentence = f"However, there is a hole {d}, so I cannot move {d}."
            assert (hole_sentence in sentences) == (d != move and m.step(pos, d) in m.holes)
        if move in direct:
            assert sentences[-1] == f"Thus, I will move {move}."
            assert len(sentences) == 1 + sum(m.step(pos, d) in m.holes for d in direct if d != move) + 1
        else:
            assert sentences[-1].endswith(f"I will move {move} instead.")
            assert len(sentences) == 1 + len(direct) + 1  # every direct direction gets a reason


def test_figure3_description_trace_sentence_for_sentence() -> None:
    text = traces.completion(FIG3, FIG3_PATH, "desc")
    assert text.splitlines() == ["This is a 3x3 map.", *FIG3_STEPS, "\\boxed{LEFT, UP, UP, RIGHT}"]


def test_figure3_combined_grid_trace() -> None:
    text = traces.completion(FIG3, FIG3_PATH, "grid+desc")
    grids = [
        "Grid:\n.  G  .\n.  X  .\nP  .  X",
        "Grid:\n.  G  .\nP  X  .\n.  .  X",
        "Grid:\nP  G  .\n.  X  .\n.  .  X",
        "Grid:\n.  P  .\n.  X  .\n.  .  X",
    ]
    body = "\n".join(f"{s}\n{g}" for s, g in zip(FIG3_STEPS, grids, strict=True))
    assert text == f"This is a 3x3 map.\n{body}\n\\boxed{{LEFT, UP, UP, RIGHT}}"
    assert traces.completion(FIG3, FIG3_PATH, "grid") == "\n".join([*grids, "\\boxed{LEFT, UP, UP, RIGHT}"])


def test_aligned_table_trace() -> None:
    text = traces.completion(FIG3, FIG3_PATH, "table+desc", table_style="aligned")
    assert "| Row 3 |   @   |   _   |   #   |" in text
    steps = traces.parse_steps(text, "table+desc", FIG3)
    assert [s.move for s in steps] == FIG3_PATH


def test_safe_direct_moves_not_taken() -> None:
    # Start (2,1), goal (0,0): UP is a hole, LEFT is safe but a pocket; the path goes RIGHT and around.
    m = FrozenLakeMap.from_rows(["GFF", "HHF", "FSF"])
    assert m.optimal_path() == ["RIGHT", "UP", "UP", "LEFT", "LEFT"]
    assert traces.step_sentences(m, m.start, "RIGHT") == [
        "The direct path to the goal is moving UP or LEFT.",
        "However, there is a hole UP, so I cannot move UP.",
        "However, moving LEFT leads to a longer path, so I will not move LEFT.",
        "Thus, I will move RIGHT instead.",
    ]
    # A tie the priority tie-break resolves away from the goal: DOWN is direct and as short as RIGHT
    # (the default "direct" tie-break takes DOWN).
    m = FrozenLakeMap.from_rows(["FSFF", "HFFF", "GHFF", "FFFF"])
    assert m.optimal_path("priority")[0] == "RIGHT"
    assert m.optimal_path()[0] == "DOWN"
    assert traces.step_sentences(m, m.start, "RIGHT") == [
        "The direct path to the goal is moving DOWN or LEFT.",
        "Moving DOWN is safe, but moving RIGHT is just as short.",
        "However, moving LEFT leads to a longer path, so I will not move LEFT.",
        "Thus, I will move RIGHT instead.",
    ]
    # When the move taken is direct, a safe direct alternative is not discussed (Figure 3, step 2).
    m = FrozenLakeMap.from_rows(["SFF", "FFF", "FFG"])
    assert traces.step_sentences(m, m.start, "RIGHT") == [
        "The direct path to the goal is moving DOWN or RIGHT.",
        "Thus, I will move RIGHT.",
    ]


def test_trace_follows_a_path_that_is_not_shortest() -> None:
    m = FrozenLakeMap.from_rows(["FSF", "FFF", "FFG"])
    path = ["LEFT", "DOWN", "DOWN", "RIGHT", "RIGHT"]
    assert traces.step_sentences(m, m.start, "LEFT") == [
        "The direct path to the goal is moving DOWN or RIGHT.",
        "Moving DOWN is shorter, but I will move LEFT.",
        "Moving RIGHT is shorter, but I will move LEFT.",
        "Thus, I will move LEFT instead.",
    ]
    for cot in traces.COT_FORMATS[1:]:
        if cot in ("astar", *traces.MAP_COTS):  # a search trace or a wave always answers a shortest path
            continue
        assert [s.move for s in traces.parse_steps(traces.completion(m, path, cot), cot, m)] == path


@settings(max_examples=80, deadline=None)
@given(case=solved_maps())
def test_reasons_are_true_statements_about_the_map(case: tuple) -> None:
    m, path = case
    dist = traces.goal_distances(m)
    positions = m.simulate(path).positions
    for pos, move in zip(positions, path, strict=False):
        for sentence in traces.step_sentences(m, pos, move, dist)[1:-1]:
            d = re.search(r"UP|DOWN|LEFT|RIGHT", sentence)[0]
            nxt = m.step(pos, d)
            if "there is a hole" in sentence:
                assert nxt in m.holes
            elif "longer path" in sentence:
                assert dist[nxt] > dist[pos]
            elif "just as short" in sentence:
                assert dist[nxt] == dist[m.step(pos, move)]
            else:
                assert "is shorter" in sentence and dist[nxt] < dist[m.step(pos, move)]


@settings(max_examples=80, deadline=None)
@given(case=solved_maps())
def test_direct_tie_break_never_detours_in_descriptions(case: tuple) -> None:
    """With the default tie-break a move away from the goal is taken only when no direct move is as short."""
    m, _ = case
    path = m.optimal_path()
    text = traces.completion(m, path, "desc")
    assert "just as short" not in text and "is shorter, but" not in text


@pytest.mark.parametrize(
    "path", [["UP"], ["LEFT", "UP", "UP"], ["LEFT", "UP", "UP", "RIGHT", "LEFT"], ["DOWN", "UP"]]
)
def test_unsuccessful_paths_are_refused(path: list[str]) -> None:
    with pytest.raises(ValueError):
        traces.completion(FIG3, path, "desc")


def test_letters_and_unknown_names() -> None:
    assert traces.boxed(["U", "R"]) == "\\boxed{UP, RIGHT}"
    assert traces.completion(FIG3, list("LUUR"), "none") == "\\boxed{LEFT, UP, UP, RIGHT}"
    with pytest.raises(ValueError):
        traces.completion(FIG3, FIG3_PATH, "image")
    with pytest.raises(ValueError):
        traces.boxed(["NORTH"])
    with pytest.raises(ValueError):
        traces.parse_steps("", "video")


def test_parse_steps_tolerates_model_errors() -> None:
    good = traces.completion(FIG3, FIG3_PATH, "grid+desc").splitlines()
    # Drop the second grid, corrupt the third one, add chatter and a second box.
    broken = good[:7] + good[11:12] + ["Grid:", "P  G  .", ".  X", ".  .  X"] + good[16:-1]
    broken += ["Let me double check.", "\\boxed{WRONG}", "\\boxed{LEFT, UP, UP, RIGHT}"]
    steps = traces.parse_steps("\n".join(broken), "grid+desc", FIG3)
    assert [s.move for s in steps] == ["LEFT", "UP", "UP", "RIGHT", None]
    assert steps[0].error is None and steps[0].state_move == "LEFT"
    assert steps[1].error == "no map after the announced move" and steps[1].state is None
    assert steps[2].state is None and "row 2 has 2 cells" in steps[2].error
    assert steps[3].state is not None and steps[3].state_move is None  # previous state unknown
    # Only the last box is the answer: an earlier one stays in the text as a stray sentence.
    assert steps[4].error == "no announced move"
    assert steps[4].sentences == "Let me double check. \\boxed{WRONG}"
    # Table and grid traces infer the moves from the states; garbage never raises.
    table = traces.completion(FIG3, FIG3_PATH, "table")
    assert [s.move for s in traces.parse_steps(table, "table")] == [None, "UP", "UP", "RIGHT"]
    for cot in traces.COT_FORMATS:
        for junk in ["", "\\boxed{}", "| | Col 1 |\n| x", "Grid:\nP\n", "I will move SIDEWAYS.", "Grid:"]:
            traces.parse_steps(junk, cot)


def test_parse_steps_desc_sentences_may_span_lines() -> None:
    text = "This is a 3x3 map.\nThe direct path to the goal is moving UP.\nThus, I will move UP.\n\\boxed{UP}"
    steps = traces.parse_steps(text, "desc")
    assert len(steps) == 1 and steps[0].move == "UP"
    assert steps[0].sentences == "The direct path to the goal is moving UP. Thus, I will move UP."


@settings(max_examples=60, deadline=None)
@given(case=solved_maps(), style=st.sampled_from([None, "compact", "aligned"]))
def test_completions_equal_single_completions(case: tuple, style: str | None) -> None:
    m, path = case
    every = traces.completions(m, path, table_style=style)
    assert list(every) == list(traces.COT_FORMATS)
    for cot, text in every.items():
        assert text == traces.completion(m, path, cot, table_style=style)
    subset = traces.completions(m, path, ("grid+desc", "none"), table_style=style)
    assert subset == {"grid+desc": every["grid+desc"], "none": every["none"]}


def test_completions_errors() -> None:
    m = FrozenLakeMap.from_rows(["SH", "FG"])
    with pytest.raises(ValueError, match="unknown CoT format 'tree'"):
        traces.completions(m, ["DOWN", "RIGHT"], ("desc", "tree"))
    with pytest.raises(ValueError, match="falls into a hole"):
        traces.completions(m, ["RIGHT", "DOWN"], ("none", "grid"))


#: The description sentences that compare shortest distances to the goal (planning knowledge).
DISTANCE_SENTENCE = re.compile(
    r" (However, moving \w+ leads to a longer path, so I will not move \w+\.|"
    r"Moving \w+ is safe, but moving \w+ is just as short\.|Moving \w+ is shorter, but I will move \w+\.)"
)
WALK_COTS = tuple(c for c in traces.COT_FORMATS if c not in ("astar", *traces.MAP_COTS))


@given(solved_maps())
@settings(max_examples=150, deadline=None)
def test_a_plan_written_as_a_walk_is_its_plan_trace_without_the_distance_sentences(
    solved: tuple[FrozenLakeMap, list[str]],
) -> None:
    """A walk's trace has the exact syntax of the CoT: for a walk that is a plan, it is the plan's own trace
    minus the sentences that compare shortest distances (which a walk's narration never states)."""
    m, path = solved
    plan = traces.completions(m, path, WALK_COTS)
    walk = traces.walk_completions(m, path, WALK_COTS)
    for cot in WALK_COTS:
        assert walk[cot] == DISTANCE_SENTENCE.sub("", plan[cot]), cot


@given(solved_maps(), st.integers(0, 2**32), st.sampled_from(WALK_COTS))
@settings(max_examples=150, deadline=None)
def test_a_random_walk_trace_reads_back_as_the_walk_and_states_facts_only(
    solved: tuple[FrozenLakeMap, list[str]], seed: int, cot: str
) -> None:
    from lakeshift.models.pretrain import safe_walk

    m, _ = solved
    cells, moves = safe_walk(m, random.Random(seed))
    text = traces.walk_completions(m, moves, (cot,))[cot]
    assert text.endswith(traces.boxed(moves)) and not DISTANCE_SENTENCE.search(text)
    steps = traces.parse_steps(text, cot, m)
    if cot != "none":
        assert [s.error for s in steps] == [None] * len(steps)
    if cot == "coords":
        assert [s.cell for s in steps] == cells[1:]
    elif cot != "none":
        assert [s.move for s in steps] == moves
    for step, cell in zip(steps, cells[1:], strict=False):
        if step.state is not None:
            assert step.state.player == cell


def test_a_walk_must_stay_safe_and_end_where_it_reaches_the_goal() -> None:
    with pytest.raises(ValueError, match="hole"):
        traces.walk_completions(FIG3, ["RIGHT"], ("grid",))
    with pytest.raises(ValueError, match="edge"):
        traces.walk_completions(FIG3, ["DOWN"], ("grid",))
    with pytest.raises(ValueError, match="passes the goal"):
        traces.walk_completions(FIG3, ["LEFT", "UP", "UP", "RIGHT", "RIGHT"], ("grid",))
    with pytest.raises(ValueError, match="astar"):
        traces.walk_completions(FIG3, ["LEFT"], ("astar",))
    with pytest.raises(ValueError, match="wave has no walk trace"):
        traces.walk_completions(FIG3, ["LEFT"], ("grid", "wave"))
    # a walk that stops short is a walk: its trace ends with its own moves
    assert traces.walk_completions(FIG3, ["LEFT", "UP"], ("coords",))["coords"] == (
        "(3,2) (3,1) (2,1)\n\\boxed{LEFT, UP}"
    )
