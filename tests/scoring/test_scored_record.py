"""ScoredRecord: the typed scored record reads back every row the scorer writes, key for key and in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_fixtures import make_maps, scored_bytes, write_jsonl

from lakeshift import ScoredRecord as PublicScoredRecord
from lakeshift import traces
from lakeshift.errors import LakeshiftError
from lakeshift.scoring import (
    Prediction,
    PredictionsFile,
    ScoredRecord,
    load_scoring_maps,
    score_output,
    score_predictions,
)


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The golden test's scored rows (five verdicts, every trace CoT, repeated samples), all three modes."""
    out: list[dict] = []
    for compat in (None, "frozen_ood", "vsp"):
        root = tmp_path_factory.mktemp(f"rows-{compat}")
        out += [json.loads(line) for line in scored_bytes(root, compat).decode().splitlines()]
    return out


def test_the_public_api_exports_it() -> None:
    assert PublicScoredRecord is ScoredRecord


def test_every_written_row_reads_back_to_the_same_keys_in_the_same_order(rows: list[dict]) -> None:
    assert {r["verdict"] for r in rows} >= {
        "success",
        "stopped_short",
        "fell_in_hole",
        "no_answer",
        "missing",
    }
    assert any("trace_faithful" in r for r in rows) and any("pass_at_k" in r for r in rows)
    assert any("decoding" not in r and "policy" not in r for r in rows)
    for row in rows:
        rec = ScoredRecord.from_json(row)
        assert list(rec.to_json().items()) == list(row.items())
        assert rec.extra == {}
        assert (rec.trace is not None) == ("trace_faithful" in row)
        assert (rec.samples is not None) == ("pass_at_k" in row)


def test_the_scorers_records_round_trip(tmp_path: Path) -> None:
    recs = make_maps("id-test", (3, 4), 4)
    maps = load_scoring_maps(write_jsonl(tmp_path / "maps.jsonl", recs))
    ids = list(maps)
    best = {r["id"]: list(r["optimal_path"]) for r in recs}

    def boxed(moves: list[str]) -> str:
        return "\\boxed{" + ", ".join(moves) + "}"

    # A plan that reaches the goal and walks on: the optimal one and one more move off the goal (the other
    # of the two maps gets no prediction).
    walk_on = next(
        (mid, best[mid] + [move])
        for mid in (ids[5], ids[7])
        for move in ("UP", "DOWN", "LEFT", "RIGHT")
        if score_output(maps[mid], boxed(best[mid] + [move])).verdict == "passed_goal"
    )
    traced = traces.completion(maps[ids[6]].map, best[ids[6]], "grid")
    preds = {
        ids[0]: Prediction(ids[0], boxed(best[ids[0]]), {"model": "m", "cot_format": "none"}, 1),
        ids[1]: Prediction(ids[1], "no box", {"model": "m", "decoding": {"preset": "frozen_ood"}}, 2),
        ids[2]: Prediction(ids[2], None, {"model": None, "duplicate": True}, 3),
        ids[3]: Prediction(
            ids[3],
            boxed(["UP"]),
            {"policy": "random", "samples": [{"output": boxed(["UP"])}, {"output": boxed(best[ids[3]])}]},
            4,
        ),
        ids[4]: Prediction(ids[4], "\\boxed{PLAN}", {"n_output_tokens": 3}, 5),
        walk_on[0]: Prediction(walk_on[0], boxed(walk_on[1]), {}, 6),
        ids[6]: Prediction(ids[6], traced, {"cot_format": "grid", "input_format": "grid"}, 7),
    }
    scored = list(score_predictions(maps, PredictionsFile(tmp_path / "p.jsonl", preds, [])))
    assert len(scored) == len(maps)
    assert {r.verdict for r in scored} >= {"success", "unparseable", "passed_goal", "no_answer", "missing"}
    for rec in scored:
        row = rec.to_json()
        back = ScoredRecord.from_json(json.loads(json.dumps(row)))
        assert back == rec
        assert list(back.to_json().items()) == list(row.items())
    by_id = {r.id: r for r in scored}
    assert by_id[ids[3]].samples is not None and by_id[ids[3]].samples.pass_at_k is True
    assert by_id[ids[1]].decoding == "frozen_ood"
    assert by_id[ids[6]].trace is not None and by_id[ids[6]].trace.faithful is True
    # A null model stays in the row, in its place, as null.
    row = by_id[ids[2]].to_json()
    assert by_id[ids[2]].model is None and "model" in row and row["model"] is None
    keys = list(row)
    assert keys.index("optimal_length") < keys.index("model") < keys.index("n_output_tokens")


def test_unknown_keys_survive(rows: list[dict]) -> None:
    row = dict(rows[0], note="hand-added", run_seed=3)
    rec = ScoredRecord.from_json(row)
    assert rec.extra == {"note": "hand-added", "run_seed": 3}
    assert list(rec.to_json().items()) == list(row.items())
    middle = {"id": row["id"], "comment": [1, 2], **{k: v for k, v in row.items() if k != "id"}}
    assert ScoredRecord.from_json(middle).to_json() == middle  # every key and value; extras go last


@pytest.mark.parametrize("field", ["id", "verdict", "moves", "size", "compat"])
def test_a_missing_field_is_named(rows: list[dict], field: str) -> None:
    row = {k: v for k, v in rows[0].items() if k != field}
    with pytest.raises(LakeshiftError, match=f"scored.jsonl, line 7: missing field '{field}'"):
        ScoredRecord.from_json(row, "scored.jsonl, line 7")


def test_malformed_rows_are_errors(rows: list[dict]) -> None:
    traced = next(r for r in rows if "trace_faithful" in r)
    with pytest.raises(LakeshiftError, match="missing field 'trace_maps'"):
        ScoredRecord.from_json({k: v for k, v in traced.items() if k != "trace_maps"})
    sampled = next(r for r in rows if "pass_at_k" in r)
    with pytest.raises(LakeshiftError, match="missing field 'maj_at_k'"):
        ScoredRecord.from_json({k: v for k, v in sampled.items() if k != "maj_at_k"})
    with pytest.raises(LakeshiftError, match="field 'moves' is not a list"):
        ScoredRecord.from_json(dict(rows[0], moves="UP"))
    with pytest.raises(LakeshiftError, match="expected a JSON object, got list"):
        ScoredRecord.from_json([rows[0]])  # type: ignore[arg-type]
