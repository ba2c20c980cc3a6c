"""CoT faithfulness: a trace's written maps, announced moves, cells, A* lines and wave frames replayed on the
true map."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lakeshift.env import FrozenLakeMap
from lakeshift.traces.vocabulary import BOXED

_TRACE_DEFAULTS: dict[str, Any] = {
    "trace_steps": 0,
    "trace_maps": 0,
    "trace_divergence_step": None,
    "trace_divergence": None,
    "trace_faithful": None,
    "trace_answer_agrees": None,
}


_EXPANSION_LINE = re.compile(r"^\s*\(\d+,\d+\) g\d+ h\d+", re.M)
_COORDS_ONLY = re.compile(r"\s*(?:\(\d+,\d+\)\s*)+")
_WAVE_LINE = re.compile(r"^\s*Wave \d+:\s*$", re.M)


def guess_cot(text: str) -> str | None:
    """Guesses a trace's CoT format from its text (used when predictions do not say)."""
    if _EXPANSION_LINE.search(text):
        return "astar"
    if _WAVE_LINE.search(text):
        return "wave"
    cut = text.rfind(BOXED)
    if cut > 0 and _COORDS_ONLY.fullmatch(text[:cut]):
        return "coords"
    has_desc = "I will move" in text
    if "Grid:" in text:
        return "grid+desc" if has_desc else "grid"
    if "| Row 1 |" in text or "|Row 1|" in text:
        return "table+desc" if has_desc else "table"
    return "desc" if has_desc else None


def faithfulness(
    m: FrozenLakeMap, output: str, cot: str, answer: Sequence[str] | None = None
) -> dict[str, Any]:
    """Checks a CoT trace against the truth.

    Steps come from :func:`lakeshift.traces.parse_steps`. The trace's moves are those it announces
    (``"I will move X"``); in map-only traces (``table``, ``grid``) the move implied by the player's written
    positions. Replaying them on the true map gives the true state after each step; the first step whose
    written map is missing (combined formats), unreadable, or differs from that state (size, holes, goal,
    player), or whose move walks into a hole, is the divergence.

    Args:
        m: The true map.
        output: The raw model output.
        cot: Its CoT format (one of :data:`TRACE_COTS`).
        answer: The extracted final moves, or ``None`` when the answer could not be read.

    Returns:
        ``trace_steps`` (steps found), ``trace_maps`` (written maps), ``trace_divergence_step`` (1-based,
        ``None`` when none), ``trace_divergence`` (reason), ``trace_answer_agrees`` (the answer equals the
        trace's moves; ``None`` without an answer or without moves) and ``trace_faithful`` (steps found, no
        divergence and the answer does not disagree).
    """
    from lakeshift import traces

    if cot in traces.PATH_COTS:
        return check_search_trace(m, output, cot, answer)
    if cot == "wave":
        return check_wave_trace(m, output, answer)
    fast = _matches_reference(m, output, cot, answer)
    if fast is not None:
        return fast
    return check_steps(m, traces.parse_steps(output, cot, m), cot, answer)


_ANNOUNCED = re.compile(r"I will move (UP|DOWN|LEFT|RIGHT)\b")


def _matches_reference(
    m: FrozenLakeMap, output: str, cot: str, answer: Sequence[str] | None
) -> dict[str, Any] | None:
    """Fast path: a trace identical to our reference completion of its own moves is faithful by construction.

    The trace's moves are the announced ones (description formats) or the answer (map-only formats). When
    they form a valid plan and the output's trace part equals :func:`lakeshift.traces.completion`'s, the
    result is known without parsing every map; otherwise ``None`` (the full check runs).
    """
    from lakeshift import traces

    cut = output.rfind(BOXED)
    if cut < 0:
        return None
    body = output[:cut]
    if cot.endswith("desc"):
        moves = _ANNOUNCED.findall(body)
    elif answer:
        moves = list(answer)
    else:
        return None
    if not moves:
        return None
    try:
        ref = traces.completion(m, moves, cot)
    except ValueError:  # not a valid successful plan: the reference cannot be built
        return None
    if ref[: ref.rfind(BOXED)] != body:
        return None
    agrees = None if answer is None else list(answer) == moves
    out = dict(_TRACE_DEFAULTS)
    out.update(
        trace_steps=len(moves),
        trace_maps=len(moves) if cot != "desc" else 0,
        trace_answer_agrees=agrees,
        trace_faithful=agrees is not False,
    )
    return out


def check_steps(
    m: FrozenLakeMap, steps: Sequence[Any], cot: str, answer: Sequence[str] | None
) -> dict[str, Any]:
    """The faithfulness fields for steps already split by :func:`lakeshift.traces.parse_steps`."""
    out = dict(_TRACE_DEFAULTS)
    out["trace_steps"] = len(steps)
    map_fmt = "grid" if cot.startswith("grid") else "table" if cot.startswith("table") else None
    with_desc = cot.endswith("desc")
    moves: list[str] = []
    pos = m.start
    fell = False
    diverged_at: int | None = None
    reason: str | None = None
    n_maps = 0
    for k, step in enumerate(steps, start=1):
        if step.state_text is not None:
            n_maps += 1
        move = step.move
        if move is None and with_desc and map_fmt is None:
            continue  # trailing sentences without an announcement: nothing to check
        if move is not None:
            moves.append(move)
            if not fell:
                pos = m.step(pos, move)
                fell = pos in m.holes
        if diverged_at is not None:
            continue
        why = None
        if map_fmt is not None:
            if step.state_text is None:
                why = step.error or "no map written for this step"
            elif step.state is None:
                why = f"unreadable map ({step.error})"
            else:
                why = _board_mismatch(m, step.state, pos)
            if why is None and with_desc and move is None:
                why = "a map without an announced move"
        if why is None and fell:
            why = "the trace walks into a hole"
        if why is not None:
            diverged_at, reason = k, why
    out["trace_maps"] = n_maps
    out["trace_divergence_step"] = diverged_at
    out["trace_divergence"] = reason
    if answer is not None and moves:
        out["trace_answer_agrees"] = list(answer) == moves
    out["trace_faithful"] = bool(steps) and diverged_at is None and out["trace_answer_agrees"] is not False
    return out


def check_search_trace(
    m: FrozenLakeMap, output: str, cot: str, answer: Sequence[str] | None
) -> dict[str, Any]:
    """Faithfulness of a path CoT (``astar`` or ``coords``); the fields of :func:`faithfulness`.

    ``coords``: step ``k`` is the ``k``-th cell after the first; the trace diverges at the first cell that is
    outside the map, not adjacent to the previous one, a hole, or (for the first one) not the start, or at
    the last one when it is not the goal. ``astar``: steps ``1..E`` are the expansion lines, compared with
    :func:`lakeshift.traces.astar_search` (same cell, g, h and neighbour marks, in the same order; a missing,
    extra or malformed line diverges), then one step per read-back cell after the goal: each must be a
    neighbour of the previous one that the true search reached with g one lower, ending at the start. The
    trace's moves are those of the path it writes (``coords``) or reads back (``astar``).
    """
    from lakeshift import traces

    out = dict(_TRACE_DEFAULTS)
    why: str | None = None
    at: int | None = None
    offset = 0
    if cot == "astar":
        parsed = traces.parse_search(output)
        run = traces.astar_search(m, traces.search_order(parsed))  # the neighbour order the trace uses
        true = run.expansions
        offset = len(parsed.expansions)
        # A malformed line diverges where it stands: after the expansion lines above it.
        err_line, err = min(parsed.errors, default=(None, None))
        usable = offset if err_line is None else sum(1 for n in parsed.lines if n < err_line)
        for k in range(usable):
            if k >= len(true):
                at, why = k + 1, "an expansion after the goal's"
            elif parsed.expansions[k] != true[k]:
                at, why = k + 1, f"writes {parsed.expansions[k].text()!r}, A* gives {true[k].text()!r}"
            if why is not None:
                break
        if why is None and err is not None:
            at, why = usable + 1, err
        elif why is None and usable < len(true):
            at, why = usable + 1, f"the search stops before expanding {traces.cell_text(true[usable].cell)}"
        written = list(parsed.path or ())  # goal first, as read back
        cells = written[::-1]
        if why is None and not written:
            at, why = offset + 1, "no read-back path"
        if why is None:
            if written[0] != m.goal:
                at, why = offset + 1, "the read-back does not begin at the goal"
            for j in range(1, len(written)):
                if why is not None:
                    break
                cell, prev = written[j], written[j - 1]
                if abs(cell[0] - prev[0]) + abs(cell[1] - prev[1]) != 1:
                    why = f"{traces.cell_text(cell)} is not adjacent to {traces.cell_text(prev)}"
                elif run.g.get(cell) != run.g.get(prev, -9) - 1:
                    why = f"{traces.cell_text(cell)} was not reached with g {run.g.get(prev, -9) - 1}"
                at = offset + j if why is not None else at
            if why is None and written[-1] != m.start:
                at, why = offset + len(written) - 1, "the read-back does not end at the start"
        out["trace_steps"] = offset + max(len(cells) - 1, 0)
    else:
        cells = traces.parse_cells(output)
        out["trace_steps"] = max(len(cells) - 1, 0)
        if not cells:
            at, why = 1, "no cells written"
        elif cells[0] != m.start:
            at, why = 1, f"the path begins at {traces.cell_text(cells[0])}, not at the start"
        for k in range(1, len(cells)):
            if why is not None:
                break
            cell, prev = cells[k], cells[k - 1]
            if not m.inside(cell):
                why = f"{traces.cell_text(cell)} is outside the map"
            elif abs(cell[0] - prev[0]) + abs(cell[1] - prev[1]) != 1:
                why = f"{traces.cell_text(cell)} is not adjacent to {traces.cell_text(prev)}"
            elif cell in m.holes:
                why = f"{traces.cell_text(cell)} is a hole"
            at = k if why is not None else at
        if why is None and cells and cells[-1] != m.goal:
            at, why = max(len(cells) - 1, 1), "the path does not end at the goal"
    moves = traces.moves_between(cells)
    out["trace_divergence_step"] = at if why is not None else None
    out["trace_divergence"] = why
    if answer is not None and moves and all(mv is not None for mv in moves):
        out["trace_answer_agrees"] = list(answer) == moves
    out["trace_faithful"] = out["trace_steps"] > 0 and why is None and out["trace_answer_agrees"] is not False
    return out


def check_wave_trace(m: FrozenLakeMap, output: str, answer: Sequence[str] | None) -> dict[str, Any]:
    """Faithfulness of a ``wave`` trace; the fields of :func:`faithfulness`.

    Step ``k`` is the ``k``-th frame written, compared with the true frame ``k``
    (:func:`lakeshift.traces.wave_frames`): the trace diverges at the first frame whose ``Wave k:`` line
    gives another number, that has a line which is not a row of cells, whose size differs from the map's or
    one of whose cells differs from the truth, or that comes after the frame in which the start holds its
    arrow; a trace that stops before that frame diverges at the frame it leaves out. The trace's moves are
    those that follow the last written frame's arrows from the start to the goal; when they do not reach it,
    the answer disagrees with the trace.
    """
    from lakeshift import traces

    out = dict(_TRACE_DEFAULTS)
    parsed = traces.parse_wave(output)
    try:
        true = traces.wave_frames(m)
    except ValueError:  # a map without a start-goal path has no wave to write: every frame diverges
        true = []
    wrote = len(parsed.frames)
    errors = {k: err for k, err in reversed(parsed.errors)}
    at: int | None = None
    why: str | None = None
    if -1 in errors:
        at, why = 1, errors[-1]
    for k in range(wrote):
        if why is not None:
            break
        frame = parsed.frames[k]
        at = k + 1
        if parsed.numbers[k] != k + 1:
            why = f"frame {k + 1} is numbered {parsed.numbers[k]}"
        elif k in errors:
            why = errors[k]
        elif k >= len(true):
            why = f"a frame after frame {len(true)}, in which the start holds its arrow"
        elif len(frame) != m.size or any(len(row) != m.size for row in frame):
            why = f"written frame is not {m.size}x{m.size}"
        else:
            wrong = next(
                ((r, c) for r in range(m.size) for c in range(m.size) if frame[r][c] != true[k][r][c]), None
            )
            if wrong is not None:
                r, c = wrong
                why = f"{traces.cell_text(wrong)} writes {frame[r][c]!r}, the wave gives {true[k][r][c]!r}"
    if why is None and wrote < len(true):
        at, why = wrote + 1, f"the trace stops before frame {len(true)}, in which the start holds its arrow"
    out["trace_steps"] = wrote
    out["trace_maps"] = wrote
    out["trace_divergence_step"] = at if why is not None else None
    out["trace_divergence"] = why
    if answer is not None and wrote:
        out["trace_answer_agrees"] = traces.follow_arrows(m, parsed.frames[-1]) == list(answer)
    out["trace_faithful"] = wrote > 0 and why is None and out["trace_answer_agrees"] is not False
    return out


def _board_mismatch(m: FrozenLakeMap, board: Any, player: tuple[int, int]) -> str | None:
    if board.size != m.size:
        return f"written map is {board.size}x{board.size}, the map is {m.size}x{m.size}"
    if board.holes != m.holes:
        return "holes differ from the map"
    if board.player != player:
        return "player position differs from the true state"
    if board.goal != (None if player == m.goal else m.goal):
        return "goal differs from the map"
    return None
