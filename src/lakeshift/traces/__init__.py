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
  symmetries (:mod:`lakeshift.data.augment`). When no order reaches the plan, the trace is the ``U L R D``
  search
  and its read-back is A*'s own parent chain (each cell's parent: the expansion that gave it its g), an
  optimal path too, which the answer then follows instead of the plan; this is rare (benchmarks/log.md,
  "Notes on the numbers"), and ``split.json`` counts it (``astar_answer_differs``).

  The second version of the paper (OpenReview LAzMmAeHyJ) reports an A*-step CoT but does not publish its
  text: this format is our own design, kept short (the small models' tokenizer has one token per character).

``wave``: the breadth-first distances from the goal, drawn as frames of the map in which each cell reached
shows its arrow toward the goal, then the path the arrows give (:mod:`lakeshift.traces.wave`, its rules and
an example).

The move announced is always the path's next move, so the trace follows the answer whatever the path (it must
be a successful plan: no hole, no off-edge move, the goal reached only by the last move).

:func:`parse_steps` splits a completion (or a model's output) back into :class:`TraceStep` objects for
faithfulness checks; it never raises on malformed text, it records errors per step.
"""

from lakeshift.traces.astar import (
    SEARCH_ORDER,
    SEARCH_ORDERS,
    Expansion,
    SearchRun,
    astar_read_back,
    astar_search,
    astar_text,
)
from lakeshift.traces.parse import (
    ParsedSearch,
    TraceStep,
    moves_between,
    parse_cells,
    parse_search,
    parse_steps,
    path_step_span,
    search_order,
)
from lakeshift.traces.render import (
    Distances,
    completion,
    completions,
    direct_moves,
    step_sentences,
    walk_completions,
)
from lakeshift.traces.vocabulary import (
    BOXED,
    COT_FORMATS,
    MAP_COTS,
    MAP_FORMAT,
    PATH_COTS,
    TRACE_COTS,
    boxed,
    cell_text,
    implied_move,
    into_hole,
    normalise_move,
)
from lakeshift.traces.wave import (
    ARROW_ORDER,
    ARROWS,
    ParsedWave,
    follow_arrows,
    goal_distances,
    parse_wave,
    wave_arrows,
    wave_frames,
    wave_path,
    wave_text,
)

__all__ = [
    "ARROWS",
    "ARROW_ORDER",
    "BOXED",
    "COT_FORMATS",
    "MAP_COTS",
    "MAP_FORMAT",
    "PATH_COTS",
    "SEARCH_ORDER",
    "SEARCH_ORDERS",
    "TRACE_COTS",
    "Distances",
    "Expansion",
    "ParsedSearch",
    "ParsedWave",
    "SearchRun",
    "TraceStep",
    "astar_read_back",
    "astar_search",
    "astar_text",
    "boxed",
    "cell_text",
    "completion",
    "completions",
    "direct_moves",
    "follow_arrows",
    "goal_distances",
    "implied_move",
    "into_hole",
    "moves_between",
    "normalise_move",
    "parse_cells",
    "parse_search",
    "parse_steps",
    "parse_wave",
    "path_step_span",
    "search_order",
    "step_sentences",
    "walk_completions",
    "wave_arrows",
    "wave_frames",
    "wave_path",
    "wave_text",
]
