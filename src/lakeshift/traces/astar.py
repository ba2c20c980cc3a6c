"""The A* search of the ``astar`` CoT: the search, its neighbour orders, and the path read back from it."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise, permutations

from lakeshift.env import DELTAS, Cell, FrozenLakeMap
from lakeshift.traces.vocabulary import boxed, cell_text, implied_move

#: Neighbour order of an A* expansion line (and the order neighbours join the open list).
SEARCH_ORDER: tuple[str, ...] = ("UP", "LEFT", "RIGHT", "DOWN")


def _search_orders() -> tuple[tuple[str, ...], ...]:
    """The 24 neighbour orders a reference ``astar`` trace may use, most preferred first
    (:mod:`lakeshift.traces`): ``U L R D``, then its images under the square's other 7 symmetries, then the
    rest, lexicographically."""
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


@dataclass(frozen=True)
class Expansion:
    """One A* expansion: the cell taken from the open list, its g and h, and what happened to its neighbours.

    Attributes:
        cell: The expanded cell (0-based).
        g: Moves from the start.
        h: Manhattan distance to the goal.
        neighbours: ``(letter, code)`` per neighbour in the run's neighbour order (:data:`SEARCH_ORDER`
            unless another is given): code ``+`` added, ``H`` hole, ``W`` wall, ``C`` closed, ``O`` already
            open (:mod:`lakeshift.traces`). Empty for the goal, whose expansion ends the search.
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
        return all(implied_move(a, b) is not None for a, b in pairwise(cells))


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
    matching g, reading back the plan; else the ``U L R D`` run and A*'s parent chain
    (:mod:`lakeshift.traces`)."""
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
    moves = [implied_move(a, b) for a, b in pairwise(cells)]
    lines = [e.text() for e in run.expansions]
    lines.append("path: " + " ".join(cell_text(c) for c in reversed(cells)))
    lines.append(boxed([mv for mv in moves if mv is not None]))
    return "\n".join(lines)
