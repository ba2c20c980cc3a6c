r"""The ``wave`` CoT: breadth-first distances from the goal, drawn frame by frame as arrows on the map.

Rules:

* Distances are breadth-first from the goal over the cells that are not holes, 4-neighbourhood, nothing off
  the map; the goal is at distance 0. The start of a solvable map has a distance ``D >= 1``, its optimal
  length.
* A cell at distance ``d >= 1`` has an arrow toward a neighbour at distance ``d - 1``, the first in the order
  UP, DOWN, LEFT, RIGHT (:data:`ARROW_ORDER`): ``^``, ``v``, ``<``, ``>`` (:data:`ARROWS`).
* Frame ``k`` (``k = 1 .. D``) is the map in the grid format's syntax (rows of cells separated by two
  spaces, ``.`` ``X`` ``G`` ``P``, :mod:`lakeshift.formats.grid`) in which every cell at distance ``1..k``
  shows its arrow instead of its symbol (the start too, once reached). Each frame is a line ``Wave k:``
  followed by its rows. The trace ends with frame ``D``, the first in which the start holds an arrow.
* The answer ``\boxed{...}`` is the path that follows the arrows from the start: a shortest path. It is the
  answer of every ``wave`` completion, whatever plan :func:`lakeshift.traces.completion` is given (it may
  differ from the map's ``optimal_path``; it is equally short; ``split.json`` counts those records,
  ``wave_answer_differs``).
* Each cell of frame ``k`` depends only on its own cell and its four neighbours in frame ``k - 1`` (frame 0
  being the map) and on the map: a cell that is neither a hole, the goal nor an arrow takes the arrow toward
  the first of its neighbours (in :data:`ARROW_ORDER`) that shows an arrow or the goal; every other cell
  stays as it is.

The map of the paper's Figure 3 (rows ``FGF FHF FSH``)::

    >>> from lakeshift.env import FrozenLakeMap
    >>> print(wave_text(FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])))
    Wave 1:
    >  G  <
    .  X  .
    .  P  X
    Wave 2:
    >  G  <
    ^  X  ^
    .  P  X
    Wave 3:
    >  G  <
    ^  X  ^
    ^  P  X
    Wave 4:
    >  G  <
    ^  X  ^
    ^  <  X
    \boxed{LEFT, UP, UP, RIGHT}
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from lakeshift.env import DELTAS, Cell, FrozenLakeMap
from lakeshift.formats import BoardState, render_state
from lakeshift.formats.grid import SEP
from lakeshift.traces.vocabulary import BOXED, boxed

#: The order in which a cell's neighbours are tried for its arrow.
ARROW_ORDER: tuple[str, ...] = ("UP", "DOWN", "LEFT", "RIGHT")
#: The arrow a cell shows for the move toward its neighbour one step nearer the goal.
ARROWS: dict[str, str] = {"UP": "^", "DOWN": "v", "LEFT": "<", "RIGHT": ">"}
#: The move of each arrow.
ARROW_MOVES: dict[str, str] = {arrow: move for move, arrow in ARROWS.items()}
#: The first line of frame ``k`` is ``WAVE_HEADER.format(k)``.
WAVE_HEADER = "Wave {}:"

_HEADER = re.compile(r"Wave (\d+):")

Frame = tuple[tuple[str, ...], ...]


def goal_distances(m: FrozenLakeMap) -> dict[Cell, int]:
    """Shortest number of moves from every cell that can reach the goal without entering a hole (the
    distances of the wave; the description sentences compare them too)."""
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


def wave_arrows(m: FrozenLakeMap, dist: dict[Cell, int] | None = None) -> dict[Cell, str]:
    """The move of the arrow of every cell at distance ``>= 1`` (``dist``: :func:`goal_distances`)."""
    dist = goal_distances(m) if dist is None else dist
    out = {}
    for cell, d in dist.items():
        if d == 0:
            continue
        for move in ARROW_ORDER:
            nxt = m.step(cell, move)
            if nxt != cell and dist.get(nxt) == d - 1:
                out[cell] = move
                break
    return out


def base_frame(m: FrozenLakeMap) -> Frame:
    """The map as the grid format draws it, the player on the start (frame 0 of the rules), as cells."""
    text = render_state(BoardState(m.size, m.holes, m.start, m.goal), "grid")
    return tuple(tuple(line.split(SEP)) for line in text.splitlines()[1:])


def wave_frames(m: FrozenLakeMap) -> list[Frame]:
    """Frames ``1 .. D`` of the rules (cells as symbols).

    Raises:
        ValueError: the start cannot reach the goal, or is the goal.
    """
    dist = goal_distances(m)
    if m.start not in dist or m.start == m.goal:
        raise ValueError("the wave trace needs a start that reaches the goal in at least one move")
    arrows = wave_arrows(m, dist)
    by_distance: dict[int, list[Cell]] = {}
    for cell, d in dist.items():
        by_distance.setdefault(d, []).append(cell)
    grid = [list(row) for row in base_frame(m)]
    frames = []
    for k in range(1, dist[m.start] + 1):
        for r, c in by_distance.get(k, ()):
            grid[r][c] = ARROWS[arrows[(r, c)]]
        frames.append(tuple(tuple(row) for row in grid))
    return frames


def frame_text(k: int, frame: Frame) -> str:
    """Frame ``k`` as the trace writes it: its ``Wave k:`` line, then its rows."""
    return "\n".join([WAVE_HEADER.format(k), *(SEP.join(row) for row in frame)])


def follow_arrows(m: FrozenLakeMap, frame: Frame) -> list[str] | None:
    """The moves that follow ``frame``'s arrows from the start to the goal; ``None`` when they leave the
    map, meet a cell without an arrow that is not the goal, or go round in a loop."""
    pos, moves = m.start, list[str]()
    for _ in range(m.size * m.size):
        if pos == m.goal:
            return moves
        r, c = pos
        if not (0 <= r < len(frame) and 0 <= c < len(frame[r])):
            return None
        move = ARROW_MOVES.get(frame[r][c])
        if move is None or m.step(pos, move) == pos:  # no arrow, or one pointing off the map
            return None
        pos = m.step(pos, move)
        moves.append(move)
    return moves if pos == m.goal else None


def wave_path(m: FrozenLakeMap) -> list[str]:
    """The answer of the ``wave`` trace: the moves along the last frame's arrows from the start."""
    moves = follow_arrows(m, wave_frames(m)[-1])
    assert moves is not None  # the true arrows lead from every cell at distance d to the goal in d moves
    return moves


def wave_text(m: FrozenLakeMap) -> str:
    r"""The ``wave`` completion of ``m``, ``\boxed{}`` included (the rules: this module's doc)."""
    frames = wave_frames(m)
    moves = follow_arrows(m, frames[-1])
    assert moves is not None
    return "\n".join([*(frame_text(k, f) for k, f in enumerate(frames, start=1)), boxed(moves)])


@dataclass(frozen=True)
class ParsedWave:
    """A ``wave`` trace read back by :func:`parse_wave`.

    Attributes:
        numbers: The number each frame's ``Wave k:`` line gives, in the order written.
        frames: Each frame's rows, a row's cells split on whitespace (not checked against the map).
        texts: Each frame's text as written (its header line and rows).
        errors: ``(frame index, why)``, 0-based, for lines that are neither a frame header nor a row of cells
            (index ``len(frames)`` or more: after the last frame; ``-1``: before the first).
    """

    numbers: tuple[int, ...]
    frames: tuple[Frame, ...]
    texts: tuple[str, ...]
    errors: tuple[tuple[int, str], ...]


def parse_wave(text: str) -> ParsedWave:
    r"""Reads a ``wave`` trace (ours or a model's) back; tolerant, never raises. Everything from the last
    ``\boxed{`` on is ignored; blank lines are skipped."""
    cut = text.rfind(BOXED)
    if cut >= 0:
        text = text[:cut]
    numbers: list[int] = []
    frames: list[list[tuple[str, ...]]] = []
    texts: list[list[str]] = []
    errors: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        head = _HEADER.fullmatch(line)
        if head:
            numbers.append(int(head.group(1)))
            frames.append([])
            texts.append([line])
            continue
        cells = tuple(line.split())
        if not frames:
            errors.append((-1, f"text before the first frame: {line!r}"))
        elif any(len(cell) != 1 for cell in cells):
            errors.append((len(frames) - 1, f"not a row of cells: {line!r}"))
        else:
            frames[-1].append(cells)
            texts[-1].append(raw)
    return ParsedWave(
        tuple(numbers),
        tuple(tuple(f) for f in frames),
        tuple("\n".join(t) for t in texts),
        tuple(errors),
    )
