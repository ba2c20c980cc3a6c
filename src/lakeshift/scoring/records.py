"""Scored records: the typed form of one row of ``lakeshift score`` output (``report/scored/<run>.jsonl``).

The scorer (:func:`lakeshift.scoring.score_predictions`) yields :class:`ScoredRecord` objects; reports and
summaries read their attributes. Dicts appear only where records meet files: :meth:`ScoredRecord.to_json`
gives the row that is written, :meth:`ScoredRecord.from_json` reads one back.

Layout of a row, in key order (``?``: only when the record has it):

* ``id``, then the fields of :meth:`lakeshift.scoring.Verdict.to_json` (``success``, ``verdict``, ``moves``,
  ``n_moves``, ``optimal``, ``first_move_optimal``, ``off_edge_moves``, ``progress``, ``fell_at``,
  ``reached_goal_at``, ``final``, ``detail``) and ``trace_*``? (:class:`lakeshift.scoring.TraceCheck`);
* the map's ``split``, ``size``, ``d_inf``, ``optimal_length``;
* the run's ``model``?, ``input_format``?, ``cot_format``?, ``policy``?;
* ``n_output_tokens``, ``n_output_chars``, ``compat``, ``decoding``?;
* ``n_samples``?, ``samples_success``?, ``pass_at_k``?, ``maj_at_k``? (:class:`SampleScore`: all or none),
  and ``n_samples_asked``? when the row holds fewer samples than it asked;
* any other keys (:attr:`ScoredRecord.extra`), in their order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.scoring.verdicts import TraceCheck, Verdict


@dataclass(frozen=True)
class SampleScore:
    """pass@k and maj@k of one map's repeated samples (:func:`lakeshift.scoring.score_samples`); in files,
    the fields of the same names.

    Attributes:
        n_samples: Samples scored (0 for a map without a prediction).
        samples_success: How many of them succeed.
        pass_at_k: Some sample succeeds.
        maj_at_k: The most frequent plan succeeds (:func:`lakeshift.scoring.majority_index`).
        n_samples_asked: The samples the row asked (its ``n_samples``) when it holds fewer, so pass@k and
            maj@k were computed over ``n_samples`` < k; ``None`` when every sample asked is there.
    """

    n_samples: int
    samples_success: int
    pass_at_k: bool
    maj_at_k: bool
    n_samples_asked: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The sample fields of a scored record (``n_samples_asked`` only when samples are missing)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.n_samples_asked is None:
            del out["n_samples_asked"]
        return out


_VERDICT_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Verdict) if f.name != "trace")
_TRACE_KEYS: tuple[str, ...] = tuple(f"trace_{f.name}" for f in fields(TraceCheck))
_SAMPLE_KEYS: tuple[str, ...] = tuple(f.name for f in fields(SampleScore) if f.name != "n_samples_asked")
_MAP_KEYS: tuple[str, ...] = ("split", "size", "d_inf", "optimal_length")
_RUN_KEYS: tuple[str, ...] = ("model", "input_format", "cot_format", "policy")
_OUTPUT_KEYS: tuple[str, ...] = ("n_output_tokens", "n_output_chars", "compat")
#: Keys every scored record has.
REQUIRED_KEYS: tuple[str, ...] = ("id", *_VERDICT_KEYS, *_MAP_KEYS, *_OUTPUT_KEYS)
#: Keys a scored record has only when it carries a value for them (a null one is kept in ``extra``).
OPTIONAL_KEYS: tuple[str, ...] = (*_RUN_KEYS, "decoding")
_KNOWN = frozenset((*REQUIRED_KEYS, *_TRACE_KEYS, *_SAMPLE_KEYS, "n_samples_asked", *OPTIONAL_KEYS))


@dataclass(frozen=True)
class ScoredRecord:
    """One scored map: the verdict on its prediction, the map's facts and the run's metadata.

    The fields of :class:`lakeshift.scoring.Verdict` are flat attributes of the record (``success``,
    ``verdict``, ``moves``, ...; ``detail`` may differ from the verdict's, e.g. for a duplicate id). The
    module docstring gives the row it is written as.

    Attributes:
        id: The map id.
        split: The map's split (``None`` when neither the map nor the prediction names one).
        size: The map's side.
        d_inf: Its start-goal Chebyshev distance.
        optimal_length: Its shortest plan's length (``None`` for an unsolvable map).
        n_output_tokens: The prediction's token count (``None`` when it has none).
        n_output_chars: Its output's length in characters (``None`` for a map without a prediction).
        compat: The extraction mode it was scored with.
        trace: The CoT faithfulness check, when one was run.
        model: The run's model (``None`` when unknown).
        input_format: The run's input format (``None`` when unknown).
        cot_format: The run's CoT format (``None`` when unknown).
        policy: The reference policy that wrote the prediction (``None`` for a model).
        decoding: The prediction's decoding in words (:func:`lakeshift.scoring.decoding_label`).
        samples: pass@k and maj@k, when the predictions file has repeated samples.
        extra: The row's other keys, in order: keys this class does not know, and the keys of
            :data:`OPTIONAL_KEYS` written as null (they keep their place in the row).
    """

    id: str
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
    split: str | None
    size: int
    d_inf: int
    optimal_length: int | None
    n_output_tokens: int | None
    n_output_chars: int | None
    compat: str | None
    trace: TraceCheck | None = None
    model: str | None = None
    input_format: str | None = None
    cot_format: str | None = None
    policy: str | None = None
    decoding: str | None = None
    samples: SampleScore | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @classmethod
    def of(cls, map_id: str, verdict: Verdict, **values: Any) -> ScoredRecord:
        """The record of map ``map_id`` judged ``verdict``; ``values`` are the other attributes."""
        return cls(id=map_id, **{f.name: getattr(verdict, f.name) for f in fields(verdict)}, **values)

    @classmethod
    def from_json(cls, row: Mapping[str, Any], where: str = "scored record") -> ScoredRecord:
        """Reads a row as written by :meth:`to_json` (a line of a scored file, parsed).

        Args:
            row: The row.
            where: Where it comes from, for error messages (e.g. ``"scored.jsonl, line 3"``).

        Raises:
            LakeshiftError: the row is not an object, lacks a field every record has (named), has only part
                of the ``trace_*`` or sample fields, or has ``moves`` or ``final`` that are not lists.
        """
        if not isinstance(row, Mapping):
            raise LakeshiftError(f"{where}: expected a JSON object, got {type(row).__name__}")
        for key in REQUIRED_KEYS:
            if key not in row:
                raise LakeshiftError(f"{where}: missing field {key!r}")
        for key in ("moves", "final"):
            if not isinstance(row[key], list):
                raise LakeshiftError(f"{where}: field {key!r} is not a list ({row[key]!r})")
        values = {k: row[k] for k in REQUIRED_KEYS}
        values["moves"], values["final"] = tuple(row["moves"]), tuple(row["final"])
        trace = _group(row, _TRACE_KEYS, where)
        samples = _group(row, _SAMPLE_KEYS, where)
        extra = {k: v for k, v in row.items() if k not in _KNOWN or (k in OPTIONAL_KEYS and v is None)}
        return cls(
            **values,
            trace=TraceCheck.from_fields(row) if trace else None,
            samples=SampleScore(
                **{k: row[k] for k in _SAMPLE_KEYS}, n_samples_asked=row.get("n_samples_asked")
            )
            if samples
            else None,
            **{k: row[k] for k in OPTIONAL_KEYS if row.get(k) is not None},
            extra=extra,
        )

    def to_json(self) -> dict[str, Any]:
        """The row of a scored file: keys in the order of the module docstring (lists for tuples)."""
        out: dict[str, Any] = {"id": self.id}
        out.update((k, getattr(self, k)) for k in _VERDICT_KEYS)
        out["moves"], out["final"] = list(self.moves), list(self.final)
        if self.trace is not None:
            out.update(self.trace.to_json())
        out.update((k, getattr(self, k)) for k in _MAP_KEYS)
        self._optional(out, _RUN_KEYS)
        out.update((k, getattr(self, k)) for k in _OUTPUT_KEYS)
        self._optional(out, ("decoding",))
        if self.samples is not None:
            out.update(self.samples.to_json())
        out.update((k, v) for k, v in self.extra.items() if k not in out and k not in OPTIONAL_KEYS)
        return out

    def _optional(self, out: dict[str, Any], keys: tuple[str, ...]) -> None:
        for key in keys:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
            elif key in self.extra:
                out[key] = self.extra[key]


def _group(row: Mapping[str, Any], keys: tuple[str, ...], where: str) -> bool:
    """Whether ``row`` has the fields ``keys`` (all of them, or none)."""
    present = [k for k in keys if k in row]
    if present and len(present) < len(keys):
        missing = next(k for k in keys if k not in row)
        raise LakeshiftError(f"{where}: missing field {missing!r} (the row has {present[0]!r})")
    return bool(present)
