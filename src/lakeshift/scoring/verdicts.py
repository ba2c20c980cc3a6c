"""One verdict per prediction: the plan simulated on its map under the environment's rules, and its facts."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from lakeshift.env import DELTAS, FrozenLakeMap
from lakeshift.errors import ArgumentError, LakeshiftError, check_choice, shown
from lakeshift.scoring.extraction import VSP_MAX_STEPS, Extraction, extract
from lakeshift.scoring.trace_checks import faithfulness, guess_cot
from lakeshift.traces.vocabulary import COT_FORMATS, TRACE_COTS

VERDICTS: tuple[str, ...] = (
    "success",
    "fell_in_hole",
    "stopped_short",
    "passed_goal",
    "unparseable",
    "no_answer",
    "missing",
)


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
    """Builds a :class:`ScoringMap` from one ``maps.jsonl`` record (with ``maps.map_from_record``).

    Raises:
        LakeshiftError: ``rec`` is not a mapping, lacks ``id`` or ``rows`` or describes an invalid map.
    """
    from lakeshift.data.maps import map_from_record
    from lakeshift.data.records import require_record

    require_record(rec, "rec")
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
    """Reads ``maps.jsonl`` (:func:`lakeshift.data.maps.load_maps`) into ``{id: ScoringMap}`` in file order.

    Raises:
        LakeshiftError: missing file, malformed line or field, invalid map, duplicate id, or no maps.
    """
    from lakeshift.data.maps import load_maps

    return {str(rec["id"]): scoring_map(rec, f"{path}, map {i}") for i, rec in enumerate(load_maps(path), 1)}


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
        verdict: One of :data:`VERDICTS` (package docstring, "Rules and verdicts").
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
    sm: ScoringMap | FrozenLakeMap | Mapping[str, Any],
    output: str,
    *,
    compat: str | None = None,
    cot: str | None = None,
    check_trace: bool = True,
) -> Verdict:
    r"""Scores one raw output against one map.

    Args:
        sm: The map: a :class:`ScoringMap`, a :class:`FrozenLakeMap` or a ``maps.jsonl`` record.
        output: The model's raw text.
        compat: Extraction mode (see :data:`COMPAT_MODES`).
        cot: The CoT format of the output (``traces.COT_FORMATS``); ``None`` guesses it from the text.
        check_trace: Run the faithfulness check on traces (see :func:`faithfulness`).

    Returns:
        The :class:`Verdict`, with its :class:`TraceCheck` when the trace was checked.

    Raises:
        LakeshiftError: ``sm`` that is none of the three or an invalid map, ``output`` that is not a
            string, or ``compat`` or ``cot`` that is not one of its names.

    Example:
        >>> from lakeshift import FrozenLakeMap, completion, score_output
        >>> lake = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
        >>> score_output(lake, r"The answer: \boxed{LEFT, UP, UP, RIGHT}").verdict
        'success'
        >>> verdict = score_output({"id": "figure-3", "rows": ["FGF", "FHF", "FSH"]}, r"\boxed{U}")
        >>> verdict.verdict, verdict.fell_at
        ('fell_in_hole', 1)
        >>> trace = completion(lake, ["LEFT", "UP", "UP", "RIGHT"], "grid")
        >>> score_output(lake, trace).trace.faithful
        True
    """
    if cot is not None:
        check_choice("cot", cot, COT_FORMATS, "CoT format")
    if not isinstance(output, str):
        raise ArgumentError(f"output must be a string (the model's text), got {shown(output)}")
    if isinstance(sm, FrozenLakeMap):
        sm = ScoringMap("map", sm, {"size": sm.size, "d_inf": sm.d_inf})
    elif isinstance(sm, Mapping):
        sm = scoring_map({"id": "map", **sm})
    elif not isinstance(sm, ScoringMap):
        raise ArgumentError(
            f"sm must be a ScoringMap, a FrozenLakeMap or a maps.jsonl record (a mapping), got {shown(sm)}"
        )
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
