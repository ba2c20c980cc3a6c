"""Wilson intervals and aggregation against independent recounts."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakeshift.report import analysis
from lakeshift.scoring import ScoredRecord


def test_wilson_known_values() -> None:
    lo, hi = analysis.wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = analysis.wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert analysis.wilson(10, 10)[1] == 1.0
    assert analysis.wilson(0, 0) == (0.0, 1.0)


@given(st.integers(0, 500), st.integers(1, 500))
def test_wilson_contains_the_estimate(k: int, n: int) -> None:
    k = min(k, n)
    lo, hi = analysis.wilson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def _records(seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    recs = []
    for model in ("a", "b"):
        for split, sizes in (("id-test", (3, 4, 5, 6)), ("ood-dist", (7, 8))):
            for size in sizes:
                for i in range(rng.randint(1, 30)):
                    ok = rng.random() < 0.5
                    verdict = "success" if ok else rng.choice(["fell_in_hole", "stopped_short", "missing"])
                    recs.append(
                        {
                            "id": f"{split}-{size}-{i}",
                            "model": model,
                            "input_format": "grid",
                            "cot_format": "none",
                            "split": split,
                            "size": size,
                            "d_inf": rng.randint(1, size - 1),
                            "optimal_length": rng.randint(1, 12),
                            "success": ok,
                            "verdict": verdict,
                            "n_output_tokens": None if verdict == "missing" else rng.randint(5, 50),
                            "n_output_chars": None if verdict == "missing" else 100,
                        }
                    )
    return recs


def _typed(recs: list[dict]) -> list[ScoredRecord]:
    """The records as the scorer types them; the fields these tests do not count get neutral values."""
    neutral = {
        "moves": [],
        "n_moves": 0,
        "optimal": False,
        "first_move_optimal": False,
        "off_edge_moves": 0,
        "progress": 0.0,
        "fell_at": None,
        "reached_goal_at": None,
        "final": [0, 0],
        "detail": None,
        "compat": None,
    }
    return [ScoredRecord.from_json({**neutral, **r}) for r in recs]


def test_cells_equal_an_independent_recount() -> None:
    recs = _records()
    cells = analysis.by_fields(_typed(recs), "split", "size")
    for (run, split, size), cell in cells.items():
        mine = [r for r in recs if r["model"] == run[0] and r["split"] == split and r["size"] == size]
        assert cell.n == len(mine)
        assert cell.k == sum(r["success"] for r in mine)
        assert cell.verdicts.get("missing", 0) == sum(r["verdict"] == "missing" for r in mine)
        correct = [r["n_output_tokens"] for r in mine if r["success"]]
        if correct:
            assert cell.mean_correct_length == pytest.approx(sum(correct) / len(correct))
        assert cell.tokens  # every scored output carries a token count; missing ones are skipped
    run = ("a", "grid", "none")
    id_cells = [cells[(run, "id-test", s)] for s in (3, 4, 5, 6)]
    macro = analysis.macro_mean(c.acc for c in id_cells)
    assert macro == pytest.approx(sum(c.k / c.n for c in id_cells) / 4)
    pooled = analysis.pooled(id_cells)
    assert pooled.acc == pytest.approx(sum(c.k for c in id_cells) / sum(c.n for c in id_cells))


def test_lengths_fall_back_to_characters() -> None:
    recs = _records()
    recs[0]["n_output_tokens"] = None
    recs[0]["verdict"] = "success"
    recs[0]["success"] = True
    cells = analysis.by_fields(_typed(recs), "split", "size")
    assert analysis.length_unit(cells.values()) == "chars"


def test_long_rows_and_training_histogram() -> None:
    rows = analysis.long_rows(analysis.by_fields(_typed(_records()), "split", "size"), ["split", "size"])
    assert rows[0]["model"] == "a" and {"n", "k", "acc", "lo", "hi", "fell_in_hole"} <= set(rows[0])
    assert analysis.training_lengths(
        [{"optimal_length": 2}, {"optimal_length": 2}, {"optimal_length": 5}]
    ) == {
        2: 2,
        5: 1,
    }
