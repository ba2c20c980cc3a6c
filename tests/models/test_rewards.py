"""The RL rewards are the scorer's verdicts: hand-made completions, the weights parser, the trl callables."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift import traces
from lakeshift.data.maps import record_from_map
from lakeshift.env import FrozenLakeMap
from lakeshift.errors import LakeshiftError
from lakeshift.models.rewards import REWARDS, parse_rewards, reward_values, trl_reward_funcs
from lakeshift.scoring import score_output, scoring_map

# S . .      optimal: RIGHT RIGHT DOWN DOWN (4 moves); the hole is below-right of the start.
# . X .
# . . G
MAP = FrozenLakeMap.from_rows(["SFF", "FHF", "FFG"])
RECORD = record_from_map(MAP, "m-0", "id-train")
SM = scoring_map(RECORD)
OPT = ["RIGHT", "RIGHT", "DOWN", "DOWN"]


def rewards_of(text: str, cot: str = "none") -> dict[str, float]:
    funcs = trl_reward_funcs(dict.fromkeys(REWARDS, 1.0), cot)
    completion = [{"role": "assistant", "content": text}]
    return {f.__name__: f(completions=[completion], map=[json.dumps(RECORD)])[0] for f in funcs}


def test_optimal_success():
    r = rewards_of("\\boxed{RIGHT, RIGHT, DOWN, DOWN}")
    assert score_output(SM, "\\boxed{RIGHT, RIGHT, DOWN, DOWN}").verdict == "success"
    assert r == {"success": 1.0, "format": 1.0, "progress": 1.0, "optimal": 1.0, "faithful": 0.0}


def test_success_longer_than_optimal_is_not_optimal():
    text = "\\boxed{UP, RIGHT, RIGHT, DOWN, DOWN}"  # UP off the edge: a wasted move
    assert score_output(SM, text).verdict == "success"
    r = rewards_of(text)
    assert r["success"] == 1.0 and r["optimal"] == 0.0 and r["progress"] == 1.0


def test_hole():
    text = "\\boxed{RIGHT, DOWN}"  # (0,1) -> (1,1), the hole
    scored = score_output(SM, text)
    assert scored.verdict == "fell_in_hole"
    r = rewards_of(text)
    assert r["success"] == 0.0 and r["format"] == 1.0 and r["optimal"] == 0.0
    # Partial credit at the last safe cell (0,1): distance 3 of 4 left.
    assert r["progress"] == scored.progress == pytest.approx(0.25)


def test_no_box_and_unparseable():
    for text, verdict in (("RIGHT RIGHT DOWN DOWN", "no_answer"), ("\\boxed{go right}", "unparseable")):
        assert score_output(SM, text).verdict == verdict
        assert rewards_of(text) == {"success": 0, "format": 0, "progress": 0, "optimal": 0, "faithful": 0}


def test_moving_away_has_negative_progress():
    text = "\\boxed{DOWN, DOWN, UP, LEFT}"  # ends at (1,0), 3 moves from the goal of 4
    scored = score_output(SM, text)
    assert rewards_of(text)["progress"] == scored.progress == pytest.approx(0.25)
    assert rewards_of("\\boxed{UP}")["progress"] == 0.0  # off the edge: no closer
    far = FrozenLakeMap.from_rows(["FSF", "FFF", "FFG"])
    sm = scoring_map(record_from_map(far, "m-1", "id-train"))
    assert reward_values(score_output(sm, "\\boxed{LEFT}"), ["progress"])["progress"] < 0


def test_faithful_trace_and_unfaithful_trace():
    good = traces.completion(MAP, OPT, "grid+desc")
    r = rewards_of(good, "grid+desc")
    assert score_output(SM, good, cot="grid+desc").trace.faithful is True
    assert r == {"success": 1.0, "format": 1.0, "progress": 1.0, "optimal": 1.0, "faithful": 1.0}
    # The first written map puts the player on the wrong cell: the answer still solves the map.
    lines = good.split("\n")
    first_grid = lines.index("Grid:") + 1
    lines[first_grid] = "P  .  ."
    bad = "\n".join(lines)
    scored = score_output(SM, bad, cot="grid+desc")
    assert scored.success and scored.trace.faithful is False
    r = rewards_of(bad, "grid+desc")
    assert r["success"] == 1.0 and r["faithful"] == 0.0
    # A trace whose answer disagrees with the moves it announced is unfaithful too.
    disagree = good.replace("\\boxed{RIGHT, RIGHT, DOWN, DOWN}", "\\boxed{DOWN, DOWN, RIGHT, RIGHT}")
    assert score_output(SM, disagree, cot="grid+desc").trace.answer_agrees is False
    assert rewards_of(disagree, "grid+desc")["faithful"] == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["UP", "DOWN", "LEFT", "RIGHT", "U", "x"]), max_size=7), st.booleans())
def test_rewards_equal_the_scorer_on_any_answer(moves, boxed):
    text = ("\\boxed{" + ", ".join(moves) + "}") if boxed else " ".join(moves)
    scored = score_output(SM, text, cot="none")
    r = rewards_of(text)
    assert r["success"] == float(scored.success)
    assert r["format"] == float(scored.verdict not in ("no_answer", "unparseable"))
    assert r["progress"] == scored.progress
    assert r["optimal"] == float(scored.success and scored.optimal)


def test_success_rate_is_logged_by_the_first_function_only():
    logged: list[tuple[str, float]] = []
    funcs = trl_reward_funcs({"format": 1.0, "progress": 0.5}, "none")
    texts = ["\\boxed{RIGHT, RIGHT, DOWN, DOWN}", "\\boxed{RIGHT, DOWN}", "nothing", "\\boxed{R,R,D,D}"]
    kwargs = {"map": [json.dumps(RECORD)] * 4, "map_id": ["m-0"] * 4}
    kwargs["log_metric"] = lambda *a: logged.append(a)
    assert funcs[0](prompts=None, completions=texts, **kwargs) == [1.0, 1.0, 0.0, 1.0]
    assert funcs[1](prompts=None, completions=texts, **kwargs) == [1.0, 0.25, 0.0, 1.0]
    assert logged == [("success_rate", 0.5)]
    with pytest.raises(LakeshiftError, match="no 'map' column"):
        funcs[0](completions=texts)


def test_parse_rewards():
    assert parse_rewards("success,format,progress") == {"success": 1.0, "format": 1.0, "progress": 1.0}
    assert parse_rewards("success=1, progress=0.5") == {"success": 1.0, "progress": 0.5}
    assert list(parse_rewards("progress=2,success")) == ["progress", "success"]
    assert parse_rewards("faithful", cot="grid+desc") == {"faithful": 1.0}
    for bad, match in (
        ("succes", "unknown reward 'succes'"),
        ("success=high", "not a number: 'high'"),
        ("success=nan", "is not finite"),
        ("success,success=2", "given twice"),
        ("", "no reward named"),
        ("success=0", "every weight is 0"),
    ):
        with pytest.raises(LakeshiftError, match=match):
            parse_rewards(bad)
    with pytest.raises(LakeshiftError, match="'faithful' needs a CoT format"):
        parse_rewards("success,faithful", cot="none")


def test_rewards_module_imports_no_ml_library():
    import subprocess
    import sys

    heavy = "('torch', 'numpy', 'transformers', 'trl')"
    code = f"import sys, lakeshift.models.rewards; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
