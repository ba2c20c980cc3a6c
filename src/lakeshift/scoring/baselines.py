"""Reference policies scored with the same code as models: ``oracle``, ``greedy`` and ``random``.

* ``oracle``: a BFS shortest path (:meth:`FrozenLakeMap.optimal_path`, direct tie-break). Must score
  100%; anything else is a scorer bug.
* ``greedy``: the description trace's rule (paper, Appendix A) applied step by step with no look-ahead.
  The *direct* moves are those that reduce the row or column distance to the goal, vertical first; take
  the first direct move that stays on the map and is not a hole. When every direct move is blocked, take
  the first safe move in ``UP, DOWN, LEFT, RIGHT`` order that does not return to the previous cell (our
  choice: the paper's trace never needs it, because it follows a precomputed path). Stop at the goal, when
  no move is possible, or when a cell is entered for the third time (a loop); so ``greedy`` never falls in a
  hole and fails by ``stopped_short``. It shows how far the trace's own heuristic gets on each split.
* ``random``: a uniformly random walk of the optimal length, seeded by ``seed`` and the map id (so one
  map's walk does not depend on which other maps are scored).

Outputs are answer-only (``\\boxed{UP, RIGHT}``); ``cot`` makes the oracle write the full reference
completion of a CoT format instead (:func:`lakeshift.traces.completion`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from lakeshift.env import MOVES, FrozenLakeMap

POLICIES: tuple[str, ...] = ("oracle", "greedy", "random")


def greedy_path(m: FrozenLakeMap) -> list[str]:
    """The greedy policy's plan (see the module docstring)."""
    pos = m.start
    prev = None
    visits = {pos: 1}
    moves: list[str] = []
    while pos != m.goal:
        dr, dc = m.goal[0] - pos[0], m.goal[1] - pos[1]
        direct = []
        if dr:
            direct.append("DOWN" if dr > 0 else "UP")
        if dc:
            direct.append("RIGHT" if dc > 0 else "LEFT")
        choice = None
        for move in direct:
            nxt = m.step(pos, move)
            if nxt != pos and nxt not in m.holes:
                choice = move
                break
        if choice is None:
            for move in MOVES:
                nxt = m.step(pos, move)
                if nxt != pos and nxt not in m.holes and nxt != prev:
                    choice = move
                    break
        if choice is None:
            break
        prev, pos = pos, m.step(pos, choice)
        moves.append(choice)
        visits[pos] = visits.get(pos, 0) + 1
        if visits[pos] >= 3:
            break
    return moves


def random_path(m: FrozenLakeMap, length: int, seed: int, map_id: str) -> list[str]:
    """A seeded uniformly random walk of ``length`` moves."""
    rng = random.Random(f"{seed}:{map_id}")
    return [rng.choice(MOVES) for _ in range(length)]


def policy_path(m: FrozenLakeMap, policy: str, *, seed: int = 0, map_id: str = "") -> list[str]:
    """The moves a policy plays on a map.

    Raises:
        ValueError: unknown policy.
    """
    if policy == "oracle":
        return m.optimal_path()
    if policy == "greedy":
        return greedy_path(m)
    if policy == "random":
        return random_path(m, m.optimal_length or 0, seed, map_id)
    raise ValueError(f"unknown policy {policy!r} (expected one of {POLICIES})")


def boxed(moves: Iterable[str]) -> str:
    """``\\boxed{UP, RIGHT}``: the answer format of the Mirage training data."""
    return "\\boxed{" + ", ".join(moves) + "}"


def baseline_predictions(
    maps: Iterable[Any],
    policy: str,
    *,
    seed: int = 0,
    cot: str | None = None,
) -> list[dict[str, Any]]:
    """Predictions records (``id``, ``output``, ``model``, ...) of a policy on ``maps.jsonl`` records.

    Args:
        maps: Map records (``id``, ``rows``, ``split``...), or ``ScoringMap``-like objects with ``.map``.
        policy: One of :data:`POLICIES`.
        seed: Seed of the ``random`` policy.
        cot: With ``oracle``, write the reference completion of this CoT format instead of the bare answer.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (expected one of {POLICIES})")
    rows = []
    for item in maps:
        if hasattr(item, "map"):
            m, rec = item.map, item.record  # a ScoringMap
        else:
            rec = item
            m = FrozenLakeMap.from_rows(rec["rows"])
        mid = str(rec["id"])
        path = policy_path(m, policy, seed=seed, map_id=mid)
        if cot is not None and cot != "none":
            from lakeshift import traces

            output = traces.completion(m, path, cot)
        else:
            output = boxed(path)
        row: dict[str, Any] = {
            "id": mid,
            "output": output,
            "model": f"baseline-{policy}",
            "input_format": "baseline",
            "cot_format": cot if cot else policy,
            "policy": policy,
        }
        if rec.get("split") is not None:
            row["split"] = rec["split"]
        rows.append(row)
    return rows
