"""Scoring model outputs: answer extraction, simulation, one verdict per prediction, CoT faithfulness.

Extraction modes (``compat``)
-----------------------------
* ``None`` (default, ours): the content of the **last** ``\\boxed{...}`` (braces balanced). Inside it, moves
  are words or letters in any case (``UP``, ``up``, ``Up``, ``U``, ``u``) separated by commas, semicolons,
  whitespace or arrows (``->``, ``→``, ``\\to``, ``\\rightarrow``); a run of letters such as ``RRDD`` or
  ``rrdd`` is read letter by letter (``rrd`` = ``RRD`` = ``r, r, d``); ``\\text{...}`` wrappers and enclosing
  brackets, braces (``\\boxed{{U, R}}``) or quotes are removed.
  Any other token makes the answer ``unparseable``: stray text never contributes letters.
* ``"frozen_ood"``: the paper's evaluator exactly (``mathruler``'s ``extract_boxed_content`` and
  ``simulate_vsp``): the last ``\\boxed{`` with balanced braces (unbalanced or absent gives the string
  ``"None"``), upper-cased, and **every** ``U``, ``D``, ``R``, ``L`` character kept in order. So
  ``\\boxed{RIGHT, UP}`` is ``R, U`` but ``\\boxed{PLAN}`` is ``L`` and ``\\boxed{DOWN}`` is ``D``.
* ``"vsp"``: VSP's ``maze/task-main/eval.py``: the text after the first ``Action plan: `` (else
  ``Action Plan: ``; when neither occurs VSP reads from character 12, which we reproduce), split on ``,``,
  each part stripped of quotes, newlines, periods and spaces, and executed with gymnasium semantics: the
  episode **stops** at a hole (failure) or at the goal (success, whatever follows); a part that is not one of
  ``L D R U`` fails the plan where it is met. As in gymnasium's ``FrozenLake-v1`` (``max_episode_steps=100``),
  the episode is cut after 100 moves: a plan that has not reached the goal by then fails (``stopped_short``).

Rules and verdicts
------------------
Plans run under the environment's rules (:meth:`FrozenLakeMap.simulate`): off-edge moves stay in place,
a hole fails at once, success iff the player ends on the goal. Each prediction gets exactly one verdict:

=================  =================================================================================
``success``        the plan solves the map
``no_answer``      no answer found (no box, an empty box, no ``output``, an ambiguous duplicate)
``unparseable``    an answer was found but is not a list of moves (reason in ``detail``)
``fell_in_hole``   the plan enters a hole (``fell_at`` is the 1-based step)
``passed_goal``    the plan reaches the goal and walks on, ending elsewhere
``stopped_short``  the plan ends on a safe cell without ever reaching the goal
``missing``        the predictions file has no record for this map (counted in every denominator)
=================  =================================================================================

Facts recorded with it: ``n_moves``, ``optimal`` (success with an optimal-length plan), ``off_edge_moves``,
``progress`` (``1 - d(end) / d(start)`` with ``d`` the shortest-path distance to the goal, measured at the
last safe cell: 1.0 on success, 0 when the plan got no closer, negative when it moved away).
:func:`score_output` returns them as a frozen :class:`Verdict` (with a :class:`TraceCheck` when a trace was
checked); ``Verdict.to_json()`` gives its fields of a scored record. :func:`score_predictions` yields one
frozen :class:`ScoredRecord` per map (the verdict, the map's facts, the run's metadata); its ``to_json()`` is
the row ``lakeshift score`` writes and ``ScoredRecord.from_json`` reads one back.

Repeated samples
----------------
A predictions row with ``samples`` (``lakeshift predict --samples K``) is scored on its ``output`` as any
row, and each of its K samples is scored the same way (without the trace check): ``pass_at_k`` is true
when any sample succeeds, ``maj_at_k`` when the most frequent plan succeeds (plans are the parsed moves the
scorer simulates; samples without moves do not vote; a tie goes to the plan met first, see
:func:`majority_index`). A map without a prediction fails both.

CoT faithfulness
----------------
For outputs whose CoT format writes maps (``table``, ``grid``, ``*+desc``) or move sentences (``desc``),
:func:`faithfulness` parses every step with :func:`lakeshift.traces.parse_steps` and every written map with
:func:`lakeshift.formats.parse`, replays the moves the trace announced (``"Thus, I will move X"``; for
map-only traces the move implied by the player's written positions) on the true map, and reports the first
step whose written map differs from the true state, and whether the boxed answer equals the announced moves.
Path CoTs (:func:`check_search_trace`): an ``astar`` trace must replay the true A* run line by line and read
back a chain of cells the search reached; a ``coords`` trace must be adjacent safe cells from start to goal.
"""

from lakeshift.scoring.extraction import (
    COMPAT_MODES,
    VSP_MAX_STEPS,
    Extraction,
    extract,
    last_boxed,
    parse_moves,
)
from lakeshift.scoring.predictions import (
    META_FIELDS,
    Prediction,
    PredictionsFile,
    check_data_version,
    data_version_problem,
    decoding_label,
    majority_index,
    read_predictions,
    score_predictions,
    score_samples,
    selected_maps,
    stale_data_message,
    summarize,
)
from lakeshift.scoring.records import SampleScore, ScoredRecord
from lakeshift.scoring.trace_checks import check_search_trace, check_steps, faithfulness, guess_cot
from lakeshift.scoring.verdicts import (
    VERDICTS,
    ScoringMap,
    TraceCheck,
    Verdict,
    judge,
    load_scoring_maps,
    score_output,
    scoring_map,
)

__all__ = [
    "COMPAT_MODES",
    "META_FIELDS",
    "VERDICTS",
    "VSP_MAX_STEPS",
    "Extraction",
    "Prediction",
    "PredictionsFile",
    "SampleScore",
    "ScoredRecord",
    "ScoringMap",
    "TraceCheck",
    "Verdict",
    "check_data_version",
    "check_search_trace",
    "check_steps",
    "data_version_problem",
    "decoding_label",
    "extract",
    "faithfulness",
    "guess_cot",
    "judge",
    "last_boxed",
    "load_scoring_maps",
    "majority_index",
    "parse_moves",
    "read_predictions",
    "score_output",
    "score_predictions",
    "score_samples",
    "scoring_map",
    "selected_maps",
    "stale_data_message",
    "summarize",
]
