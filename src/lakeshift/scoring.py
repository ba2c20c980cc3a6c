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
checked); ``Verdict.to_json()`` gives the fields of a scored record, the rows ``lakeshift score`` writes.

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

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from lakeshift.env import DELTAS, FrozenLakeMap
from lakeshift.errors import LakeshiftError

VERDICTS: tuple[str, ...] = (
    "success",
    "fell_in_hole",
    "stopped_short",
    "passed_goal",
    "unparseable",
    "no_answer",
    "missing",
)
COMPAT_MODES: tuple[str | None, ...] = (None, "frozen_ood", "vsp")
#: CoT formats whose traces contain written maps or announced moves that faithfulness can check.
TRACE_COTS: tuple[str, ...] = ("desc", "table", "grid", "table+desc", "grid+desc", "astar", "coords")

_BOX = "\\boxed{"
_WORDS = {"UP": "UP", "DOWN": "DOWN", "LEFT": "LEFT", "RIGHT": "RIGHT", "U": "UP", "D": "DOWN", "L": "LEFT"}
_WORDS["R"] = "RIGHT"
_LETTER_TO_MOVE = {"U": "UP", "D": "DOWN", "L": "LEFT", "R": "RIGHT"}
_ARROWS = re.compile(r"->|=>|→|⇒|⟶|\\(?:rightarrow|Rightarrow|to|longrightarrow)\b")
_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|texttt|mathrm|mathbf|mathtt|mbox)\s*\{([^{}]*)\}")
_SEPARATORS = re.compile(r"[\s,;]+")
_STRIP = "\"'`.()[]{}<>*$"
_COMPACT = re.compile(r"[UDLR]+", re.IGNORECASE)
#: gymnasium registers ``FrozenLake-v1`` with ``max_episode_steps=100``: VSP's episodes end there.
VSP_MAX_STEPS = 100


# --------------------------------------------------------------------------------------------------------
# Maps
# --------------------------------------------------------------------------------------------------------
@dataclass
class ScoringMap:
    """A map prepared for scoring: the env map, its record fields and BFS distances to the goal.

    Attributes:
        id: The map id (string).
        map: The :class:`FrozenLakeMap`.
        record: The ``maps.jsonl`` record it came from (``split``, ``size``, ``d_inf``, ...).
    """

    id: str
    map: FrozenLakeMap
    record: dict[str, Any]
    _dist: dict[tuple[int, int], int] | None = field(default=None, repr=False)

    @property
    def split(self) -> str | None:
        return self.record.get("split")

    @property
    def optimal_length(self) -> int | None:
        value = self.record.get("optimal_length")
        return self.map.optimal_length if value is None else int(value)

    @property
    def distances(self) -> dict[tuple[int, int], int]:
        """Shortest-path distance to the goal of every safe cell connected to it (lazy, cached)."""
        if self._dist is None:
            m = self.map
            dist = {m.goal: 0}
            queue = deque([m.goal])
            while queue:
                cell = queue.popleft()
                d = dist[cell] + 1
                for dr, dc in DELTAS.values():
                    nxt = (cell[0] + dr, cell[1] + dc)
                    if nxt not in dist and m.inside(nxt) and nxt not in m.holes:
                        dist[nxt] = d
                        queue.append(nxt)
            self._dist = dist
        return self._dist


def scoring_map(rec: Mapping[str, Any], where: str = "map record") -> ScoringMap:
    """Builds a :class:`ScoringMap` from one ``maps.jsonl`` record (with ``suites.map_from_record``).

    Raises:
        LakeshiftError: the record lacks ``id`` or ``rows`` or describes an invalid map.
    """
    from lakeshift.suites import map_from_record

    if "id" not in rec:
        raise LakeshiftError(f"{where}: missing field 'id'")
    try:
        m = map_from_record(rec)
    except LakeshiftError as err:
        raise LakeshiftError(f"{where}: invalid map ({err})") from None
    record = dict(rec)
    record.setdefault("size", m.size)
    record.setdefault("d_inf", m.d_inf)
    return ScoringMap(str(rec["id"]), m, record)


def load_scoring_maps(path: str | Path) -> dict[str, ScoringMap]:
    """Reads ``maps.jsonl`` (:func:`lakeshift.suites.load_maps`) into ``{id: ScoringMap}`` in file order.

    Raises:
        LakeshiftError: missing file, malformed line or field, invalid map, duplicate id, or no maps.
    """
    from lakeshift.suites import load_maps

    return {str(rec["id"]): scoring_map(rec, f"{path}, map {i}") for i, rec in enumerate(load_maps(path), 1)}


# --------------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Extraction:
    """The plan read from one output.

    Attributes:
        moves: Moves as ``"UP"``... (empty when none could be read).
        status: ``"ok"``, ``"no_answer"`` or ``"unparseable"``.
        detail: Why the answer was not read (empty when ``ok``).
        span: ``(start, end)`` character offsets of the answer inside the output, or ``None``.
    """

    moves: tuple[str, ...]
    status: str
    detail: str = ""
    span: tuple[int, int] | None = None


def last_boxed(text: str) -> tuple[str, int, int] | None:
    """The content of the last ``\\boxed{...}`` with its offsets, or ``None`` (absent or unclosed).

    Returns:
        ``(content, start, end)`` with ``text[start:end] == content``.
    """
    start = text.rfind(_BOX)
    if start < 0:
        return None
    begin = pos = start + len(_BOX)
    depth = 0
    while True:
        close = text.find("}", pos)
        if close < 0:
            return None
        opened = text.count("{", pos, close)
        depth += opened
        if depth == 0:
            return text[begin:close], begin, close
        depth -= 1
        pos = close + 1


def parse_moves(content: str) -> tuple[tuple[str, ...], str]:
    """Reads a move list (our default rules, see the module docstring).

    Returns:
        ``(moves, error)``: ``error`` is empty on success, else names the first token that is not a move.
    """
    text = content
    if "\\" in text:
        text = _WRAPPERS.sub(r"\1", text)
    text = _ARROWS.sub(",", text)
    moves: list[str] = []
    for raw in _SEPARATORS.split(text):
        token = raw.strip(_STRIP)
        if not token:
            continue
        move = _WORDS.get(token) or _WORDS.get(token.upper())
        if move is not None:
            moves.append(move)
        elif _COMPACT.fullmatch(token):
            moves.extend(_LETTER_TO_MOVE[ch] for ch in token.upper())
        else:
            return tuple(moves), f"not a move: {raw!r}"
    return tuple(moves), ""


def extract(text: str, compat: str | None = None) -> Extraction:
    """Reads the plan from a model output under one of the :data:`COMPAT_MODES`."""
    if compat is None:
        box = last_boxed(text)
        if box is None:
            reason = "unclosed \\boxed{" if _BOX in text else "no \\boxed{...} in the output"
            return Extraction((), "no_answer", reason)
        content, start, end = box
        if not content.strip():
            return Extraction((), "no_answer", "empty \\boxed{}", (start, end))
        moves, error = parse_moves(content)
        if error:
            return Extraction(moves, "unparseable", error, (start, end))
        if not moves:
            return Extraction((), "no_answer", "no moves in \\boxed{}", (start, end))
        return Extraction(moves, "ok", "", (start, end))
    if compat == "frozen_ood":
        box = last_boxed(text)
        content = "None" if box is None else box[0].strip()
        moves = tuple(_LETTER_TO_MOVE[ch] for ch in content.upper() if ch in "UDRL")
        span = None if box is None else (box[1], box[2])
        if box is None:
            return Extraction((), "no_answer", "no \\boxed{...} (the paper's evaluator reads 'None')")
        if not moves:
            return Extraction((), "no_answer", "no U/D/L/R character in \\boxed{}", span)
        return Extraction(moves, "ok", "", span)
    if compat == "vsp":
        return _extract_vsp(text)
    raise ValueError(f"unknown compat mode {compat!r} (expected one of {COMPAT_MODES})")


def _extract_vsp(text: str) -> Extraction:
    """VSP's parsing; an invalid part ends the moves there and is reported in ``detail``."""
    idx = text.find("Action plan: ")
    if idx < 0:
        idx = text.find("Action Plan: ")
    found = idx >= 0
    begin = idx + 13  # VSP adds 13 even to -1: with no marker it reads from character 12
    moves: list[str] = []
    for part in text[begin:].split(","):
        token = part.replace('"', "").replace("'", "").replace("\n", "").replace(".", "").strip()
        if token not in _LETTER_TO_MOVE:
            status = "unparseable" if found else "no_answer"
            detail = f"not a move: {token[:40]!r}" if found else "no 'Action plan: ' in the output"
            return Extraction(tuple(moves), status, detail, (begin, len(text)) if found else None)
        moves.append(_LETTER_TO_MOVE[token])
    return Extraction(tuple(moves), "ok", "", (begin, len(text)))


# --------------------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceCheck:
    """The faithfulness check of one CoT trace (:func:`faithfulness`); in files, each field with a
    ``trace_`` prefix.

    Attributes:
        steps: Steps found in the trace.
        maps: Maps the trace writes.
        divergence_step: The first step (1-based) that departs from the true states, ``None`` when none does.
        divergence: Why that step departs.
        faithful: Steps found, no divergence, and the answer does not disagree with the trace.
        answer_agrees: The answer's moves equal the trace's (``None`` without an answer or without moves).
    """

    steps: int
    maps: int
    divergence_step: int | None
    divergence: str | None
    faithful: bool | None
    answer_agrees: bool | None

    @classmethod
    def from_fields(cls, values: Mapping[str, Any]) -> TraceCheck:
        """From the ``trace_*`` fields of :func:`faithfulness` (or of a scored file)."""
        return cls(**{f.name: values[f"trace_{f.name}"] for f in fields(cls)})

    def to_json(self) -> dict[str, Any]:
        """The ``trace_*`` fields of a scored record."""
        return {f"trace_{f.name}": getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Verdict:
    """The scorer's judgement of one output on one map (:func:`judge`, :func:`score_output`).

    Attributes:
        success: The plan solves the map.
        verdict: One of :data:`VERDICTS` (module docstring, "Verdicts").
        moves: The extracted plan.
        n_moves: Its length.
        optimal: A success with the optimal number of moves.
        first_move_optimal: The first move steps onto a shortest path.
        off_edge_moves: Moves that would leave the map (the player stays).
        progress: Partial credit, ``1 - d(end) / d(start)``, 1.0 on success.
        fell_at: The move (1-based) that enters a hole, ``None`` when none does.
        reached_goal_at: The move that first reaches the goal, ``None`` when none does.
        final: The player's last cell (row, column).
        detail: Why an answer could not be read, in words (``None`` when it could).
        trace: The faithfulness check, when one was run on a trace.
    """

    success: bool
    verdict: str
    moves: tuple[str, ...]
    n_moves: int
    optimal: bool
    first_move_optimal: bool
    off_edge_moves: int
    progress: float
    fell_at: int | None
    reached_goal_at: int | None
    final: tuple[int, int]
    detail: str | None
    trace: TraceCheck | None = None

    def to_json(self) -> dict[str, Any]:
        """The verdict fields of a scored record (lists for tuples; the ``trace_*`` fields when checked)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"}
        out["moves"], out["final"] = list(self.moves), list(self.final)
        return out | (self.trace.to_json() if self.trace is not None else {})


def judge(sm: ScoringMap, ex: Extraction, compat: str | None = None) -> Verdict:
    """Simulates an extracted plan and returns its :class:`Verdict`."""
    m = sm.map
    moves = ex.moves
    n_moves = len(moves)
    out: dict[str, Any] = {
        "success": False,
        "verdict": "",
        "moves": list(moves),
        "n_moves": n_moves,
        "optimal": False,
        "first_move_optimal": False,
        "off_edge_moves": 0,
        "progress": 0.0,
        "fell_at": None,
        "reached_goal_at": None,
        "final": list(m.start),
        "detail": ex.detail,
    }
    vsp = compat == "vsp"
    if ex.status != "ok" and not (vsp and moves):
        out["verdict"] = ex.status
        return _verdict(out)
    if moves and m.start in sm.distances:
        # Partial credit that reads a failing model: does its plan at least start on a shortest path?
        after = m.step(m.start, moves[0])
        out["first_move_optimal"] = sm.distances.get(after, -1) == sm.distances[m.start] - 1
    # vsp: gymnasium stops the episode at the goal or a hole, so only the moves up to it are executed, and
    # its time limit truncates the episode after VSP_MAX_STEPS moves.
    rollout = m.simulate(_until_terminal(m, moves[:VSP_MAX_STEPS]) if vsp else moves)
    out["final"] = list(rollout.final)
    out["off_edge_moves"] = rollout.off_edge_moves
    out["fell_at"] = rollout.fell_at
    out["reached_goal_at"] = rollout.reached_goal_at
    success = (rollout.reached_goal_at is not None and rollout.fell_at is None) if vsp else rollout.success
    if not success:
        # Progress is measured at the last safe cell (before a fall).
        final = rollout.positions[-2] if rollout.fell_at is not None else rollout.final
        dist = sm.distances
        d0 = dist.get(m.start)
        if d0:
            out["progress"] = round(1.0 - dist.get(final, d0) / d0, 4)
    if success:
        out["success"] = True
        out["verdict"] = "success"
        out["progress"] = 1.0
        opt = sm.optimal_length
        executed = rollout.reached_goal_at if vsp else n_moves
        out["optimal"] = opt is not None and executed == opt
    elif rollout.fell_at is not None:
        out["verdict"] = "fell_in_hole"
    elif ex.status != "ok":  # vsp: an invalid part met before the episode ended
        out["verdict"] = ex.status
    elif rollout.reached_goal_at is not None:
        out["verdict"] = "passed_goal"
    else:
        out["verdict"] = "stopped_short"
        if vsp and n_moves > VSP_MAX_STEPS:
            out["detail"] = f"gym's {VSP_MAX_STEPS}-step episode limit: the moves after it were not run"
    return _verdict(out)


def _verdict(fields_: dict[str, Any]) -> Verdict:
    return Verdict(**{**fields_, "moves": tuple(fields_["moves"]), "final": tuple(fields_["final"])})


def _until_terminal(m: FrozenLakeMap, moves: Sequence[str]) -> list[str]:
    pos = m.start
    for i, move in enumerate(moves):
        pos = m.step(pos, move)
        if pos == m.goal or pos in m.holes:
            return list(moves[: i + 1])
    return list(moves)


def score_output(
    sm: ScoringMap,
    output: str,
    *,
    compat: str | None = None,
    cot: str | None = None,
    check_trace: bool = True,
) -> Verdict:
    """Scores one raw output against one map.

    Args:
        sm: The map.
        output: The model's raw text.
        compat: Extraction mode (see :data:`COMPAT_MODES`).
        cot: The CoT format of the output (``traces.COT_FORMATS``); ``None`` guesses it from the text.
        check_trace: Run the faithfulness check on traces (see :func:`faithfulness`).

    Returns:
        The :class:`Verdict`, with its :class:`TraceCheck` when the trace was checked.
    """
    ex = extract(output, compat)
    verdict = judge(sm, ex, compat)
    if check_trace:
        if cot is None:
            cot = guess_cot(output)
        if cot in TRACE_COTS:
            answer = ex.moves if ex.status == "ok" else None
            verdict = replace(
                verdict, trace=TraceCheck.from_fields(faithfulness(sm.map, output, cot, answer))
            )
    return verdict


# --------------------------------------------------------------------------------------------------------
# Faithfulness
# --------------------------------------------------------------------------------------------------------
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


def guess_cot(text: str) -> str | None:
    """Guesses a trace's CoT format from its text (used when predictions do not say)."""
    if _EXPANSION_LINE.search(text):
        return "astar"
    cut = text.rfind(_BOX)
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

    cut = output.rfind(_BOX)
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
    if ref[: ref.rfind(_BOX)] != body:
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


# --------------------------------------------------------------------------------------------------------
# Predictions files
# --------------------------------------------------------------------------------------------------------
@dataclass
class Prediction:
    """One usable predictions record.

    Attributes:
        id: Map id.
        output: Raw output text, or ``None`` when the record had none (scored ``no_answer``).
        meta: The record's other fields.
        lineno: Its line in the file.
    """

    id: str
    output: str | None
    meta: dict[str, Any]
    lineno: int


@dataclass
class PredictionsFile:
    """A predictions file read against a maps table, with every problem found.

    Attributes:
        path: The file.
        predictions: ``{map id: Prediction}``.
        warnings: Messages naming file and line (malformed lines, unknown ids, duplicates, missing output).
        unknown_ids: Records whose id is not in the maps.
    """

    path: Path
    predictions: dict[str, Prediction]
    warnings: list[str]
    unknown_ids: int = 0
    malformed: int = 0
    duplicates: int = 0


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _samples(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(s, Mapping) and isinstance(s.get("output"), str) for s in value)
    )


def _selection(value: Any) -> bool:
    if not isinstance(value, Mapping) or not set(value) <= {"sizes", "per_size", "limit"}:
        return False
    sizes = value.get("sizes")
    if sizes is not None and not (isinstance(sizes, list) and all(_count(n) for n in sizes)):
        return False
    return all(value.get(k) is None or _count(value[k]) for k in ("per_size", "limit"))


# Metadata of prediction records that scoring and reports use, with the type each must have: a record with
# `"model": [1]` or `"selection": "all"` gets a warning and loses the field instead of breaking a report.
_META_CHECKS: dict[str, Any] = {
    **{k: (lambda v: isinstance(v, str)) for k in ("model", "input_format", "cot_format", "split", "policy")},
    "n_output_tokens": _count,
    "size": _count,
    "selection": _selection,
    "samples": _samples,
    "decoding": lambda v: isinstance(v, Mapping),
}


def read_predictions(
    path: str | Path, maps: Mapping[str, ScoringMap], strict: bool = False
) -> PredictionsFile:
    """Reads a predictions JSONL file (``id``, ``output``, optional metadata).

    Without ``strict``, bad records become warnings: a malformed line or an id not in ``maps`` is skipped
    (its map, if any, stays ``missing``); a record without a string ``output`` is kept as ``no_answer``; a
    duplicate id with a different output makes that map ``no_answer`` (ambiguous), an identical duplicate
    is ignored.

    Raises:
        LakeshiftError: missing file, or (with ``strict``) the first problem, naming file and line.
    """
    import json

    path = Path(path)
    if not path.is_file():
        raise LakeshiftError(f"{path}: no such file")
    result = PredictionsFile(path, {}, [])

    def problem(msg: str) -> None:
        if strict:
            raise LakeshiftError(msg)
        result.warnings.append(msg)

    from lakeshift.io import iter_lines

    # A line that is not UTF-8 is an error even without ``strict``: the file is binary or wrongly encoded,
    # not one torn record (iter_lines names the line and byte offset).
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        where = f"{path}, line {lineno}"
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            result.malformed += 1
            problem(f"{where}: malformed JSON ({getattr(err, 'msg', 'nested too deeply')})")
            continue
        if not isinstance(rec, dict):
            result.malformed += 1
            problem(f"{where}: expected a JSON object, got {type(rec).__name__}")
            continue
        if "id" not in rec:
            result.malformed += 1
            problem(f"{where}: missing field 'id'")
            continue
        pid = str(rec["id"])
        if pid not in maps:
            result.unknown_ids += 1
            problem(f"{where}: field 'id': {pid!r} is not in the maps file")
            continue
        output = rec.get("output")
        if not isinstance(output, str):
            what = "missing field 'output'" if "output" not in rec else "field 'output' is not a string"
            problem(f"{where}: {what} (scored no_answer)")
            output = None
        meta = {k: v for k, v in rec.items() if k not in ("id", "output")}
        for key, valid in _META_CHECKS.items():
            if meta.get(key) is not None and not valid(meta[key]):
                problem(f"{where}: field {key!r} has the wrong type ({meta[key]!r}; ignored)")
                del meta[key]
        previous = result.predictions.get(pid)
        if previous is not None:
            result.duplicates += 1
            if previous.output == output:
                problem(f"{where}: field 'id': duplicate of line {previous.lineno} (same output, ignored)")
                continue
            problem(
                f"{where}: field 'id': duplicate of line {previous.lineno} with a different output "
                "(map scored no_answer)"
            )
            meta = {**previous.meta, "duplicate": True}
            output = None
            lineno = previous.lineno
        result.predictions[pid] = Prediction(pid, output, meta, lineno)
    return result


def stale_data_message(where: str, recorded: Any, data_file: Path) -> str:
    """The error for predictions made from another version of ``data_file`` (same ids, other maps)."""
    return (
        f"{where}: field 'data_sha256': answers another version of {data_file} (sha256 {str(recorded)[:12]}; "
        "the file changed since: regenerated?); predict again into another --out (or delete the file)"
    )


def check_data_version(preds: PredictionsFile, maps_path: str | Path) -> None:
    """Refuses predictions made from another version of the data than the maps they are scored with: each
    ``lakeshift predict`` row records ``data_sha256``, the hash of the SFT file it answered
    (``<split>/sft/<input>__<cot>.jsonl``, next to ``maps.jsonl``); a regenerated split keeps its ids but
    not its maps, so old answers would be scored against new maps. Rows without the field, or whose SFT
    file is not there, are not checked.

    Raises:
        LakeshiftError: the first stale row (file, line, field).
    """
    from lakeshift.io import file_sha256

    sft_dir = Path(maps_path).parent / "sft"
    hashes: dict[Path, str | None] = {}
    for pred in preds.predictions.values():
        meta = pred.meta or {}
        recorded, inp, cot = meta.get("data_sha256"), meta.get("input_format"), meta.get("cot_format")
        if not isinstance(recorded, str) or not isinstance(inp, str) or not isinstance(cot, str):
            continue
        sft_file = sft_dir / f"{inp}__{cot}.jsonl"
        if sft_file not in hashes:
            hashes[sft_file] = file_sha256(sft_file) if sft_file.is_file() else None
        if hashes[sft_file] not in (None, recorded):
            raise LakeshiftError(stale_data_message(f"{preds.path}, line {pred.lineno}", recorded, sft_file))


#: Prediction metadata copied into scored records (other metadata stays in the predictions file).
META_FIELDS: tuple[str, ...] = ("model", "input_format", "cot_format", "split", "n_output_tokens", "policy")


def decoding_label(decoding: Mapping[str, Any]) -> str:
    """A predictions row's ``decoding`` in words: its preset (``frozen_ood``), ``greedy``, or
    ``sampled temperature=0.7 top_p=0.9 seed=0``."""
    if decoding.get("preset"):
        return str(decoding["preset"])
    if decoding.get("greedy", True):
        return "greedy"
    settings = (f"{k}={decoding.get(k)}" for k in ("temperature", "top_p", "seed"))
    return "sampled " + " ".join(settings)


def majority_index(plans: Sequence[Sequence[str]]) -> int | None:
    """The sample whose plan is the most frequent of ``plans`` (one per sample, in sample order; an empty
    plan does not vote), the first of them; among equally frequent plans, the one met first. ``None`` when
    no sample has a plan."""
    counts = Counter(tuple(p) for p in plans if p)
    if not counts:
        return None
    top = max(counts.values())
    return next(i for i, p in enumerate(plans) if p and counts[tuple(p)] == top)


def score_samples(sm: ScoringMap, outputs: Sequence[str], compat: str | None = None) -> dict[str, Any]:
    """pass@k and maj@k of one map's K sampled outputs (see "Repeated samples" in the module docstring).

    Returns:
        ``n_samples``, ``samples_success`` (how many succeed), ``pass_at_k`` and ``maj_at_k``.
    """
    scored = [score_output(sm, o, compat=compat, check_trace=False) for o in outputs]
    winner = majority_index([r.moves for r in scored])
    return {
        "n_samples": len(outputs),
        "samples_success": sum(r.success for r in scored),
        "pass_at_k": any(r.success for r in scored),
        "maj_at_k": winner is not None and scored[winner].success,
    }


def score_predictions(
    maps: Mapping[str, ScoringMap],
    preds: PredictionsFile,
    *,
    compat: str | None = None,
    check_trace: bool = True,
    defaults: Mapping[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Scored records for every map (file order), ``missing`` where the file has no prediction.

    Args:
        maps: The maps table.
        preds: The predictions read by :func:`read_predictions`.
        compat: Extraction mode.
        check_trace: Run the faithfulness check.
        defaults: Metadata for records that do not carry it (e.g. ``model`` from the run folder name).

    Yields:
        Scored records: ``id``, ``success``, ``verdict``, ``moves`` and the fields of :func:`judge`, the
        map's ``split``, ``size``, ``d_inf``, ``optimal_length``, the prediction's metadata
        (:data:`META_FIELDS`), its ``decoding`` (:func:`decoding_label`), ``n_output_chars`` and
        ``compat``; when the file has repeated samples, every record also has the fields of
        :func:`score_samples` (a record without ``samples`` counts its ``output`` as its one sample).
    """
    defaults = dict(defaults or {})
    # A map without a prediction belongs to the run all the others do: the model and formats they agree
    # on (a report would otherwise count an interrupted run's missing maps as a run of its own).
    run_meta = {**defaults, **_shared_meta(preds)}
    sampled = any("samples" in (p.meta or {}) for p in preds.predictions.values())
    no_samples = {"n_samples": 0, "samples_success": 0, "pass_at_k": False, "maj_at_k": False}
    missing = Extraction((), "missing", "no prediction for this map")
    no_output = Extraction((), "no_answer", "no output in the predictions record")
    for mid, sm in selected_maps(maps, preds).items():
        pred = preds.predictions.get(mid)
        rec: dict[str, Any] = {"id": mid}
        sample_fields: dict[str, Any] = no_samples
        if pred is None:
            meta = run_meta
            rec.update(judge(sm, missing).to_json())
            n_chars = None
        else:
            pm = pred.meta
            meta = {**defaults, **{k: pm[k] for k in META_FIELDS if k in pm}} if pm else defaults
            if pred.output is None:
                rec.update(judge(sm, no_output).to_json())
                if pm.get("duplicate"):
                    rec["detail"] = "duplicate id with different outputs"
                n_chars = 0
            else:
                cot = meta.get("cot_format")
                verdict = score_output(sm, pred.output, compat=compat, cot=cot, check_trace=check_trace)
                rec.update(verdict.to_json())
                n_chars = len(pred.output)
                if sampled:
                    outputs = [s["output"] for s in pm.get("samples") or [{"output": pred.output}]]
                    sample_fields = score_samples(sm, outputs, compat)
        r = sm.record
        rec["split"] = r.get("split", meta.get("split"))
        rec["size"] = r["size"]
        rec["d_inf"] = r["d_inf"]
        rec["optimal_length"] = sm.optimal_length
        for key in ("model", "input_format", "cot_format", "policy"):
            if key in meta:
                rec[key] = meta[key]
        rec["n_output_tokens"] = meta.get("n_output_tokens")
        rec["n_output_chars"] = n_chars
        rec["compat"] = compat
        if pred is not None and isinstance(pred.meta.get("decoding"), Mapping):
            rec["decoding"] = decoding_label(pred.meta["decoding"])
        if sampled:
            rec.update(sample_fields)
        yield rec


def _shared_meta(preds: PredictionsFile) -> dict[str, Any]:
    """The run metadata (model, formats, policy) that every prediction of a file agrees on."""
    shared: dict[str, Any] = {}
    metas = [p.meta or {} for p in preds.predictions.values()]
    for key in ("model", "input_format", "cot_format", "policy"):
        values = {m.get(key) for m in metas}
        if len(values) == 1 and None not in values:
            shared[key] = values.pop()
    return shared


def selected_maps(maps: Mapping[str, ScoringMap], preds: PredictionsFile) -> Mapping[str, ScoringMap]:
    """The maps a predictions file is meant to answer: the union of the subsets named by its records'
    ``selection`` fields (``lakeshift predict --per-size/--sizes/--limit``, see
    :func:`lakeshift.suites.select_maps`), or every map as soon as one record has no selection."""
    selections = []
    for p in preds.predictions.values():
        selection = (p.meta or {}).get("selection")
        if not isinstance(selection, Mapping) or not selection:
            return maps
        if selection not in selections:
            selections.append(selection)
    if not selections:
        return maps
    from lakeshift.suites import select_maps

    records = [sm.record for sm in maps.values()]
    wanted: set[str] = set()
    for sel in selections:
        chosen = select_maps(
            records, sizes=sel.get("sizes"), per_size=sel.get("per_size"), limit=sel.get("limit")
        )
        wanted.update(str(rec["id"]) for rec in chosen)
    return {mid: sm for mid, sm in maps.items() if mid in wanted}


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts for a one-screen summary: total, successes, verdicts, accuracy per size; with repeated
    samples, ``samples``: the sample counts seen (``k``) and the maps passed and won by majority."""
    total = 0
    ok = 0
    verdicts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    by_size: dict[int, list[int]] = {}
    samples: dict[str, Any] = {"k": set(), "pass": 0, "maj": 0}
    for rec in records:
        total += 1
        ok += bool(rec["success"])
        if "pass_at_k" in rec:
            samples["k"].add(rec["n_samples"])
            samples["pass"] += bool(rec["pass_at_k"])
            samples["maj"] += bool(rec["maj_at_k"])
        verdicts[rec["verdict"]] = verdicts.get(rec["verdict"], 0) + 1
        cell = by_size.setdefault(int(rec["size"]), [0, 0])
        cell[0] += bool(rec["success"])
        cell[1] += 1
    out = {"n": total, "success": ok, "verdicts": verdicts, "by_size": dict(sorted(by_size.items()))}
    if samples["k"]:
        samples["k"] = sorted(samples["k"] - {0})
        out["samples"] = samples
    return out
