r"""Chain-of-thought completions (the assistant's answer) in every CoT format, and a tolerant reader for them.

Formats (:data:`COT_FORMATS`) and layout of :func:`completion` (blocks joined by one newline, no blank lines):

* ``none``: only the answer ``\boxed{LEFT, UP}`` (upper-case move names, ``", "`` separated, like Mirage).
* ``desc``: ``This is a NxN map.``, then one line per move with that step's sentences, then the answer.
* ``table`` / ``grid``: the map after each move (:func:`lakeshift.formats.render` with the player moved;
  the start cell shows as empty once the player left it), then the answer.
* ``table+desc`` / ``grid+desc``: ``This is a NxN map.``, then per move its sentence line followed by the map
  after that move, then the answer.

Description sentences (paper, Appendix A and Figure 3). For the player at ``p`` and the next move ``m`` of the
path, the *direct* directions are those that reduce the row or the column distance to the goal, vertical
first. A step line is:

1. ``The direct path to the goal is moving UP.`` or ``... moving UP or RIGHT.``
2. for each direct direction ``d != m`` that is a hole: ``However, there is a hole RIGHT, so I cannot move
   RIGHT.`` (also when ``m`` is itself direct: Figure 3, step 3);
3. if ``m`` is direct: ``Thus, I will move UP.``. A safe direct direction that the path does not take is not
   discussed in that case (Figure 3, step 2 leaves out RIGHT, which is safe but longer).
4. if ``m`` is not direct, every direct direction ``d`` gets a reason first: the hole sentence, or for a safe
   ``d`` (cases the figure does not show; our wording, always a true statement about the map's shortest
   distances to the goal): ``However, moving UP leads to a longer path, so I will not move UP.`` (the
   distance from there is not smaller than from here), ``Moving UP is safe, but moving LEFT is just as
   short.`` (a tie between shortest paths that the ``priority`` or ``uniform`` tie-break can resolve away
   from the goal; the default ``direct`` one never does),
   or, for a path that is not a shortest one, ``Moving UP is shorter, but I will move LEFT.``. Then ``As the
   direct path is blocked, I will move LEFT instead.`` when every direct direction is a hole (Figure 3,
   step 1), else ``Thus, I will move LEFT instead.``

The move announced is always the path's next move, so the trace follows the answer whatever the path (it must
be a successful plan: no hole, no off-edge move, the goal reached only by the last move).

:func:`parse_steps` splits a completion (or a model's output) back into :class:`TraceStep` objects for
faithfulness checks; it never raises on malformed text, it records errors per step.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lakeshift.env import DELTAS, LETTER_MOVES, Cell, FrozenLakeMap
from lakeshift.formats import BoardState, FormatError, parse, render_state

COT_FORMATS: tuple[str, ...] = ("none", "desc", "table", "grid", "table+desc", "grid+desc")

_MAP_FORMAT: dict[str, str | None] = {
    "none": None,
    "desc": None,
    "table": "table",
    "grid": "grid",
    "table+desc": "table",
    "grid+desc": "grid",
}
_ANNOUNCE = re.compile(r"I will move (UP|DOWN|LEFT|RIGHT)\b")
_HEADER = re.compile(r"This is a \d+x\d+ map\.")
_TABLE_HEAD = re.compile(r"\s*\|\s*\|")
_GRID_ROW = re.compile(r"\S(?:[ \t]+\S)*")
_BOXED = "\\boxed{"


def boxed(path: Sequence[str]) -> str:
    r"""The final answer, e.g. ``\boxed{UP, RIGHT}`` (letters ``U D L R`` are accepted and spelled out)."""
    return _BOXED + ", ".join(_normalise(move) for move in path) + "}"


def direct_moves(pos: Cell, goal: Cell) -> list[str]:
    """The moves that reduce the row or column distance from ``pos`` to ``goal``, vertical first."""
    moves = []
    if goal[0] != pos[0]:
        moves.append("UP" if goal[0] < pos[0] else "DOWN")
    if goal[1] != pos[1]:
        moves.append("LEFT" if goal[1] < pos[1] else "RIGHT")
    return moves


def goal_distances(m: FrozenLakeMap) -> dict[Cell, int]:
    """Shortest number of moves from every cell that can reach the goal without entering a hole."""
    dist = {m.goal: 0}
    queue = deque([m.goal])
    while queue:
        cell = queue.popleft()
        for dr, dc in DELTAS.values():
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt not in dist and m.inside(nxt) and nxt not in m.holes:
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
    return dist


Distances = dict[Cell, int]


def step_sentences(
    m: FrozenLakeMap, pos: Cell, move: str, dist: Distances | Callable[[], Distances] | None = None
) -> list[str]:
    """The description sentences for taking ``move`` at ``pos`` (rules in the module docstring).

    Args:
        m: The map.
        pos: The player's cell before the move (not the goal).
        move: The move the path takes.
        dist: :func:`goal_distances` of ``m``, or a function returning it (called only when the move is not
            direct, the only case that needs distances); computed when omitted.
    """
    move = _normalise(move)
    direct = direct_moves(pos, m.goal)
    sentences = [f"The direct path to the goal is moving {' or '.join(direct)}."]
    others = [d for d in direct if d != move]
    if move in direct:
        sentences += [
            f"However, there is a hole {d}, so I cannot move {d}." for d in others if _hole(m, pos, d)
        ]
        sentences.append(f"Thus, I will move {move}.")
        return sentences
    if dist is None:
        dist = goal_distances(m)
    elif callable(dist):
        dist = dist()
    here = dist.get(pos)
    chosen = dist.get(m.step(pos, move))
    for d in others:
        nxt = m.step(pos, d)
        # A safe neighbour of a cell that reaches the goal reaches it too, so ``nxt`` is always in ``dist``.
        if nxt in m.holes:
            sentences.append(f"However, there is a hole {d}, so I cannot move {d}.")
        elif here is not None and dist[nxt] >= here:
            sentences.append(f"However, moving {d} leads to a longer path, so I will not move {d}.")
        elif chosen is not None and dist[nxt] < chosen:
            # The path itself is not a shortest one: say so rather than invent a reason.
            sentences.append(f"Moving {d} is shorter, but I will move {move}.")
        else:
            sentences.append(f"Moving {d} is safe, but moving {move} is just as short.")
    if all(_hole(m, pos, d) for d in direct):
        sentences.append(f"As the direct path is blocked, I will move {move} instead.")
    else:
        sentences.append(f"Thus, I will move {move} instead.")
    return sentences


def completion(m: FrozenLakeMap, path: Sequence[str], cot: str, *, table_style: str | None = None) -> str:
    r"""The assistant text for map ``m`` and plan ``path`` in CoT format ``cot``, ending with ``\boxed{...}``.

    Args:
        m: The map.
        path: A successful plan (full move names or letters), normally the map's optimal path.
        cot: One of :data:`COT_FORMATS`.
        table_style: Table CoTs only: ``"compact"`` (default) or ``"aligned"``.

    Raises:
        ValueError: unknown ``cot``, or a path that falls into a hole, moves off the edge, or does not end on
            the goal (or passes it before the end).
    """
    return completions(m, path, (cot,), table_style=table_style)[cot]


def completions(
    m: FrozenLakeMap,
    path: Sequence[str],
    cots: Sequence[str] = COT_FORMATS,
    *,
    table_style: str | None = None,
) -> dict[str, str]:
    """:func:`completion` for several CoT formats of one map at once, in the order of ``cots``.

    The step sentences and each map format's states are built once and shared (the combined formats reuse
    them), which makes all six formats about as cheap as the three slowest alone.

    Raises:
        ValueError: as :func:`completion`.
    """
    for cot in cots:
        if cot not in COT_FORMATS:
            raise ValueError(f"unknown CoT format {cot!r} (expected one of {', '.join(COT_FORMATS)})")
    moves = [_normalise(move) for move in path]
    answer = boxed(moves)
    if all(cot == "none" for cot in cots):
        return {cot: answer for cot in cots}
    positions = _check_path(m, moves)
    header = f"This is a {m.size}x{m.size} map."
    sentences: list[str] = []
    if any(cot.endswith("desc") for cot in cots):
        dist: dict[Cell, int] = {}

        def distances() -> dict[Cell, int]:
            # BFS only for maps whose trace needs it (a move away from the goal), and at most once.
            if not dist:
                dist.update(goal_distances(m))
            return dist

        sentences = [
            " ".join(step_sentences(m, positions[i], move, distances)) for i, move in enumerate(moves)
        ]
    states: dict[str, list[str]] = {}
    for fmt in dict.fromkeys(_MAP_FORMAT[cot] for cot in cots):
        if fmt is None:
            continue
        style = table_style if fmt == "table" else None
        # Positions come from a successful rollout (inside the map, never a hole): no checks needed.
        states[fmt] = [
            render_state(
                BoardState(m.size, m.holes, pos, None if pos == m.goal else m.goal), fmt, style=style
            )
            for pos in positions[1:]
        ]
    out = {}
    for cot in cots:
        map_fmt = _MAP_FORMAT[cot]
        if cot == "none":
            blocks = [answer]
        elif cot == "desc":
            blocks = [header, *sentences, answer]
        elif map_fmt is not None and cot.endswith("desc"):
            blocks = [header]
            for line, state in zip(sentences, states[map_fmt], strict=True):
                blocks += (line, state)
            blocks.append(answer)
        else:
            blocks = [*states[map_fmt], answer]
        out[cot] = "\n".join(blocks)
    return out


@dataclass(frozen=True)
class TraceStep:
    """One step read back from a CoT text.

    Attributes:
        move: The move this step announces: from its sentences (``"I will move X"``) in description and
            combined formats; in table/grid formats, the move implied by the state change (``state_move``).
        state_text: The map block of this step, as written (``None`` if the step has none).
        state: ``state_text`` parsed, or ``None`` if absent or malformed.
        state_move: The single move that turns the previous state's player cell into this one (the first
            step compares with the map's start when a map is given), ``None`` when not one step or unknown.
        sentences: The step's sentences (``None`` in table/grid formats).
        error: Why the step is incomplete or malformed, or ``None``.
    """

    move: str | None
    state_text: str | None = None
    state: BoardState | None = None
    state_move: str | None = None
    sentences: str | None = None
    error: str | None = None


def parse_steps(text: str, cot: str, m: FrozenLakeMap | None = None) -> list[TraceStep]:
    r"""Splits a CoT completion (ours or a model's) into steps; tolerant, never raises on bad text.

    Everything from the last ``\boxed{`` on is the answer and ignored; a ``This is a NxN map.`` line is
    skipped. In description formats a step ends with the line that says ``I will move X`` (sentences may
    span lines); in combined formats the map block that follows belongs to that step; in table/grid formats
    every map block is a step. Malformed blocks give a step with ``state=None`` and an ``error``; an announced
    move without its map (combined formats) gives a step with ``error="no map after the announced move"``.

    Args:
        text: The assistant text.
        cot: One of :data:`COT_FORMATS` (``"none"`` gives ``[]``).
        m: The map, if known: lets the first step's ``state_move`` be computed from the start.

    Raises:
        ValueError: unknown ``cot`` (a programming error, not bad model output).
    """
    if cot not in COT_FORMATS:
        raise ValueError(f"unknown CoT format {cot!r} (expected one of {', '.join(COT_FORMATS)})")
    if cot == "none":
        return []
    cut = text.rfind(_BOXED)
    if cut >= 0:
        text = text[:cut]
    map_fmt = _MAP_FORMAT[cot]
    with_desc = cot.endswith("desc")
    steps: list[TraceStep] = []
    prev: Cell | None = m.start if m is not None else None
    pending: list[str] = []  # sentence lines not yet closed by an announcement
    announced: tuple[str, str] | None = None  # (move, sentences) waiting for its map (combined formats)

    def flush_announced(error: str) -> None:
        nonlocal announced
        if announced is not None:
            steps.append(TraceStep(announced[0], sentences=announced[1], error=error))
            announced = None

    for kind, chunk in _segments(text):
        if kind == "sentence":
            if not with_desc:
                continue
            pending.append(chunk)
            found = _ANNOUNCE.findall(chunk)
            if not found:
                continue
            sentences = " ".join(pending)
            pending = []
            if map_fmt is None:
                steps.append(TraceStep(found[-1], sentences=sentences))
            else:
                flush_announced("no map after the announced move")
                announced = (found[-1], sentences)
            continue
        # A map block.
        if map_fmt is None or kind != map_fmt:
            continue
        try:
            state: BoardState | None = parse(chunk, map_fmt)
            error = None
        except FormatError as err:
            state, error = None, str(err)
        state_move = _implied_move(prev, state.player) if state is not None else None
        prev = state.player if state is not None else None
        if with_desc:
            if announced is None:
                stray = " ".join(pending) if pending else None
                pending = []
                steps.append(TraceStep(None, chunk, state, state_move, stray, error or "no announced move"))
            else:
                steps.append(TraceStep(announced[0], chunk, state, state_move, announced[1], error))
                announced = None
        else:
            steps.append(TraceStep(state_move, chunk, state, state_move, None, error))
    flush_announced("no map after the announced move")
    if pending and with_desc:
        steps.append(TraceStep(None, sentences=" ".join(pending), error="no announced move"))
    return steps


def _segments(text: str) -> list[tuple[str, str]]:
    """Splits text into ``("table" | "grid" | "sentence", chunk)`` pieces; blank and header lines vanish."""
    lines = text.splitlines()
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|"):
            # A table runs over consecutive "|" lines; a header line (empty first cell) starts the next one.
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("|") and not _TABLE_HEAD.match(lines[j]):
                j += 1
            out.append(("table", "\n".join(lines[i:j])))
            i = j
        elif line == "Grid:":
            j = i + 1
            while j < len(lines) and _is_grid_row(lines[j]):
                j += 1
            out.append(("grid", "\n".join(lines[i:j])))
            i = j
        else:
            if line and not _HEADER.fullmatch(line):
                out.append(("sentence", line))
            i += 1
    return out


def _is_grid_row(line: str) -> bool:
    line = line.strip()
    return bool(line) and _GRID_ROW.fullmatch(line) is not None and all(len(t) == 1 for t in line.split())


def _implied_move(prev: Cell | None, now: Cell) -> str | None:
    if prev is None:
        return None
    delta = (now[0] - prev[0], now[1] - prev[1])
    for move, d in DELTAS.items():
        if d == delta:
            return move
    return None


def _hole(m: FrozenLakeMap, pos: Cell, move: str) -> bool:
    return m.step(pos, move) in m.holes


def _normalise(move: str) -> str:
    move = LETTER_MOVES.get(move, move)
    if move not in DELTAS:
        raise ValueError(f"unknown move {move!r} (expected UP, DOWN, LEFT, RIGHT or U, D, L, R)")
    return move


def _check_path(m: FrozenLakeMap, moves: list[str]) -> list[Cell]:
    """The positions along a successful plan (start first)."""
    rollout = m.simulate(moves)
    if rollout.fell_at is not None:
        raise ValueError(f"the path falls into a hole at move {rollout.fell_at}")
    if rollout.off_edge_moves:
        raise ValueError("the path moves off the edge of the map")
    if not rollout.success or rollout.reached_goal_at != len(moves):
        raise ValueError("the path must end on the goal and reach it only with its last move")
    return list(rollout.positions)
