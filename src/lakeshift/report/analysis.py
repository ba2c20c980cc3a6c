"""Aggregating scored records: accuracies with Wilson intervals, averages as the paper computes them, lengths.

Every function takes scored records (:class:`lakeshift.scoring.ScoredRecord`, the rows ``lakeshift score``
writes) and groups them by record attributes. A *run* is one model configuration, keyed by
``(model, input_format, cot_format)``.

Averages: the paper's "Avg" columns are the **mean over sizes** (or over ``d_inf`` values in Table 3) of the
per-size accuracies (:func:`macro_mean`); we also give the **pooled** accuracy over all maps of the group,
with its Wilson interval. ``missing`` records count as failures in every denominator.

Lengths: tokens when every scored output of the group carries ``n_output_tokens``, else characters
(:func:`length_unit`); Table 5 / 10 average over **correct** answers only, like the paper.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakeshift.scoring import VERDICTS, ScoredRecord

Z95 = 1.959963984540054
RunKey = tuple[str, str, str]

#: Display order of input and CoT formats (the paper's Table 1 order); unknown values sort last.
INPUT_ORDER: tuple[str, ...] = ("baseline", "image", "desc", "table", "grid")
COT_ORDER: tuple[str, ...] = (
    "zero-shot", "none", "desc", "grid", "table", "grid+desc", "table+desc", "astar", "coords", "wave",
)  # fmt: skip
#: Test splits of the paper suite, in table order.
TEST_SPLITS: tuple[str, ...] = ("id-test", "ood-size", "ood-dist", "embed10-test")


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes out of ``n`` (``(0.0, 1.0)`` when ``n == 0``)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # At k == 0 or k == n the bound is exactly 0 or 1; rounding error would leave 0.99999...
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


@dataclass
class Cell:
    """Counts for one group of records.

    Attributes:
        n: Records (maps) in the group.
        k: Successes.
        verdicts: Count per verdict.
        lengths: Output lengths of scored outputs (``missing`` excluded).
        correct_lengths: Output lengths of successful outputs.
        tokens: Every length is a token count (else characters).
        faithful: CoT traces found faithful (of ``traced``).
        traced: Records with a CoT faithfulness check.
        first_move_ok: Plans whose first move lies on a shortest path (partial credit).
        progress: Sum of the records' ``progress`` clipped at 0: the share of the start-goal distance
            covered, none for a plan that ends farther away (the scorer's signed value, which GRPO's reward
            uses, would read as less than nothing and pull a mean below 0).
        sampled: Records with repeated samples (``pass_at_k``), ``pass_k`` and ``maj_k`` of them passed
            and won by majority, ``ks`` their sample counts (:func:`lakeshift.scoring.score_samples`).
    """

    n: int = 0
    k: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    lengths: list[float] = field(default_factory=list)
    correct_lengths: list[float] = field(default_factory=list)
    tokens: bool = True
    faithful: int = 0
    traced: int = 0
    first_move_ok: int = 0
    progress: float = 0.0
    sampled: int = 0
    pass_k: int = 0
    maj_k: int = 0
    ks: set[int] = field(default_factory=set)

    def add(self, rec: ScoredRecord) -> None:
        self.n += 1
        ok = bool(rec.success)
        self.k += ok
        verdict = rec.verdict
        self.verdicts[verdict] = self.verdicts.get(verdict, 0) + 1
        if verdict != "missing":
            length: float | None = rec.n_output_tokens
            if length is None:
                self.tokens = False
                length = rec.n_output_chars
            if length is not None:
                self.lengths.append(float(length))
                if ok:
                    self.correct_lengths.append(float(length))
        self.first_move_ok += bool(rec.first_move_optimal)
        self.progress += max(0.0, float(rec.progress or 0.0))
        if rec.trace is not None and rec.trace.faithful is not None:
            self.traced += 1
            self.faithful += bool(rec.trace.faithful)
        if rec.samples is not None:
            self.sampled += 1
            self.pass_k += bool(rec.samples.pass_at_k)
            self.maj_k += bool(rec.samples.maj_at_k)
            if rec.samples.n_samples:
                self.ks.add(int(rec.samples.n_samples))

    @property
    def acc(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def pass_rate(self) -> float | None:
        """pass@k: the share of maps one of whose samples succeeds (``None`` without samples)."""
        return self.pass_k / self.sampled if self.sampled else None

    @property
    def maj_rate(self) -> float | None:
        """maj@k: the share of maps whose most frequent plan succeeds (``None`` without samples)."""
        return self.maj_k / self.sampled if self.sampled else None

    @property
    def k_label(self) -> str:
        """The sample count K (``"2-4"`` when records differ; empty without samples)."""
        if not self.ks:
            return ""
        lo, hi = min(self.ks), max(self.ks)
        return str(lo) if lo == hi else f"{lo}-{hi}"

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.k, self.n)

    @property
    def first_move_rate(self) -> float | None:
        return self.first_move_ok / self.n if self.n else None

    @property
    def mean_progress(self) -> float | None:
        return self.progress / self.n if self.n else None

    @property
    def mean_length(self) -> float | None:
        return sum(self.lengths) / len(self.lengths) if self.lengths else None

    @property
    def mean_correct_length(self) -> float | None:
        return sum(self.correct_lengths) / len(self.correct_lengths) if self.correct_lengths else None

    def row(self) -> dict[str, Any]:
        """Flat fields for CSV: n, k, acc, lo, hi, lengths, faithfulness, one column per verdict and, with
        repeated samples, ``samples`` (K), ``pass_at_k`` and ``maj_at_k``."""
        lo, hi = self.interval
        out: dict[str, Any] = {
            "n": self.n,
            "k": self.k,
            "acc": _r(self.acc),
            "lo": _r(lo),
            "hi": _r(hi),
            "mean_length": _r(self.mean_length, 1),
            "mean_correct_length": _r(self.mean_correct_length, 1),
            "length_unit": "tokens" if self.tokens else "chars",
            "faithful_rate": _r(self.faithful / self.traced) if self.traced else None,
            "first_move_rate": _r(self.first_move_rate),
            "mean_progress": _r(self.mean_progress),
        }
        for v in VERDICTS:
            out[v] = self.verdicts.get(v, 0)
        if self.sampled:
            out.update(samples=self.k_label, pass_at_k=_r(self.pass_rate), maj_at_k=_r(self.maj_rate))
        return out


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def run_key(rec: ScoredRecord) -> RunKey:
    """``(model, input_format, cot_format)`` with ``"?"`` for unknown parts."""
    return (str(rec.model or "?"), str(rec.input_format or "?"), str(rec.cot_format or "?"))


def run_sort_key(key: RunKey) -> tuple:
    """Paper order: input format, then model name, then CoT format."""
    model, inp, cot = key
    return (
        INPUT_ORDER.index(inp) if inp in INPUT_ORDER else len(INPUT_ORDER),
        inp,
        COT_ORDER.index(cot) if cot in COT_ORDER else len(COT_ORDER),
        cot,
        model,
    )


def group(records: Iterable[ScoredRecord], key: Callable[[ScoredRecord], Hashable]) -> dict[Hashable, Cell]:
    """Aggregates records into one :class:`Cell` per ``key(record)``."""
    cells: dict[Hashable, Cell] = {}
    for rec in records:
        k = key(rec)
        cell = cells.get(k)
        if cell is None:
            cell = cells[k] = Cell()
        cell.add(rec)
    return cells


def by_fields(records: Iterable[ScoredRecord], *fields: str) -> dict[tuple, Cell]:
    """One cell per ``(run key, *record attributes)``, e.g. ``by_fields(recs, "split", "size")``."""
    return group(records, lambda r: (run_key(r), *(getattr(r, f) for f in fields)))  # type: ignore[return-value]


def macro_mean(values: Iterable[float | None]) -> float | None:
    """Mean of the available values (the paper's "Avg" over sizes); ``None`` when there are none."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def pooled(cells: Iterable[Cell]) -> Cell:
    """One cell summing several (the pooled accuracy over a group of sizes)."""
    out = Cell()
    for c in cells:
        out.n += c.n
        out.k += c.k
        for v, cnt in c.verdicts.items():
            out.verdicts[v] = out.verdicts.get(v, 0) + cnt
        out.lengths += c.lengths
        out.correct_lengths += c.correct_lengths
        out.tokens = out.tokens and c.tokens
        out.faithful += c.faithful
        out.traced += c.traced
        out.sampled += c.sampled
        out.pass_k += c.pass_k
        out.maj_k += c.maj_k
        out.ks |= c.ks
    return out


def length_unit(cells: Iterable[Cell]) -> str:
    """``"tokens"`` if every cell counts tokens, else ``"chars"``."""
    return "tokens" if all(c.tokens for c in cells) else "chars"


def long_rows(cells: Mapping[tuple, Cell], names: Sequence[str]) -> list[dict[str, Any]]:
    """Long-form rows ``model, input_format, cot_format, <names...>, n, k, acc, lo, hi, ...`` sorted."""
    rows = []
    for key in sorted(cells, key=lambda k: (run_sort_key(k[0]), *(_sortable(x) for x in k[1:]))):
        model, inp, cot = key[0]
        row: dict[str, Any] = {"model": model, "input_format": inp, "cot_format": cot}
        row.update(dict(zip(names, key[1:], strict=True)))
        row.update(cells[key].row())
        rows.append(row)
    return rows


def _sortable(x: Any) -> tuple:
    return (0, x, "") if isinstance(x, (int, float)) else (1, 0, str(x))


def training_lengths(train_maps: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """Histogram ``{optimal_length: count}`` of a training split (paper Figure 4, top)."""
    hist: dict[int, int] = {}
    for rec in train_maps:
        length = rec.get("optimal_length")
        if length is not None:
            hist[int(length)] = hist.get(int(length), 0) + 1
    return dict(sorted(hist.items()))
