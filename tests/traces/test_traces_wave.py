"""The ``wave`` CoT: frames of breadth-first arrows from the goal, each cell a local function of the frame
before it; the arrows give a shortest path, the trace parses back, and the scorer catches corrupted frames
and answers that do not follow the arrows."""

from __future__ import annotations

import contextlib
import io
import json
import random
from collections import deque
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lakeshift import scoring, traces
from lakeshift.cli import main
from lakeshift.env import Cell, FrozenLakeMap
from lakeshift.scoring.trace_checks import faithfulness, guess_cot
from tests.cli_checks import quiet_main
from tests.map_strategies import random_maps

CHECKPOINTS = Path(__file__).resolve().parents[2] / "src" / "lakeshift" / "checkpoints"
FIG3 = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
STEPS = {"^": (-1, 0), "v": (1, 0), "<": (0, -1), ">": (0, 1)}
ARROW_FIRST = "^v<>"  # the order a cell tries its neighbours in


def bfs_from_goal(m: FrozenLakeMap) -> dict[Cell, int]:
    """Distances from the goal over non-hole cells, computed here rather than by the module under test."""
    dist = {m.goal: 0}
    queue = deque([m.goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in STEPS.values():
            nxt = (r + dr, c + dc)
            if 0 <= nxt[0] < m.size and 0 <= nxt[1] < m.size and nxt not in m.holes and nxt not in dist:
                dist[nxt] = dist[(r, c)] + 1
                queue.append(nxt)
    return dist


def local_rule(m: FrozenLakeMap, prev: traces.wave.Frame, r: int, c: int) -> str:
    """Cell ``(r, c)`` of the next frame from its own cell and its four neighbours in ``prev``: a cell that
    is no hole, goal or arrow points at the first neighbour (up, down, left, right) showing an arrow or the
    goal."""
    here = prev[r][c]
    if here in "XG" or here in STEPS:
        return here
    for arrow in ARROW_FIRST:
        dr, dc = STEPS[arrow]
        nr, nc = r + dr, c + dc
        if 0 <= nr < m.size and 0 <= nc < m.size and (prev[nr][nc] == "G" or prev[nr][nc] in STEPS):
            return arrow
    return here


def corrupt_cell(frame: traces.wave.Frame, r: int, c: int, symbol: str) -> str:
    rows = [list(row) for row in frame]
    rows[r][c] = symbol
    return "\n".join("  ".join(row) for row in rows)


@settings(max_examples=120, deadline=None)
@given(random_maps(max_size=12, hole_probs=(0.0, 0.1, 0.25, 0.4)))
def test_the_last_frames_arrows_lead_from_the_start_to_the_goal_in_the_optimal_length(
    m: FrozenLakeMap,
) -> None:
    assume(m.start != m.goal)
    frames = traces.wave_frames(m)
    assert len(frames) == m.optimal_length == bfs_from_goal(m)[m.start]
    moves = traces.follow_arrows(m, frames[-1])
    assert moves is not None and len(moves) == m.optimal_length
    assert traces.wave_path(m) == moves
    text = traces.completion(m, m.optimal_path(), "wave")
    assert text.endswith("\n" + traces.boxed(moves))
    verdict = scoring.score_output(m, text, cot="wave")
    assert verdict.success and verdict.optimal and verdict.trace is not None and verdict.trace.faithful
    # the start shows the player in every frame but the last, where it holds its arrow
    sr, sc = m.start
    assert [f[sr][sc] for f in frames[:-1]] == ["P"] * (len(frames) - 1) and frames[-1][sr][sc] in STEPS


@settings(max_examples=120, deadline=None)
@given(random_maps(max_size=12, hole_probs=(0.0, 0.1, 0.25, 0.4)))
def test_frame_k_changes_exactly_the_cells_at_distance_k(m: FrozenLakeMap) -> None:
    dist = bfs_from_goal(m)
    frames = [traces.wave.base_frame(m), *traces.wave_frames(m)]
    for k in range(1, len(frames)):
        changed = {
            (r, c) for r in range(m.size) for c in range(m.size) if frames[k][r][c] != frames[k - 1][r][c]
        }
        assert changed == {cell for cell, d in dist.items() if d == k}
        for r, c in changed:
            arrow = frames[k][r][c]
            dr, dc = STEPS[arrow]
            assert dist.get((r + dr, c + dc)) == k - 1
            # the first neighbour one step nearer the goal, in the order up, down, left, right
            nearer = [a for a in ARROW_FIRST if dist.get((r + STEPS[a][0], c + STEPS[a][1])) == k - 1]
            assert arrow == nearer[0]


@settings(max_examples=120, deadline=None)
@given(random_maps(max_size=12, hole_probs=(0.0, 0.1, 0.25, 0.4)))
def test_each_cell_of_a_frame_is_a_function_of_its_neighbourhood_in_the_frame_before(
    m: FrozenLakeMap,
) -> None:
    frames = [traces.wave.base_frame(m), *traces.wave_frames(m)]
    for k in range(1, len(frames)):
        local = tuple(tuple(local_rule(m, frames[k - 1], r, c) for c in range(m.size)) for r in range(m.size))
        assert local == frames[k], k


@settings(max_examples=120, deadline=None)
@given(random_maps(max_size=12, hole_probs=(0.0, 0.1, 0.25, 0.4)))
def test_a_wave_trace_parses_back_to_its_frames(m: FrozenLakeMap) -> None:
    frames = traces.wave_frames(m)
    text = traces.wave_text(m)
    parsed = traces.parse_wave(text)
    assert parsed.frames == tuple(frames)
    assert parsed.numbers == tuple(range(1, len(frames) + 1))
    assert parsed.errors == ()
    assert "\n".join(parsed.texts) + "\n" + traces.boxed(traces.wave_path(m)) == text
    steps = traces.parse_steps(text, "wave", m)
    assert [s.state_text for s in steps] == list(parsed.texts)
    assert all(s.error is None for s in steps)
    assert guess_cot(text) == "wave"


@settings(max_examples=120, deadline=None)
@given(random_maps(max_size=10, hole_probs=(0.0, 0.1, 0.25, 0.4)), st.integers(0, 2**32))
def test_the_scorer_finds_the_first_corrupted_frame(m: FrozenLakeMap, seed: int) -> None:
    rng = random.Random(seed)
    frames = traces.wave_frames(m)
    answer = traces.wave_path(m)
    k = rng.randrange(len(frames))
    r, c = rng.randrange(m.size), rng.randrange(m.size)
    symbol = rng.choice([s for s in ".XGP^v<>" if s != frames[k][r][c]])
    texts = [traces.wave.frame_text(j + 1, f) for j, f in enumerate(frames)]
    texts[k] = f"Wave {k + 1}:\n" + corrupt_cell(frames[k], r, c, symbol)
    out = faithfulness(m, "\n".join(texts) + "\n" + traces.boxed(answer), "wave", answer)
    assert out["trace_divergence_step"] == k + 1
    assert out["trace_faithful"] is False and traces.cell_text((r, c)) in out["trace_divergence"]


@settings(max_examples=120, deadline=None)
@given(random_maps(max_size=10, hole_probs=(0.0, 0.1, 0.25, 0.4)), st.integers(0, 2**32))
def test_the_scorer_rejects_an_answer_that_does_not_follow_the_arrows(m: FrozenLakeMap, seed: int) -> None:
    text = traces.wave_text(m)
    body = text[: text.rfind("\\boxed{")]
    arrows = traces.wave_path(m)
    good = faithfulness(m, text, "wave", arrows)
    assert good["trace_faithful"] is True and good["trace_answer_agrees"] is True
    assert good["trace_steps"] == good["trace_maps"] == len(arrows)
    # another shortest path, where the map has one, or a path that misses a move
    other = m.optimal_path("uniform", random.Random(seed))
    wrong = other if other != arrows else arrows[:-1]
    out = faithfulness(m, body + traces.boxed(wrong), "wave", wrong)
    assert out["trace_answer_agrees"] is False and out["trace_faithful"] is False
    assert out["trace_divergence_step"] is None  # the frames themselves are right


def test_frames_left_out_added_or_misnumbered_diverge() -> None:
    frames = traces.wave_frames(FIG3)
    texts = [traces.wave.frame_text(k, f) for k, f in enumerate(frames, start=1)]
    answer = ["LEFT", "UP", "UP", "RIGHT"]

    def check(parts: list[str]) -> dict:
        return faithfulness(FIG3, "\n".join([*parts, traces.boxed(answer)]), "wave", answer)

    short = check(texts[:3])
    assert short["trace_divergence_step"] == 4 and "stops before frame 4" in short["trace_divergence"]
    extra = check([*texts, traces.wave.frame_text(5, frames[-1])])
    assert extra["trace_divergence_step"] == 5 and "after frame 4" in extra["trace_divergence"]
    skipped = check([texts[0], texts[2], texts[3]])
    assert skipped["trace_divergence_step"] == 2 and "numbered 3" in skipped["trace_divergence"]
    ragged = check([texts[0], texts[1] + "\nthe start is near", *texts[2:]])
    assert ragged["trace_divergence_step"] == 2 and "not a row of cells" in ragged["trace_divergence"]
    small = check([texts[0], "Wave 2:\n>  G\n^  X", *texts[2:]])
    assert small["trace_divergence_step"] == 2 and "not 3x3" in small["trace_divergence"]
    nothing = faithfulness(FIG3, "\\boxed{LEFT}", "wave", ["LEFT"])
    assert nothing["trace_faithful"] is False and nothing["trace_steps"] == 0


def test_generate_show_stats_and_export_know_the_wave_format(tmp_path: Path) -> None:
    data = tmp_path / "d"
    code, err = quiet_main(["generate", "--suite", "tiny", "--seed", "3", "--no-images", "--inputs", "grid",
                            "--cots", "none,wave", "--out", data])  # fmt: skip
    assert code == 0, err
    split = data / "id-test"
    records = [json.loads(line) for line in (split / "sft" / "grid__wave.jsonl").read_text().splitlines()]
    maps = {rec["id"]: rec for rec in map(json.loads, (split / "maps.jsonl").read_text().splitlines())}
    assert records and len(records) == len(maps)
    differs = 0
    for rec in records:
        m = FrozenLakeMap.from_rows(maps[rec["id"]]["rows"])
        assert rec["cot_format"] == "wave" and rec["messages"][-1]["content"] == traces.wave_text(m)
        differs += traces.wave_path(m) != maps[rec["id"]]["optimal_path"]
    # split.json counts the records whose arrows answer another shortest path than optimal_path
    assert json.loads((split / "split.json").read_text())["wave_answer_differs"] == differs
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        code = main(["show", str(split), "--id", records[0]["id"], "--format", "grid", "--cot", "wave"])
    assert code == 0 and records[0]["messages"][-1]["content"] in shown.getvalue()
    assert quiet_main(["stats", data])[0] == 0
    # the format is asked for, as astar and coords are: a suite made with the default formats has no wave
    default = tmp_path / "default"
    assert quiet_main(["generate", "--suite", "tiny", "--seed", "3", "--no-images", "--out", default])[0] == 0
    assert sorted(p.name for p in (default / "id-test" / "sft").glob("*wave*")) == []
    code, err = quiet_main(["export", split, "--sft", "grid__wave", "--out", tmp_path / "w.parquet"])
    assert code == 0, err and (tmp_path / "w.parquet").stat().st_size > 0


def test_the_structured_tokenizer_writes_a_wave_cell_as_one_token_and_keeps_the_shipped_ids() -> None:
    pytest.importorskip("transformers")
    from lakeshift.models import tokenizer

    tok = tokenizer.build_structured_tokenizer([])
    m = FrozenLakeMap.from_rows(["SFFFFFF", "FHFFHFF", "FFFHFFF", "FFFFFFH", "HFFFFFF", "FFHFFFF", "FFFFFFG"])
    text = traces.wave_text(m)
    ids = tokenizer.encode_checked(tok, text, "wave")
    assert tok.decode(ids) == text
    cells = len(traces.wave_frames(m)) * m.size * m.size
    # per frame: its word, number, colon and newline, then one token per cell and a newline per row
    answer = tok(traces.boxed(traces.wave_path(m)), add_special_tokens=False)["input_ids"]
    assert len(ids) == cells + len(traces.wave_frames(m)) * (4 + m.size) + len(answer)
    shipped = json.loads((CHECKPOINTS / "mini-cells-trace-base" / "tokenizer.json").read_text())["model"][
        "vocab"
    ]
    vocab = tok.get_vocab()
    assert {p: i for p, i in vocab.items() if p in shipped} == {p: shipped[p] for p in vocab if p in shipped}
    assert sorted(vocab[p] for p in tokenizer.LATER_PIECES) == list(
        range(len(vocab) - len(tokenizer.LATER_PIECES), len(vocab))
    )


def test_a_report_names_the_wave_format_and_marks_its_diverging_frame(tmp_path: Path) -> None:
    from suite_fixtures import make_suite, noisy_predictions

    from lakeshift.report.html import step_span

    data = make_suite(tmp_path, per_size=2)
    noisy_predictions(data, tmp_path / "runs", "grid__wave", 1, cot="wave")
    out = tmp_path / "rep"
    argv = ["report", tmp_path / "runs", "--out", out, "--data", data, "--no-baselines", "--examples", "0"]
    assert quiet_main(argv)[0] == 0
    rows = (out / "by_split.csv").read_text()
    assert ",wave," in rows and "| Grid | Wave |" in (out / "table1.md").read_text()
    text = traces.wave_text(FIG3).replace("^  P", ">  P")
    at = faithfulness(FIG3, text, "wave", ["LEFT", "UP", "UP", "RIGHT"])["trace_divergence_step"]
    span = step_span(text, "wave", at)
    assert span is not None and text[span[0] : span[1]].startswith("Wave 3:\n")


def test_arrows_that_leave_the_map_stop_or_loop_give_no_path() -> None:
    def frame(*rows: str) -> traces.wave.Frame:
        return tuple(tuple(row.split()) for row in rows)

    assert traces.follow_arrows(FIG3, frame("> G <", "^ X ^", "^ < X")) == ["LEFT", "UP", "UP", "RIGHT"]
    assert traces.follow_arrows(FIG3, frame("> G <", "^ X ^", ". v X")) is None  # off the map
    assert traces.follow_arrows(FIG3, frame("> G <", ". X ^", "^ < X")) is None  # a cell without an arrow
    assert traces.follow_arrows(FIG3, frame("> G <", "v X ^", "^ < X")) is None  # a loop
    assert traces.follow_arrows(FIG3, frame("> G", "^ X")) is None  # a frame smaller than the map
    answer = ["LEFT", "UP", "UP", "RIGHT"]
    looping = traces.wave_text(FIG3).replace("^  X  ^\n^  <  X", "v  X  ^\n^  <  X")
    out = faithfulness(FIG3, looping, "wave", answer)
    assert out["trace_divergence_step"] == 4 and out["trace_answer_agrees"] is False
