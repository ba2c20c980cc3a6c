"""Answer extraction, verdicts, compatibility modes, CoT faithfulness and predictions-file handling."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from suite_fixtures import make_maps, map_record, write_jsonl

from lakeshift.env import FrozenLakeMap
from lakeshift.errors import LakeshiftError
from lakeshift.scoring import (
    extract,
    last_boxed,
    load_scoring_maps,
    parse_moves,
    read_predictions,
    score_output,
    score_predictions,
    scoring_map,
)

# --------------------------------------------------------------------------------------------------------
# Fixtures shared with the other scoring test files (imported from here)
# --------------------------------------------------------------------------------------------------------


# A 3x3 map: start (2,1), goal (0,1), holes (1,1) and (2,2)  (the paper's Figure 3 example).
FIG3 = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
FIG3_SM = scoring_map(map_record(FIG3, "fig3", "id-test"))


# --------------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("LEFT, UP, UP, RIGHT", ("LEFT", "UP", "UP", "RIGHT")),
        ("L, U, U, R", ("LEFT", "UP", "UP", "RIGHT")),
        ("left up Up right", ("LEFT", "UP", "UP", "RIGHT")),
        ("L -> U → U \\rightarrow R", ("LEFT", "UP", "UP", "RIGHT")),
        ("LUUR", ("LEFT", "UP", "UP", "RIGHT")),
        ("\\text{L, U, U, R}", ("LEFT", "UP", "UP", "RIGHT")),
        ('["L", "U", "U", "R"]', ("LEFT", "UP", "UP", "RIGHT")),
        ("l;u;u;r.", ("LEFT", "UP", "UP", "RIGHT")),
    ],
)
def test_spellings_parse_to_the_same_moves(content: str, expected: tuple[str, ...]) -> None:
    moves, error = parse_moves(content)
    assert error == ""
    assert moves == expected
    assert score_output(FIG3_SM, f"so \\boxed{{{content}}}").verdict == "success"


def test_stray_words_are_unparseable_not_letters() -> None:
    ex = extract("\\boxed{PLAN: RIGHT}")
    assert ex.status == "unparseable"
    assert "PLAN" in ex.detail
    # Lower-case letter runs are moves (rrd = RRD), other lower-case words are not.
    assert extract("\\boxed{plan}").status == "unparseable"


def test_last_box_wins_and_braces_balance() -> None:
    text = "first \\boxed{DOWN} then \\boxed{\\text{LEFT}, UP, UP, RIGHT}"
    assert last_boxed("a \\boxed{x{y}z} b") == ("x{y}z", 9, 14)
    assert extract(text).moves == ("LEFT", "UP", "UP", "RIGHT")
    assert extract("no box at all").status == "no_answer"
    assert extract("\\boxed{LEFT, UP").status == "no_answer"
    assert extract("\\boxed{  }").status == "no_answer"


def test_frozen_ood_quirks() -> None:
    """The paper's evaluator keeps every U/D/L/R character of the upper-cased last box."""
    assert extract("\\boxed{RIGHT, UP}", "frozen_ood").moves == ("RIGHT", "UP")
    assert extract("\\boxed{PLAN}", "frozen_ood").moves == ("LEFT",)
    assert extract("\\boxed{DOWN}", "frozen_ood").moves == ("DOWN",)
    assert extract("\\boxed{left, up, up, right}", "frozen_ood").moves == ("LEFT", "UP", "UP", "RIGHT")
    # The last box is unclosed: mathruler returns "None" even though an earlier box is complete.
    unclosed = "\\boxed{LEFT, UP, UP, RIGHT} and \\boxed{LEFT"
    assert extract(unclosed, "frozen_ood").moves == ()
    assert not score_output(FIG3_SM, unclosed, compat="frozen_ood").success
    # Our default rejects the stray word; the paper's evaluator reads "L U U R" from it and succeeds.
    quirky = "\\boxed{LEFT, UP, UP, RIGHT (OK)}"
    assert score_output(FIG3_SM, quirky).verdict == "unparseable"
    assert score_output(FIG3_SM, quirky, compat="frozen_ood").success
    # ... and a word with an L in it adds a LEFT move that walks off the goal.
    final = score_output(FIG3_SM, "\\boxed{LEFT, UP, UP, RIGHT (FINAL)}", compat="frozen_ood")
    assert final.moves[-1] == "LEFT" and final.verdict == "passed_goal"


def test_vsp_compat_stops_at_the_goal() -> None:
    ok = score_output(FIG3_SM, "<Output>\nAction plan: L,U,U,R", compat="vsp")
    assert ok.success and ok.optimal
    # gymnasium ends the episode at the goal: what follows, even garbage, does not matter.
    assert score_output(FIG3_SM, "Action plan: L,U,U,R,D,x", compat="vsp").success
    assert not score_output(
        FIG3_SM,
        "Action plan: L,U,U,R,D",
    ).success
    assert score_output(FIG3_SM, "Action Plan: L,U,U,R.", compat="vsp").success
    bad = score_output(FIG3_SM, "Action plan: L,U,X,R", compat="vsp")
    assert bad.verdict == "unparseable" and not bad.success
    assert score_output(FIG3_SM, "Action plan: U", compat="vsp").verdict == "fell_in_hole"
    assert score_output(FIG3_SM, "I would go L,U,U,R", compat="vsp").verdict == "no_answer"


# --------------------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------------------
def test_verdicts_and_facts() -> None:
    r = score_output(FIG3_SM, "\\boxed{UP}")
    assert (r.verdict, r.fell_at, r.success) == ("fell_in_hole", 1, False)
    r = score_output(FIG3_SM, "\\boxed{L, U, U, R, R}")
    assert (r.verdict, r.reached_goal_at) == ("passed_goal", 4)
    r = score_output(FIG3_SM, "\\boxed{L, U}")
    assert r.verdict == "stopped_short"
    assert r.progress == pytest.approx(0.5)  # distance 4 -> 2
    r = score_output(FIG3_SM, "\\boxed{DOWN, L, U, U, R}")
    assert r.verdict == "success" and r.off_edge_moves == 1 and not r.optimal
    r = score_output(FIG3_SM, "\\boxed{L, U, U, R}")
    assert r.optimal and r.progress == 1.0 and r.n_moves == 4
    assert r.moves == ("LEFT", "UP", "UP", "RIGHT")
    assert score_output(FIG3_SM, "\\boxed{L, D}").progress < 0.5


def _random_map(seed: int) -> FrozenLakeMap:
    rng = random.Random(seed)
    while True:
        n = rng.randint(2, 8)
        cells = [(r, c) for r in range(n) for c in range(n)]
        s, g = rng.sample(cells, 2)
        holes = frozenset(x for x in cells if x not in (s, g) and rng.random() < 0.3)
        m = FrozenLakeMap(n, holes, s, g)
        if m.solvable:
            return m


SPELLINGS = {
    "words": lambda ms: ", ".join(ms),
    "lower": lambda ms: " ".join(x.lower() for x in ms),
    "title": lambda ms: ",".join(x.title() for x in ms),
    "letters": lambda ms: ",".join(x[0] for x in ms),
    "compact": lambda ms: "".join(x[0] for x in ms),
    "arrows": lambda ms: " -> ".join(ms),
}


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(sorted(SPELLINGS)))
def test_any_optimal_path_in_any_spelling_succeeds(seed: int, spelling: str) -> None:
    m = _random_map(seed)
    sm = scoring_map(map_record(m, "x", "t"))
    path = m.optimal_path("uniform", random.Random(seed))
    out = score_output(sm, f"The answer is \\boxed{{{SPELLINGS[spelling](path)}}}.")
    assert out.verdict == "success" and out.optimal
    assert score_output(sm, f"\\boxed{{{', '.join(path)}}}", compat="frozen_ood").success


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.sampled_from(["UP", "DOWN", "LEFT", "RIGHT"]), max_size=12))
def test_paths_through_a_hole_fall(seed: int, moves: list[str]) -> None:
    m = _random_map(seed)
    sm = scoring_map(map_record(m, "x", "t"))
    rollout = m.simulate(moves)
    out = score_output(sm, "\\boxed{" + ", ".join(moves) + "}")
    if rollout.fell_at is not None:
        assert out.verdict == "fell_in_hole" and out.fell_at == rollout.fell_at and not out.success
        assert (
            score_output(sm, "\\boxed{" + ",".join(moves) + "}", compat="frozen_ood").verdict
            == "fell_in_hole"
        )
    elif not moves:
        assert out.verdict == "no_answer"
    else:
        assert out.success == rollout.success


# --------------------------------------------------------------------------------------------------------
# Reference data
# --------------------------------------------------------------------------------------------------------
def test_official_training_answers_score_100_percent(mirage_dir: Path) -> None:
    lines = (mirage_dir / "train_direct.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1000
    for mode in (None, "frozen_ood"):
        ok = 0
        for line in lines:
            rec = json.loads(line)
            m = FrozenLakeMap.from_map_desc(rec["map_desc"])
            sm = scoring_map(map_record(m, str(rec["map_id"]), "id-train"))
            r = score_output(sm, rec["text_output"], compat=mode)
            ok += r.success and r.optimal
        assert ok == 1000, mode


def test_vsp_example_answers_score_with_vsp_compat(reference_dir: Path) -> None:
    from lakeshift import formats

    root = reference_dir / "vsp" / "VSP-main" / "maze" / "task-main" / "example"
    answers = sorted(root.glob("level*/answer/*.txt"))
    assert answers
    for ans in answers:
        board = formats.parse((ans.parent.parent / "table" / ans.name).read_text(encoding="utf-8"), "table")
        sm = scoring_map(map_record(board.to_map(), ans.stem, "vsp"))
        text = ans.read_text(encoding="utf-8")
        assert score_output(sm, text, compat="vsp").success, ans
        assert score_output(sm, text).verdict == "no_answer"  # no box: not an answer under our rules


# --------------------------------------------------------------------------------------------------------
# Faithfulness
# --------------------------------------------------------------------------------------------------------
COTS = ("desc", "table", "grid", "table+desc", "grid+desc")


@pytest.mark.parametrize("cot", COTS)
def test_reference_completions_are_successful_and_faithful(cot: str) -> None:
    from lakeshift import traces

    for rec in make_maps("t", (3, 5, 8), 4, seed=3):
        sm = scoring_map(rec)
        text = traces.completion(sm.map, rec["optimal_path"], cot)
        for guess in (cot, None):
            r = score_output(sm, text, cot=guess)
            assert r.verdict == "success"
            assert r.trace.faithful is True, (cot, r)
            assert r.trace.answer_agrees is True
            assert r.trace.steps == len(rec["optimal_path"])
            assert r.trace.divergence_step is None


@pytest.mark.parametrize("cot", ["grid", "grid+desc", "table+desc"])
def test_a_wrong_map_in_the_trace_is_the_divergence(cot: str) -> None:
    from lakeshift import traces

    m = FrozenLakeMap.from_rows(["SFFF", "FHFF", "FFFF", "HFFG"])
    sm = scoring_map(map_record(m, "x", "t"))
    path = m.optimal_path()
    text = traces.completion(m, path, cot)
    # Add a hole in the second written map only.
    hole = "X" if cot.startswith("grid") else "#"
    empty = "." if cot.startswith("grid") else "_"
    blocks = text.split("Grid:" if cot.startswith("grid") else "| | Col 1")
    second = blocks[2]
    assert empty in second
    blocks[2] = second.replace(empty, hole, 1)
    corrupt = ("Grid:" if cot.startswith("grid") else "| | Col 1").join(blocks)
    r = score_output(sm, corrupt, cot=cot)
    assert r.success  # the answer is still right ...
    assert r.trace.divergence_step == 2  # ... but the trace is not faithful from step 2
    assert r.trace.divergence == "holes differ from the map"
    assert r.trace.faithful is False


def test_answer_disagreeing_with_the_trace() -> None:
    from lakeshift import traces

    m = FIG3
    text = traces.completion(m, ["LEFT", "UP", "UP", "RIGHT"], "desc")
    changed = text[: text.rfind("\\boxed{")] + "\\boxed{LEFT, UP, UP}"
    r = score_output(FIG3_SM, changed, cot="desc")
    assert r.trace.answer_agrees is False and r.trace.faithful is False
    assert r.verdict == "stopped_short"


# --------------------------------------------------------------------------------------------------------
# Predictions files and bad input
# --------------------------------------------------------------------------------------------------------
@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, dict]:
    maps_path = write_jsonl(tmp_path / "maps.jsonl", make_maps("id-test", (3, 4), 3))
    return maps_path, load_scoring_maps(maps_path)


def test_bad_prediction_records_warn_with_file_and_line(tmp_path: Path, small: tuple[Path, dict]) -> None:
    _, maps = small
    ids = list(maps)
    lines = [
        json.dumps({"id": ids[0], "output": "\\boxed{UP}"}),
        "{not json",
        json.dumps({"id": "nope", "output": "\\boxed{UP}"}),
        json.dumps({"id": ids[1]}),
        json.dumps({"id": ids[2], "output": "\\boxed{UP}"}),
        json.dumps({"id": ids[2], "output": "\\boxed{DOWN}"}),
        json.dumps({"id": ids[0], "output": "\\boxed{UP}"}),
    ]
    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pf = read_predictions(path, maps)
    text = "\n".join(pf.warnings)
    assert f"{path}, line 2: malformed JSON" in text
    assert f"{path}, line 3: field 'id': 'nope' is not in the maps file" in text
    assert f"{path}, line 4: missing field 'output'" in text
    assert f"{path}, line 6: field 'id': duplicate of line 5 with a different output" in text
    assert f"{path}, line 7: field 'id': duplicate of line 1 (same output, ignored)" in text
    recs = {r.id: r for r in score_predictions(maps, pf)}
    assert len(recs) == len(maps)  # every map is in the denominator
    assert recs[ids[1]].verdict == "no_answer"
    assert recs[ids[2]].verdict == "no_answer"
    assert all(recs[i].verdict == "missing" for i in ids[3:])
    for lineno, bad in ((2, "{not json"), (3, lines[2]), (4, lines[3])):
        strict_path = tmp_path / f"strict{lineno}.jsonl"
        strict_path.write_text("\n" * (lineno - 1) + bad + "\n", encoding="utf-8")  # blank lines count
        with pytest.raises(LakeshiftError, match=f"line {lineno}"):
            read_predictions(strict_path, maps, strict=True)


def test_a_refused_prompt_is_no_answer_with_the_server_s_reason(
    tmp_path: Path, small: tuple[Path, dict]
) -> None:
    _, maps = small
    ids = list(maps)
    path = write_jsonl(
        tmp_path / "preds.jsonl",
        [
            {"id": ids[0], "output": "", "error": "HTTP 400: content_filter"},
            # Text is scored whatever the error says; a blank error is no reason.
            {"id": ids[1], "output": "\\boxed{UP}", "error": "retried once"},
            {"id": ids[2], "output": "", "error": "  "},
            {"id": ids[3], "output": "", "error": ["not", "text"]},
        ],
    )
    pf = read_predictions(path, maps)
    assert any("field 'error' has the wrong type" in w for w in pf.warnings)
    recs = {r.id: r for r in score_predictions(maps, pf)}
    assert (recs[ids[0]].verdict, recs[ids[0]].detail) == (
        "no_answer",
        "the server gave no answer: HTTP 400: content_filter",
    )
    assert recs[ids[1]].verdict != "no_answer"
    assert recs[ids[1]].detail is None or "server" not in recs[ids[1]].detail
    for mid in ids[2:4]:
        assert recs[mid].verdict == "no_answer" and "server" not in (recs[mid].detail or "")


def test_maps_file_errors(tmp_path: Path) -> None:
    with pytest.raises(LakeshiftError, match="no such file"):
        load_scoring_maps(tmp_path / "absent.jsonl")
    rec = make_maps("s", (3,), 1)[0]
    bad = dict(rec, rows=["SFF", "FFF", "FFF"])
    path = write_jsonl(tmp_path / "maps.jsonl", [rec, bad])
    with pytest.raises(LakeshiftError, match="line 2: invalid map"):
        load_scoring_maps(path)
    path = write_jsonl(tmp_path / "dup.jsonl", [rec, rec])
    with pytest.raises(LakeshiftError, match="line 2: duplicate map id"):
        load_scoring_maps(path)


@pytest.mark.parametrize("cot", COTS)
def test_fast_path_agrees_with_the_full_check(cot: str) -> None:
    from lakeshift import traces
    from lakeshift.scoring import check_steps, faithfulness

    for rec in make_maps("f", (4, 6), 3, seed=5):
        sm = scoring_map(rec)
        path = rec["optimal_path"]
        text = traces.completion(sm.map, path, cot)
        for answer in (path, path[:-1], None):
            full = check_steps(sm.map, traces.parse_steps(text, cot, sm.map), cot, answer)
            assert faithfulness(sm.map, text, cot, answer) == full


def test_first_move_optimal_is_partial_credit_for_a_failing_plan() -> None:
    # FIG3: from S at (2,1) UP and RIGHT are holes and DOWN is off the edge: only LEFT starts a shortest path.
    expected = {"L": True, "U": False, "R": False, "D": False}
    for letter, ok in expected.items():
        r = score_output(FIG3_SM, f"\\boxed{{{letter}, U}}")
        assert r.first_move_optimal is ok and not r.success
    assert score_output(FIG3_SM, "\\boxed{}").first_move_optimal is False
