"""Writing a completion in every CoT format: the answer, step sentences, redrawn maps, cells, A* traces."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from lakeshift.env import Cell, FrozenLakeMap
from lakeshift.errors import ArgumentError, check_choice, shown
from lakeshift.formats import TABLE_STYLES, BoardState, render_state
from lakeshift.traces.astar import astar_text
from lakeshift.traces.vocabulary import (
    COT_FORMATS,
    MAP_COTS,
    MAP_FORMAT,
    PATH_COTS,
    boxed,
    cell_text,
    into_hole,
    normalise_move,
)
from lakeshift.traces.wave import goal_distances, wave_text


def direct_moves(pos: Cell, goal: Cell) -> list[str]:
    """The moves that reduce the row or column distance from ``pos`` to ``goal``, vertical first."""
    moves = []
    if goal[0] != pos[0]:
        moves.append("UP" if goal[0] < pos[0] else "DOWN")
    if goal[1] != pos[1]:
        moves.append("LEFT" if goal[1] < pos[1] else "RIGHT")
    return moves


Distances = dict[Cell, int]


def step_sentences(
    m: FrozenLakeMap,
    pos: Cell,
    move: str,
    dist: Distances | Callable[[], Distances] | None = None,
    *,
    facts_only: bool = False,
) -> list[str]:
    """The description sentences for taking ``move`` at ``pos`` (rules: :mod:`lakeshift.traces`).

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
    move = normalise_move(move)
    direct = direct_moves(pos, m.goal)
    sentences = [f"The direct path to the goal is moving {' or '.join(direct)}."]
    others = [d for d in direct if d != move]
    if move in direct:
        sentences += [
            f"However, there is a hole {d}, so I cannot move {d}." for d in others if into_hole(m, pos, d)
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
    if all(into_hole(m, pos, d) for d in direct):
        sentences.append(f"As the direct path is blocked, I will move {move} instead.")
    else:
        sentences.append(f"Thus, I will move {move} instead.")
    return sentences


def completion(m: FrozenLakeMap, path: Sequence[str], cot: str, *, table_style: str | None = None) -> str:
    r"""The assistant text for map ``m`` and plan ``path`` in CoT format ``cot``, ending with ``\boxed{...}``.

    Args:
        m: The map.
        path: A successful plan (full move names or letters), normally the map's optimal path. A ``wave``
            trace answers the path its arrows give instead (:mod:`lakeshift.traces.wave`).
        cot: One of :data:`COT_FORMATS`.
        table_style: Table CoTs only: ``"compact"`` (default) or ``"aligned"``.

    Raises:
        ArgumentError: ``m`` that is not a :class:`FrozenLakeMap`, unknown ``cot`` or ``table_style``, a
            ``path`` that is not a sequence of moves, or one that falls into a hole, moves off the edge, or
            does not end on the goal (or passes it before the end). A ``ValueError`` too.
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
        ArgumentError: as :func:`completion`.
    """
    _check_arguments(m, cots, table_style)
    moves = _moves(path, "path")
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
        ArgumentError: as :func:`completions`; ``astar`` or ``wave`` (a search trace or a wave is not a
            walk's: it chooses its own moves), or a walk that enters a hole, moves off the edge or passes
            the goal.
    """
    _check_arguments(m, cots, table_style)
    for cot in ("astar", *MAP_COTS):
        if cot in cots:
            chooser = "the search" if cot == "astar" else "the map's wave"
            raise ArgumentError(f"{cot} has no walk trace: {chooser} chooses its own path")
    moves = _moves(walk, "walk")
    return _traces(m, moves, _check_walk(m, moves), cots, table_style, facts_only=True)


def _check_arguments(m: FrozenLakeMap, cots: Sequence[str], table_style: str | None) -> None:
    if not isinstance(m, FrozenLakeMap):
        raise ArgumentError(f"m must be a FrozenLakeMap, got {shown(m)}")
    if isinstance(cots, str) or not isinstance(cots, Iterable):
        raise ArgumentError(f"cots must be a sequence of CoT format names, got {shown(cots)}")
    for cot in cots:
        check_choice("cot", cot, COT_FORMATS, "CoT format")
    if table_style is not None:
        check_choice("table_style", table_style, TABLE_STYLES, "table style")


def _moves(path: Iterable[str], name: str) -> list[str]:
    """The moves of ``path`` spelled out (``UP``, ...); :class:`ArgumentError` naming parameter ``name``."""
    if isinstance(path, Iterable) and not isinstance(path, (bytes, Mapping)):
        moves = []
        for i, move in enumerate(path, 1):
            try:
                moves.append(normalise_move(move))
            except ArgumentError:
                raise ArgumentError(
                    f"unknown move {move!r} at move {i} of {name} "
                    "(expected UP, DOWN, LEFT, RIGHT or U, D, L, R)"
                ) from None
        return moves
    raise ArgumentError(
        f"{name} must be a sequence of moves (UP, DOWN, LEFT, RIGHT or U, D, L, R), got {shown(path)}"
    )


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
    if "wave" in cots:
        path_texts["wave"] = wave_text(m)
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
    for fmt in dict.fromkeys(MAP_FORMAT[cot] for cot in cots if cot not in PATH_COTS):
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
        map_fmt = MAP_FORMAT[cot]
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


def _check_walk(m: FrozenLakeMap, moves: list[str]) -> list[Cell]:
    """The positions along a safe walk (start first): on the map, no hole, the goal at most at the end."""
    rollout = m.simulate(moves)
    if rollout.fell_at is not None:
        raise ArgumentError(f"the walk falls into a hole at move {rollout.fell_at}")
    if rollout.off_edge_moves:
        raise ArgumentError("the walk moves off the edge of the map")
    if rollout.reached_goal_at is not None and rollout.reached_goal_at != len(moves):
        raise ArgumentError("the walk passes the goal: a walk ends where it reaches it")
    return list(rollout.positions)


def _check_path(m: FrozenLakeMap, moves: list[str]) -> list[Cell]:
    """The positions along a successful plan (start first)."""
    rollout = m.simulate(moves)
    if rollout.fell_at is not None:
        raise ArgumentError(f"the path falls into a hole at move {rollout.fell_at}")
    if rollout.off_edge_moves:
        raise ArgumentError("the path moves off the edge of the map")
    if not rollout.success or rollout.reached_goal_at != len(moves):
        raise ArgumentError("the path must end on the goal and reach it only with its last move")
    return list(rollout.positions)
