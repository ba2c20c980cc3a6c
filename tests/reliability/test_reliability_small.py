"""The small guarantees, each through the real CLI on real files.

API replies without text are retried, server error bodies never show the key, model names are escaped in
the Markdown and LaTeX tables, report folders are byte-identical for the same inputs, ``--compat vsp`` cuts
episodes at gym's 100 steps, the default parser reads ``\\boxed{{U, R}}`` and lower-case letter runs,
``show`` exits 2 for every bad id and ``baseline --cot bogus`` is a clear error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_fixtures import FakeOpenAI, generate_split
from suite_fixtures import make_suite, map_record, noisy_predictions, write_jsonl

from lakeshift.cli import main
from lakeshift.data.maps import load_maps
from lakeshift.env import FrozenLakeMap
from lakeshift.scoring import VSP_MAX_STEPS, extract, parse_moves

LETTERS = {"UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}


# ----- openai: content null is retried, then recorded empty; error bodies are redacted ----------------------
@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("d")
    generate_split(root, "id-test", sizes=(3,), count=3, seed=4)
    return root


def _answers(data: Path) -> dict[str, str]:
    rows = [json.loads(x) for x in (data / "id-test" / "sft" / "grid__none.jsonl").read_text().splitlines()]
    return {r["messages"][1]["content"]: r["messages"][2]["content"] for r in rows}


class NullContentOpenAI(FakeOpenAI):
    """Replies ``content: null`` (HTTP 200) to the first ``nulls`` requests, then like FakeOpenAI."""

    def __init__(self, answers: dict[str, str], nulls: int) -> None:
        super().__init__(answers, failures=())
        self.nulls = nulls
        handler = self.server.RequestHandlerClass
        original = handler.do_POST
        outer = self

        def do_post(h) -> None:  # type: ignore[no-untyped-def]
            with outer.lock:
                null = outer.nulls > 0
                outer.nulls -= 1
            if not null:
                return original(h)
            h.rfile.read(int(h.headers["Content-Length"]))
            outer.requests.append({"failed": "null"})
            reply = {
                "choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]
            }
            return h._send(200, reply)

        handler.do_POST = do_post


def _predict(data: Path, out: Path, url: str, *extra: str) -> int:
    argv = ["predict", "--backend", "openai", "--model", "fake", "--base-url", url, "--data", str(data)]
    return main([*argv, "--input", "grid", "--out", str(out), "--concurrency", "1", *extra])


def test_a_null_content_reply_is_retried_not_recorded_empty(data: Path, tmp_path: Path) -> None:
    server = NullContentOpenAI(_answers(data), nulls=2)
    out = tmp_path / "p.jsonl"
    try:
        assert _predict(data, out, server.url) == 0
    finally:
        server.close()
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    answers = set(_answers(data).values())
    assert len(rows) == 3 and all(r["output"] in answers and r["output"] for r in rows)
    assert [r["failed"] for r in server.requests[:2]] == ["null", "null"]
    assert len(server.requests) == 5  # 2 null replies retried + 3 answers


def test_null_content_every_time_is_recorded_empty_with_the_reason_and_the_run_goes_on(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = NullContentOpenAI(_answers(data), nulls=10**6)
    out = tmp_path / "p.jsonl"
    try:
        assert _predict(data, out, server.url, "--max-retries", "1", "--limit", "1") == 0
    finally:
        server.close()
    err = capsys.readouterr().err
    assert "recorded as no_answer (no text after 2 tries: the reply has no text (content: null" in err
    assert "Traceback" not in err
    [row] = [json.loads(x) for x in out.read_text().splitlines()]
    assert row["output"] == "" and "content: null" in row["error"]


def test_server_error_bodies_never_show_the_api_key(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-proj-Zq81secretsecret9Xw"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    server = FakeOpenAI(_answers(data), failures=())
    handler = server.server.RequestHandlerClass

    def do_post(h) -> None:  # type: ignore[no-untyped-def]
        h.rfile.read(int(h.headers["Content-Length"]))
        auth = h.headers.get("Authorization")
        masked = key[:8] + "*" * 10 + key[-4:]
        h._send(400, {"error": {"message": f"Incorrect API key provided: {masked}. Sent: {auth}; raw {key}"}})

    handler.do_POST = do_post
    try:
        assert _predict(data, tmp_path / "p.jsonl", server.url, "--limit", "1") == 2
    finally:
        server.close()
    err = capsys.readouterr().err
    assert "HTTP 400" in err and "Incorrect API key provided: [redacted]" in err
    assert key not in err and key[8:-4] not in err and "Zq81" not in err and "9Xw" not in err


# ----- report: escaped model names, byte-identical folders --------------------------------------------------
EVIL = "a|b *x* _y_ \\z{w} ~^&%$#"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("rep")
    data = make_suite(root, per_size=2)
    runs = root / "runs"
    noisy_predictions(data, runs, "grid__none", 1)
    for path in (runs / "grid__none").glob("*.jsonl"):
        rows = [{**json.loads(x), "model": EVIL} for x in path.read_text().splitlines()]
        write_jsonl(path, rows)
    return data, runs


def _report(data: Path, runs: Path, out: Path) -> None:
    argv = ["report", str(runs), "--out", str(out), "--data", str(data), "--examples", "10", "--no-images"]
    assert main(argv) == 0


@pytest.fixture(scope="module")
def report(runs: tuple[Path, Path]) -> Path:
    data, runs_dir = runs
    _report(data, runs_dir, runs_dir.parent / "report-one")
    return runs_dir.parent / "report-one"


@pytest.mark.slow
def test_model_names_are_escaped_in_markdown_and_latex(report: Path) -> None:
    out = report
    md = (out / "table1.md").read_text().splitlines()
    table = [line for line in md if line.startswith("|")]
    header_cells = table[0].count("|")
    for line in table:  # an unescaped | would add a cell to the row
        assert line.replace("\\|", "").count("|") == header_cells, line
    assert any("a\\|b \\*x\\* \\_y\\_ \\\\z{w} ~^&%$#" in line for line in table)
    tex = (out / "table1.tex").read_text()
    expected = "a|b *x* \\_y\\_ \\textbackslash{}z\\{w\\} \\textasciitilde{}\\textasciicircum{}\\&\\%\\$\\#"
    assert expected in tex


@pytest.mark.slow
def test_report_folders_of_the_same_inputs_are_byte_identical(
    runs: tuple[Path, Path], report: Path, tmp_path: Path
) -> None:
    data, runs_dir = runs
    one, two = report, tmp_path / "two"
    _report(data, runs_dir, two)
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert any(p.suffix == ".svg" for p in files)
    assert files == sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
    different = [str(p) for p in files if (one / p).read_bytes() != (two / p).read_bytes()]
    assert different == []
    svg = next(p for p in files if p.suffix == ".svg")
    assert b"<dc:date>" not in (one / svg).read_bytes()


# ----- scoring: vsp's 100-step limit, the default parser ---------------------------------------------------
def _score(tmp_path: Path, m: FrozenLakeMap, output: str, *extra: str) -> dict:
    maps = write_jsonl(tmp_path / "maps.jsonl", [map_record(m, "m-0", "id-test")])
    preds = write_jsonl(tmp_path / "preds.jsonl", [{"id": "m-0", "output": output}])
    scored = tmp_path / "scored.jsonl"
    argv = ["score", "--maps", str(maps), "--predictions", str(preds), "--out", str(scored), *extra]
    assert main(argv) == 0
    return json.loads(scored.read_text().splitlines()[0])


@pytest.mark.parametrize(("wiggles", "success"), [(49, True), (50, False)])
def test_vsp_cuts_the_episode_after_100_moves(tmp_path: Path, wiggles: int, success: bool) -> None:
    m = FrozenLakeMap.from_rows(["SFG", "FFF", "FFF"])
    # 2 * wiggles moves that return to the start, then RIGHT, RIGHT: the goal on move 2 * wiggles + 2.
    plan = ["D", "U"] * wiggles + ["R", "R"]
    vsp = _score(tmp_path, m, "Action plan: " + ", ".join(plan), "--compat", "vsp")
    assert (len(plan) <= VSP_MAX_STEPS) == success
    assert vsp["success"] is success
    if not success:
        assert vsp["verdict"] == "stopped_short" and "100-step episode limit" in vsp["detail"]
    # Our rules and the paper's have no step limit.
    boxed = "\\boxed{" + ", ".join(plan) + "}"
    assert (
        _score(tmp_path, m, boxed)["success"]
        and _score(tmp_path, m, boxed, "--compat", "frozen_ood")["success"]
    )


MOVES = st.lists(st.sampled_from(["UP", "DOWN", "LEFT", "RIGHT"]), min_size=1, max_size=12)


@given(MOVES)
def test_letter_runs_in_any_case_and_double_braces_read_the_same(moves: list[str]) -> None:
    letters = "".join(LETTERS[x] for x in moves)
    spellings = [
        letters,
        letters.lower(),
        ", ".join(letters.lower()),
        ", ".join(letters),
        "{" + ", ".join(letters) + "}",
        "{" + ", ".join(moves) + "}",
    ]
    for content in spellings:
        assert parse_moves(content) == (tuple(moves), ""), content
        ex = extract(f"so the answer is \\boxed{{{content}}}")
        assert ex.status == "ok" and ex.moves == tuple(moves), content


def test_the_cli_scores_double_braces_and_lower_case_runs_as_successes(tmp_path: Path) -> None:
    m = FrozenLakeMap.from_rows(["SFF", "FFF", "FFG"])
    for output in ("\\boxed{{R, R, D, D}}", "\\boxed{rrdd}", "\\boxed{RRDD}", "\\boxed{r, r, d, d}"):
        assert _score(tmp_path, m, output)["verdict"] == "success", output


# ----- show and baseline ------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=30), st.sampled_from(["grid", "desc", "table", "image"]))
def test_show_exits_2_for_every_bad_id(
    data: Path, capsys: pytest.CaptureFixture[str], bad_id: str, fmt: str
) -> None:
    known = {m["id"] for m in load_maps(data / "id-test")}
    if bad_id in known or "\x00" in bad_id:
        return
    capsys.readouterr()
    assert main(["show", str(data / "id-test"), "--id", bad_id, "--format", fmt]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lakeshift show: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_baseline_with_an_unknown_cot_is_one_clear_error(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b.jsonl"
    maps = str(data / "id-test" / "maps.jsonl")
    assert main(["baseline", "--maps", maps, "--policy", "oracle", "--cot", "bogus", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "lakeshift baseline: error: --cot 'bogus': unknown CoT format (expected one of "
        + ", ".join(__import__("lakeshift.traces", fromlist=["COT_FORMATS"]).COT_FORMATS)
        + ")\n"
    )
    assert not out.exists()
