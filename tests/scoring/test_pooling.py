"""Scores and reports refuse, or say, what cannot be pooled into one number: one run's predictions twice,
answers of two decodings, rows of another split, a file that answers none of the maps (or is a maps file),
and pass@k / maj@k over fewer samples than the rows asked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_checks import one_error_line, quiet_main
from suite_fixtures import make_maps, write_jsonl

from lakeshift.cli import main


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write_jsonl(data / "id-test" / "maps.jsonl", make_maps("id-test", (3, 4), 4))
    write_jsonl(data / "ood-size" / "maps.jsonl", make_maps("ood-size", (7,), 4))
    return data


def answers(data: Path, split: str, **meta: object) -> list[dict]:
    rows = []
    for line in (data / split / "maps.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out = "\\boxed{" + ", ".join(rec["optimal_path"]) + "}"
        rows.append({"id": rec["id"], "output": out, "model": "m", "split": split, **meta})
    return rows


def test_report_refuses_one_runs_predictions_given_twice(tmp_path: Path, suite: Path) -> None:
    runs = tmp_path / "runs"
    first = write_jsonl(runs / "a" / "id-test.jsonl", answers(suite, "id-test"))
    copy = runs / "b" / "id-test.jsonl"
    copy.parent.mkdir()
    shutil.copy(first, copy)
    code, err = quiet_main(["report", runs, "--out", tmp_path / "rep", "--data", suite, "--no-baselines"])
    line = one_error_line(code, err, str(first), str(copy), "twice")
    assert "id-test" in line
    assert not (tmp_path / "rep" / "report.html").exists()


def test_score_and_report_refuse_shards_of_two_decodings(tmp_path: Path, suite: Path) -> None:
    rows = answers(suite, "id-test")
    greedy = {"greedy": True, "max_new_tokens": 64}
    sampled = {"preset": "frozen_ood", "greedy": False, "temperature": 0.01}
    shard = lambda i: {"index": i, "count": 2}  # noqa: E731
    runs = tmp_path / "runs" / "m"
    a = write_jsonl(
        runs / "id-test.shard-1-of-2.jsonl", [dict(r, decoding=greedy, shard=shard(1)) for r in rows[::2]]
    )
    b = write_jsonl(
        runs / "id-test.shard-2-of-2.jsonl", [dict(r, decoding=sampled, shard=shard(2)) for r in rows[1::2]]
    )
    maps = suite / "id-test" / "maps.jsonl"
    code, err = quiet_main(["score", "--maps", maps, "--predictions", a, b])
    one_error_line(code, err, "mix decodings", "greedy", "frozen_ood", str(b))
    code, err = quiet_main(["report", tmp_path / "runs", "--out", tmp_path / "rep", "--data", suite])
    one_error_line(code, err, "mix decodings")


def test_score_refuses_rows_of_another_split(tmp_path: Path, suite: Path) -> None:
    rows = [dict(r, split="ood-size") for r in answers(suite, "id-test")]
    preds = write_jsonl(tmp_path / "p.jsonl", rows)
    code, err = quiet_main(["score", "--maps", suite / "id-test" / "maps.jsonl", "--predictions", preds])
    one_error_line(code, err, f"{preds}, line 1", "field 'split'", "'ood-size'", "'id-test'")


def test_score_refuses_predictions_that_answer_none_of_the_maps(tmp_path: Path, suite: Path) -> None:
    preds = write_jsonl(tmp_path / "ood-size.jsonl", answers(suite, "ood-size"))
    maps = suite / "id-test" / "maps.jsonl"
    code, err = quiet_main(["score", "--maps", maps, "--predictions", preds])
    one_error_line(code, err, str(preds), "none of its 4 ids", str(maps))
    # A maps file given as predictions has every id and no output.
    code, err = quiet_main(["score", "--maps", maps, "--predictions", maps])
    one_error_line(code, err, "no row has an 'output' field", "maps file")


def test_pass_and_maj_at_k_over_fewer_samples_than_asked_are_flagged(
    tmp_path: Path, suite: Path, capsys: pytest.CaptureFixture
) -> None:
    sampled = {"preset": "frozen_ood", "greedy": False, "temperature": 0.01}
    rows = answers(suite, "id-test", decoding=sampled, n_samples=3)
    for r in rows:
        r["samples"] = [{"output": r["output"]}, {"output": "\\boxed{}"}, {"output": "\\boxed{}"}]
    rows[0]["samples"] = rows[0]["samples"][:1]
    preds = write_jsonl(tmp_path / "p.jsonl", rows)
    out = tmp_path / "scored.jsonl"
    maps = suite / "id-test" / "maps.jsonl"
    assert main(["score", "--maps", str(maps), "--predictions", str(preds), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "warning: 1 maps hold fewer samples than asked (k = 3)" in printed
    scored = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r.get("n_samples_asked") for r in scored] == [3] + [None] * (len(scored) - 1)
    assert scored[0]["n_samples"] == 1
    runs = tmp_path / "runs"
    write_jsonl(runs / "m" / "id-test.jsonl", rows)
    assert main(["report", str(runs), "--out", str(tmp_path / "rep"), "--data", str(suite)]) == 0
    warnings = (tmp_path / "rep" / "warnings.txt").read_text()
    assert "1 maps hold fewer samples than asked (k = 3)" in warnings
