"""Hypothesis strategies for random FrozenLake maps, shared by the property tests of the new modules."""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import assume
from hypothesis import strategies as st

from lakeshift.env import FrozenLakeMap


@st.composite
def random_maps(
    draw: st.DrawFn,
    max_size: int = 8,
    hole_probs: Sequence[float] = (0.0, 0.2, 0.4),
    solvable: bool = True,
) -> FrozenLakeMap:
    """A random map of size 2..``max_size``: start, goal and holes drawn with one of ``hole_probs``."""
    n = draw(st.integers(2, max_size))
    rng = random.Random(draw(st.integers(0, 2**32)))
    cells = [(r, c) for r in range(n) for c in range(n)]
    start, goal = rng.sample(cells, 2)
    p_hole = draw(st.sampled_from(list(hole_probs)))
    holes = frozenset(c for c in cells if c not in (start, goal) and rng.random() < p_hole)
    m = FrozenLakeMap(n, holes, start, goal)
    if solvable:
        assume(m.solvable)
    return m
