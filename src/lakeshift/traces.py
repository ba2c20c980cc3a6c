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

``astar`` and ``coords`` (path CoTs, :data:`PATH_COTS`; coordinates 1-based ``(row,column)`` as the text
formats write them, no spaces inside):

* ``coords``: the cells visited, start to goal, on one line separated by spaces, then the answer::

      (3,2) (3,1) (2,1) (1,1) (1,2)
      \boxed{LEFT, UP, UP, RIGHT}

  (Du et al., arXiv 2511.22586, find a minimal coordinate path generalizes best across maze sizes.)
* ``astar``: the trace of A* search from the start (:func:`astar_search`; f = g + h, g the moves from the
  start, h the Manhattan distance to the goal, admissible and consistent here). One line per expansion, in
  expansion order: the cell, its g and h, and its four neighbours, each as its move letter and what happened
  to it: ``+`` added to the open list (new, or with a smaller g than before), ``H`` a hole, ``W`` a wall
  (off the map), ``C`` already closed (expanded), ``O`` already open with a g that is not larger. The
  goal's expansion ends the search and reads ``... h0 goal``. Then ``path:`` and the path read back from the
  goal to the start, then the answer::

      (3,2) g0 h2: UH L+ RH DW
      (3,1) g1 h3: U+ LW RC DW
      (2,1) g2 h2: U+ LW RH DC
      (1,1) g3 h1: UW LW R+ DC
      (1,2) g4 h0 goal
      path: (1,2) (1,1) (2,1) (3,1) (3,2)
      \boxed{LEFT, UP, UP, RIGHT}

  (the map of the paper's Figure 3: rows ``FGF FHF FSH``).

  Tie-break: the open cell with the lowest f, then the lowest h (i.e. the highest g: the search dives
  towards the goal), then the one added first. Neighbours join the open list in the trace's *neighbour
  order*, the order its lines list them in (the same on every line; the scorer reads it from the first
  line): ``U L R D`` (:data:`SEARCH_ORDER`) unless the plan needs another one, see below.

  Read-back: from the goal to a neighbour whose g is one lower, down to the start (g 0), through cells the
  search reached (expanded or added; a cell's g is its last, lowest one). Every such chain is a shortest path:
  its length is the goal's g, which A* finds optimal. The reference trace of a plan (normally the map's
  ``optimal_path``) reads back that plan, with the first order of :data:`SEARCH_ORDERS` (``U L R D``, then its
  images under the square's 7 other symmetries, then the other 16) whose search reached all of the plan's
  cells with matching g. The search of a rotated or reflected map with the rotated or reflected order is the
  rotated or reflected search, so a plan that the ``U L R D`` search reaches keeps being read back under the 8
  symmetries (:mod:`lakeshift.augment`). When no order reaches the plan, the trace is the ``U L R D`` search
  and its read-back is A*'s own parent chain (each cell's parent: the expansion that gave it its g), an
  optimal path too, which the answer then follows instead of the plan; this is rare (benchmarks/README.md,
  "Notes on the numbers"), and ``split.json`` counts it (``astar_answer_differs``).

  The second version of the paper (OpenReview LAzMmAeHyJ) reports an A*-step CoT but does not publish its
  text: this format is our own design, kept short (the small models' tokenizer has one token per character).

The move announced is always the path's next move, so the trace follows the answer whatever the path (it must
be a successful plan: no hole, no off-edge move, the goal reached only by the last move).

:func:`parse_steps` splits a completion (or a model's output) back into :class:`TraceStep` objects for
faithfulness checks; it never raises on malformed text, it records errors per step.
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise, permutations

from lakeshift.env import DELTAS, LETTER_MOVES, Cell, FrozenLakeMap
from lakeshift.formats import BoardState, FormatError, parse, render_state

COT_FORMATS: tuple[str, ...] = ("none", "desc", "table", "grid", "table+desc", "grid+desc", "astar", "coords")
#: CoT formats that write no map: a search trace (``astar``) or a list of cells (``coords``).
PATH_COTS: tuple[str, ...] = ("astar", "coords")

_MAP_FORMAT: dict[str, str | None] = {
    "none": None,
    "desc": None,
    "table": "table",
    "grid": "grid",
    "table+desc": "table",
    "grid+desc": "grid",
    "astar": None,
    "coords": None,
}
_ANNOUNCE = re.compile(r"I will move (UP|DOWN|LEFT|RIGHT)\b")
_HEADER = re.compile(r"This is a \d+x\d+ map\.")
_TABLE_HEAD = re.compile(r"\s*\|\s*\|")
_GRID_ROW = re.compile(r"\S(?:[ \t]+\S)*")
_BOXED = "\\boxed{"
#: Neighbour order of an A* expansion line (and the order neighbours join the open list).
SEARCH_ORDER: tuple[str, ...] = ("UP", "LEFT", "RIGHT", "DOWN")


def _search_orders() -> tuple[tuple[str, ...], ...]:
    """The 24 neighbour orders a reference ``astar`` trace may use, most preferred first (module docstring):
    ``U L R D``, then its images under the square's other 7 symmetries, then the rest, lexicographically."""
    rot = {"UP": "RIGHT", "RIGHT": "DOWN", "DOWN": "LEFT", "LEFT": "UP"}  # a quarter turn clockwise
    flip = {"UP": "UP", "DOWN": "DOWN", "LEFT": "RIGHT", "RIGHT": "LEFT"}
    images = []
    for flipped in (False, True):
        order = tuple(flip[mv] for mv in SEARCH_ORDER) if flipped else SEARCH_ORDER
        for _ in range(4):
            images.append(order)
            order = tuple(rot[mv] for mv in order)
    first = list(dict.fromkeys(images))
    return tuple(first + [o for o in permutations(SEARCH_ORDER) if o not in first])


#: Neighbour orders of reference ``astar`` traces, in order of preference.
SEARCH_ORDERS: tuple[tuple[str, ...], ...] = _search_orders()
_CELL = re.compile(r"\((\d+),(\d+)\)")
_EXPANSION = re.compile(r"\((\d+),(\d+)\) g(\d+) h(\d+)(?:: ?(.*)| goal)")
_NEIGHBOUR = re.compile(r"([ULRD])([+HWCO])")


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
    m: FrozenLakeMap,
    pos: Cell,
    move: str,
    dist: Distances | Callable[[], Distances] | None = None,
    *,
    facts_only: bool = False,
) -> list[str]:
    """The description sentences for taking ``move`` at ``pos`` (rules in the module docstring).

    Args:
        m: The map.
        pos: The player's cell before the move (not the goal).
        move: The move the path takes.
        dist: :func:`goal_distances` of ``m``, or a function returning it (called only when the move is not
            direct, the only case that needs distances); computed when omitted.
        facts_only: leave out the sentences that compare shortest distances to the goal (``leads to a
            longer path``, ``is just as short``, ``is shorter``): a safe direct direction the move does not
            take then gets no sentence. What remains states the map's geometry and holes only, never which
            move is better (the narration of a random walk, :func:`walk_completions`).
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
    if facts_only:
        dist = {}
    elif dist is None:
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
        elif facts_only:
            continue
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
    _check_cots(cots)
    moves = [_normalise(move) for move in path]
    if all(cot == "none" for cot in cots):
        return {cot: boxed(moves) for cot in cots}
    return _traces(m, moves, _check_path(m, moves), cots, table_style, facts_only=False)


def walk_completions(
    m: FrozenLakeMap,
    walk: Sequence[str],
    cots: Sequence[str] = COT_FORMATS,
    *,
    table_style: str | None = None,
) -> dict[str, str]:
    r"""The assistant text of each CoT format for a *walk* in place of a plan: the same syntax as
    :func:`completions`, for moves chosen any way (a random walk) that need not reach the goal.

    The walk must stay on the map, never enter a hole, and reach the goal at most with its last move (the
    episode ends there). Description sentences state facts only (``facts_only`` of :func:`step_sentences`),
    so the narration of a walk never says which move is better. ``oxed{...}`` holds the walk's moves.

    Raises:
        ValueError: unknown ``cots`` or ``astar`` (a search trace is not a walk's: it chooses its own
            moves), or a walk that enters a hole, moves off the edge or passes the goal.
    """
    _check_cots(cots)
    if "astar" in cots:
        raise ValueError("astar has no walk trace: the search chooses its own path")
    moves = [_normalise(move) for move in walk]
    return _traces(m, moves, _check_walk(m, moves), cots, table_style, facts_only=True)


def _check_cots(cots: Sequence[str]) -> None:
    for cot in cots:
        if cot not in COT_FORMATS:
            raise ValueError(f"unknown CoT format {cot!r} (expected one of {', '.join(COT_FORMATS)})")


def _traces(
    m: FrozenLakeMap,
    moves: list[str],
    positions: list[Cell],
    cots: Sequence[str],
    table_style: str | None,
    *,
    facts_only: bool,
) -> dict[str, str]:
    """The completions of :func:`completions` / :func:`walk_completions` for moves visiting ``positions``."""
    answer = boxed(moves)
    header = f"This is a {m.size}x{m.size} map."
    path_texts: dict[str, str] = {}
    if "coords" in cots:
        path_texts["coords"] = " ".join(cell_text(p) for p in positions) + "\n" + answer
    if "astar" in cots:
        path_texts["astar"] = astar_text(m, positions)
    sentences: list[str] = []
    if any(cot.endswith("desc") for cot in cots):
        dist: dict[Cell, int] = {}

        def distances() -> dict[Cell, int]:
            # BFS only for maps whose trace needs it (a move away from the goal), and at most once.
            if not dist:
                dist.update(goal_distances(m))
            return dist

        sentences = [
            " ".join(step_sentences(m, positions[i], move, distances, facts_only=facts_only))
            for i, move in enumerate(moves)
        ]
    states: dict[str, list[str]] = {}
    for fmt in dict.fromkeys(_MAP_FORMAT[cot] for cot in cots if cot not in PATH_COTS):
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
        if cot in path_texts:
            out[cot] = path_texts[cot]
            continue
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
            assert map_fmt is not None  # a CoT without a map is a path CoT, handled above
            blocks = [*states[map_fmt], answer]
        out[cot] = "\n".join(blocks)
    return out


# ----- path CoTs: coordinates and A* search -----------------------------------------------------------------
def cell_text(cell: Cell) -> str:
    """``(row,column)``, 1-based, as the path CoTs write a cell: ``cell_text((0, 2)) == "(1,3)"``."""
    return f"({cell[0] + 1},{cell[1] + 1})"


@dataclass(frozen=True)
class Expansion:
    """One A* expansion: the cell taken from the open list, its g and h, and what happened to its neighbours.

    Attributes:
        cell: The expanded cell (0-based).
        g: Moves from the start.
        h: Manhattan distance to the goal.
        neighbours: ``(letter, code)`` per neighbour in the run's neighbour order (:data:`SEARCH_ORDER`
            unless another is given): code ``+`` added, ``H`` hole, ``W`` wall, ``C`` closed, ``O`` already
            open (module docstring). Empty for the goal, whose expansion ends the search.
    """

    cell: Cell
    g: int
    h: int
    neighbours: tuple[tuple[str, str], ...] = ()

    @property
    def is_goal(self) -> bool:
        return self.h == 0

    def text(self) -> str:
        """The trace line, e.g. ``(2,3) g1 h4: U+ LH RC DW`` or ``(1,2) g3 h0 goal``."""
        head = f"{cell_text(self.cell)} g{self.g} h{self.h}"
        if self.is_goal:
            return head + " goal"
        return head + ": " + " ".join(letter + code for letter, code in self.neighbours)


@dataclass(frozen=True)
class SearchRun:
    """A finished A* run (:func:`astar_search`).

    Attributes:
        expansions: In expansion order; the goal's is the last one (unless the map is unsolvable).
        g: The final (lowest) g of every cell the search reached, expanded or only added.
        parent: For every reached cell but the start, the cell whose expansion gave it that g.
    """

    expansions: tuple[Expansion, ...]
    g: dict[Cell, int] = field(repr=False)
    parent: dict[Cell, Cell] = field(repr=False)

    def parent_chain(self, goal: Cell) -> list[Cell]:
        """A*'s own path: from ``goal`` through the parents, returned start first."""
        chain = [goal]
        while chain[-1] in self.parent:
            chain.append(self.parent[chain[-1]])
        return chain[::-1]

    def is_read_back(self, cells: Sequence[Cell]) -> bool:
        """Whether ``cells`` (start first) is a valid read-back: every cell reached with g equal to its index,
        consecutive cells adjacent, ending at the goal the search expanded last."""
        if not cells or not self.expansions or cells[-1] != self.expansions[-1].cell:
            return False
        if any(self.g.get(c) != i for i, c in enumerate(cells)):
            return False
        return all(_implied_move(a, b) is not None for a, b in pairwise(cells))


def astar_search(m: FrozenLakeMap, order: Sequence[str] = SEARCH_ORDER) -> SearchRun:
    """A* from the start to the goal with the Manhattan heuristic and this module's tie-break; ``order`` is
    the neighbour order (four distinct moves): how neighbours are written and join the open list.

    The open list is ordered by ``(f, h, order added)``; a cell re-added with a smaller g gets a new place
    (its old entry is skipped when popped). Closed cells are never reopened: the heuristic is consistent.
    The search stops when it expands the goal (an unsolvable map: when the open list is empty).
    """
    goal = m.goal
    gr, gc = goal
    start = m.start
    h0 = abs(start[0] - gr) + abs(start[1] - gc)
    g: dict[Cell, int] = {start: 0}
    parent: dict[Cell, Cell] = {}
    closed: set[Cell] = set()
    heap: list[tuple[int, int, int, Cell]] = [(h0, h0, 0, start)]
    added = 1
    out: list[Expansion] = []
    deltas = [(move[0], DELTAS[move]) for move in order]
    while heap:
        f, h, _, cell = heapq.heappop(heap)
        if cell in closed or g[cell] + h != f:
            continue  # an entry superseded by a smaller g
        closed.add(cell)
        gcell = g[cell]
        if cell == goal:
            out.append(Expansion(cell, gcell, 0))
            break
        marks = []
        for letter, (dr, dc) in deltas:
            nxt = (cell[0] + dr, cell[1] + dc)
            if not m.inside(nxt):
                code = "W"
            elif nxt in m.holes:
                code = "H"
            elif nxt in closed:
                code = "C"
            elif nxt in g and g[nxt] <= gcell + 1:
                code = "O"
            else:
                code = "+"
                g[nxt] = gcell + 1
                parent[nxt] = cell
                hn = abs(nxt[0] - gr) + abs(nxt[1] - gc)
                heapq.heappush(heap, (gcell + 1 + hn, hn, added, nxt))
                added += 1
            marks.append((letter, code))
        out.append(Expansion(cell, gcell, h, tuple(marks)))
    return SearchRun(tuple(out), g, parent)


def astar_read_back(m: FrozenLakeMap, positions: Sequence[Cell]) -> tuple[SearchRun, list[Cell]]:
    """The run and the cells (start first) of the reference ``astar`` trace for the plan visiting
    ``positions``: the first order of :data:`SEARCH_ORDERS` whose search reached all of the plan's cells with
    matching g, reading back the plan; else the ``U L R D`` run and A*'s parent chain (module docstring)."""
    cells = list(positions)
    default = None
    for order in SEARCH_ORDERS:
        run = astar_search(m, order)
        default = default or run
        if run.is_read_back(cells):
            return run, cells
    assert default is not None
    return default, default.parent_chain(m.goal)


def astar_text(m: FrozenLakeMap, positions: Sequence[Cell]) -> str:
    r"""The ``astar`` completion for the plan visiting ``positions`` (start first), ``\boxed{}`` included."""
    run, cells = astar_read_back(m, positions)
    moves = [_implied_move(a, b) for a, b in pairwise(cells)]
    lines = [e.text() for e in run.expansions]
    lines.append("path: " + " ".join(cell_text(c) for c in reversed(cells)))
    lines.append(boxed([mv for mv in moves if mv is not None]))
    return "\n".join(lines)


def search_order(parsed: ParsedSearch) -> tuple[str, ...]:
    """The neighbour order a parsed trace uses: its first expansion's, when that lists four distinct moves,
    else :data:`SEARCH_ORDER`."""
    for e in parsed.expansions[:1]:
        letters = [letter for letter, _ in e.neighbours]
        if len(letters) == 4 and len(set(letters)) == 4:
            return tuple(LETTER_MOVES[letter] for letter in letters)
    return SEARCH_ORDER


@dataclass(frozen=True)
class ParsedSearch:
    """An ``astar`` trace read back by :func:`parse_search` (cells 0-based).

    Attributes:
        expansions: The expansion lines that parsed, in order (malformed ones are in ``errors``).
        lines: The line number (1-based, within the trace) of each parsed expansion.
        path: The read-back cells as written (goal first), or ``None`` without a ``path:`` line.
        errors: ``(line number, why)`` for lines that are neither an expansion nor the path.
    """

    expansions: tuple[Expansion, ...]
    lines: tuple[int, ...]
    path: tuple[Cell, ...] | None
    errors: tuple[tuple[int, str], ...]


def parse_search(text: str) -> ParsedSearch:
    r"""Reads an ``astar`` trace (ours or a model's) back; tolerant, never raises. Everything from the last
    ``\boxed{`` on is ignored; blank lines are skipped."""
    cut = text.rfind(_BOXED)
    if cut >= 0:
        text = text[:cut]
    expansions: list[Expansion] = []
    lines: list[int] = []
    path: tuple[Cell, ...] | None = None
    errors: list[tuple[int, str]] = []
    for k, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("path:"):
            body = line[5:].strip()
            cells = tuple((int(r) - 1, int(c) - 1) for r, c in _CELL.findall(body))
            if _CELL.sub("", body).strip():
                errors.append((k, f"path line has text other than cells: {line!r}"))
            path = cells if path is None else path
            continue
        found = _EXPANSION.fullmatch(line)
        if not found:
            errors.append((k, f"not an expansion line: {line!r}"))
            continue
        r, c, g, h, rest = found.groups()
        marks: tuple[tuple[str, str], ...] = ()
        if rest is not None:
            marks = tuple(_NEIGHBOUR.findall(rest))
            if _NEIGHBOUR.sub("", rest).strip() or not marks:
                errors.append((k, f"malformed neighbours in {line!r}"))
                continue
        elif int(h) != 0:
            errors.append((k, f"'goal' written on a cell with h{h}: {line!r}"))
            continue
        expansions.append(Expansion((int(r) - 1, int(c) - 1), int(g), int(h), marks))
        lines.append(k)
    return ParsedSearch(tuple(expansions), tuple(lines), path, tuple(errors))


def path_step_span(text: str, cot: str, step: int) -> tuple[int, int] | None:
    """Where step ``step`` (1-based, numbered as :func:`lakeshift.scoring.check_search_trace` numbers them)
    of a path CoT lies in ``text``: a ``coords`` cell; an ``astar`` expansion line, or a read-back cell."""
    cut = text.rfind(_BOXED)
    body = text if cut < 0 else text[:cut]
    if cot == "coords":
        cells = list(_CELL.finditer(body))
        return (cells[step].start(), cells[step].end()) if 0 < step < len(cells) else None
    lines: list[tuple[int, int]] = []
    path: list[tuple[int, int]] = []
    pos = 0
    for line in body.splitlines(keepends=True):
        stripped = line.strip()
        start = pos + len(line) - len(line.lstrip())
        if stripped.startswith("path:"):
            path = [(pos + c.start(), pos + c.end()) for c in _CELL.finditer(line)]
        elif stripped:
            lines.append((start, start + len(stripped)))
        pos += len(line)
    if 0 < step <= len(lines):
        return lines[step - 1]
    j = step - len(lines)
    return path[j] if 0 < j < len(path) else (path[0] if path and j <= 0 else None)


def parse_cells(text: str) -> list[Cell]:
    r"""The cells (0-based) a ``coords`` trace writes before its last ``\boxed{``, in order."""
    cut = text.rfind(_BOXED)
    return [(int(r) - 1, int(c) - 1) for r, c in _CELL.findall(text[:cut] if cut >= 0 else text)]


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
        cell: Path CoTs (``astar``, ``coords``): the cell this step reaches, as written (0-based).
    """

    move: str | None
    state_text: str | None = None
    state: BoardState | None = None
    state_move: str | None = None
    sentences: str | None = None
    error: str | None = None
    cell: Cell | None = None


def parse_steps(text: str, cot: str, m: FrozenLakeMap | None = None) -> list[TraceStep]:
    r"""Splits a CoT completion (ours or a model's) into steps; tolerant, never raises on bad text.

    Everything from the last ``\boxed{`` on is the answer and ignored; a ``This is a NxN map.`` line is
    skipped. In description formats a step ends with the line that says ``I will move X`` (sentences may
    span lines); in combined formats the map block that follows belongs to that step; in table/grid formats
    every map block is a step. Malformed blocks give a step with ``state=None`` and an ``error``; an announced
    move without its map (combined formats) gives a step with ``error="no map after the announced move"``.

    Path CoTs give one step per move of the path they write (``coords``: its cells; ``astar``: the ``path:``
    read-back, reversed to start first), with ``cell`` the cell reached and ``error`` for a cell that is not
    adjacent to the previous one; :func:`parse_search` reads an ``astar`` trace's expansions.

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
    if cot in PATH_COTS:
        if cot == "coords":
            cells = parse_cells(text)
        else:
            written = parse_search(text).path
            cells = list(reversed(written)) if written else []
        return _cell_steps(cells, m)
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


def moves_between(cells: Sequence[Cell]) -> list[str | None]:
    """The move from each cell to the next (``None`` where two cells are not adjacent)."""
    return [_implied_move(a, b) for a, b in pairwise(cells)]


def _cell_steps(cells: Sequence[Cell], m: FrozenLakeMap | None) -> list[TraceStep]:
    """One step per written cell after the first (the start): the move from the previous cell."""
    steps = []
    for i in range(1, len(cells)):
        move = _implied_move(cells[i - 1], cells[i])
        error = None if move is not None else "not adjacent to the previous cell"
        if i == 1 and m is not None and cells[0] != m.start:
            error = "the path does not begin at the start"
        steps.append(TraceStep(move, state_move=move, error=error, cell=cells[i]))
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


def _check_walk(m: FrozenLakeMap, moves: list[str]) -> list[Cell]:
    """The positions along a safe walk (start first): on the map, no hole, the goal at most at the end."""
    rollout = m.simulate(moves)
    if rollout.fell_at is not None:
        raise ValueError(f"the walk falls into a hole at move {rollout.fell_at}")
    if rollout.off_edge_moves:
        raise ValueError("the walk moves off the edge of the map")
    if rollout.reached_goal_at is not None and rollout.reached_goal_at != len(moves):
        raise ValueError("the walk passes the goal: a walk ends where it reaches it")
    return list(rollout.positions)


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
