"""Reports: the paper's tables (Markdown, CSV, LaTeX), plots (PNG + SVG) and a self-contained ``report.html``.

:func:`build_report` scores every run (a predictions file with its maps file), adds the reference policies
of :mod:`lakeshift.baselines` for every maps file seen (on the maps the models of that file were asked,
e.g. the ``--per-size`` subset, so that baseline and model rows share their n), and writes into ``out_dir``:

* ``table1.*`` (accuracy, rows input x CoT x model; ID 3-6, OOD ``ood-size`` 7-10, OOD ``ood-dist`` 7-10,
  each with ``Avg`` = mean over sizes as in the paper and ``Pooled`` = all maps of the group),
  ``table3.*`` (``embed10-test`` by ``d_inf`` 2-5 / 6-9), ``table5.*`` (mean length of correct outputs per
  group, mean over sizes), ``table10.*`` (the same per size), ``table5_all.*`` (all outputs), ``verdicts.*``
  (verdict shares and partial credit per run and split) and ``faithfulness.*`` (CoT traces);
* long-form CSVs with counts and 95% Wilson intervals: ``by_size.csv``, ``by_dinf.csv``, ``by_length.csv``;
* plots ``fig_accuracy_vs_length``, ``fig_accuracy_vs_dinf``, ``fig_accuracy_vs_size``, ``fig_verdicts``
  (``.png`` and ``.svg``), small multiples readable at 20 runs: a row of panels per input format with shared
  axes, colour = CoT format (the same in every figure), marker = run of the same formats, legends beside the
  panels (never over data), reference policies grey, 95% Wilson bands only over points of
  :data:`BAND_MIN_N` maps or more in panels of at most :data:`BAND_MAX_LINES` lines;
* ``scored/<run>.jsonl`` (one scored record per map), ``report.html`` and ``warnings.txt``.

With ``reference="paper"`` (:mod:`lakeshift.references`) the paper's published Qwen2.5-VL-7B numbers are
added as rows of Tables 1, 3 and 5, labelled ``paper: Qwen2.5-VL-7B`` (moved aside if a local run has that
name), with the columns the paper does not report (``Pooled``, the embedded column of Table 5) empty, and
as dashed curves where the x-axis matches: accuracy vs size (Table 1) and vs d_inf on ``embed10-test``
(Table 3), for the formats run locally (all of them with no local run).

Decoding: a run whose predictions were not decoded greedily is named ``<model>@<decoding>`` (e.g.
``grid__none@frozen_ood``; :func:`lakeshift.scoring.decoding_label`), so one model decoded two ways gives two
rows, never one pooled row; ``report.html``'s summary lists the decodings seen. Repeated samples
(``lakeshift predict --samples``) add pass@k and maj@k to the summary table and the long-form CSVs.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeshift import analysis
from lakeshift.analysis import Cell, RunKey, run_key, run_sort_key
from lakeshift.errors import LakeshiftError
from lakeshift.io import atomic_write, write_jsonl
from lakeshift.references import Reference
from lakeshift.scoring import VERDICTS, ScoringMap, load_scoring_maps, score_predictions
from lakeshift.shards import read_prediction_set

INPUT_NAMES = {"image": "Image", "desc": "Descr.", "table": "Table", "grid": "Grid", "baseline": "Baseline"}
COT_NAMES = {
    "zero-shot": "zero-shot",
    "none": "no CoT",
    "desc": "Descr.",
    "grid": "Grid",
    "table": "Table",
    "grid+desc": "Grid + Descr.",
    "table+desc": "Table + Descr.",
}
#: Table 1 column groups: (header, short name, split, sizes).
TABLE1_GROUPS: tuple[tuple[str, str, str, tuple[int, ...]], ...] = (
    ("ID test maps (d_inf <= 5)", "ID", "id-test", (3, 4, 5, 6)),
    ("OOD maps (random d_inf)", "OOD", "ood-size", (7, 8, 9, 10)),
    ("OOD maps (d_inf >= 6)", "OOD d>=6", "ood-dist", (7, 8, 9, 10)),
)
#: Table 3 column groups on ``embed10-test``: (header, short name, d_inf values).
TABLE3_GROUPS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("ID test maps (d_inf <= 5)", "ID", (2, 3, 4, 5)),
    ("OOD maps (d_inf >= 6)", "OOD", (6, 7, 8, 9)),
)
EMBED_SPLIT = "embed10-test"


# --------------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------------
@dataclass
class Table:
    """A wide table: label columns, then value columns under group headers.

    Attributes:
        name: File stem (``table1``).
        title: Caption.
        label_columns: Names of the row-label columns.
        groups: ``(header, n_columns)`` over the value columns.
        columns: Value column names (``3x3``, ``Avg``...).
        rows: ``(labels, values)``; ``None`` values print as ``-``.
        digits: Decimals shown (``0`` for lengths).
        short: Short group names used to make flat column names (``ID 3x3``).
    """

    name: str
    title: str
    label_columns: list[str]
    groups: list[tuple[str, int]]
    columns: list[str]
    rows: list[tuple[list[str], list[float | None]]]
    digits: int = 2
    short: list[str] = field(default_factory=list)
    int_columns: tuple[str, ...] = ()

    def flat_columns(self) -> list[str]:
        names = []
        i = 0
        for gi, (_, span) in enumerate(self.groups):
            prefix = self.short[gi] if gi < len(self.short) else ""
            for col in self.columns[i : i + span]:
                names.append(f"{prefix} {col}".strip())
            i += span
        return names

    def fmt(self, v: float | None, column: int | None = None) -> str:
        """A value as shown: ``-`` for none, integers for counts, else ``digits`` decimals."""
        if v is None:
            return "-"
        if not self.digits or (column is not None and self.columns[column] in self.int_columns):
            return str(round(v))
        return f"{v:.{self.digits}f}"

    def _cells(self, values: Sequence[float | None]) -> list[str]:
        return [self.fmt(v, i) for i, v in enumerate(values)]

    def to_markdown(self) -> str:
        head = self.label_columns + self.flat_columns()
        lines = [f"**{self.title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for labels, values in self.rows:
            lines.append("| " + " | ".join([*map(_md, labels), *self._cells(values)]) + " |")
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.label_columns + self.flat_columns())
        for labels, values in self.rows:
            w.writerow([*labels, *("" if v is None else round(v, 4) for v in values)])
        return buf.getvalue()

    def to_latex(self) -> str:
        nl = len(self.label_columns)
        spec = "l" * nl + "".join("|" + "c" * span for _, span in self.groups)
        lines = [
            "\\begin{table}[t]",
            "\\centering",
            "\\small",
            f"\\caption{{{_tex(self.title)}}}",
            f"\\begin{{tabular}}{{{spec}}}",
            "\\toprule",
            " & " * nl
            + " & ".join(f"\\multicolumn{{{span}}}{{c}}{{{_tex(h)}}}" for h, span in self.groups)
            + " \\\\",
            " & ".join([*(_tex(c) for c in self.label_columns), *(_tex(c) for c in self.columns)]) + " \\\\",
            "\\midrule",
        ]
        previous: list[str] = []
        for labels, values in self.rows:
            # Like the paper: a label repeated from the row above is left blank.
            shown = []
            same = True
            for i, lab in enumerate(labels):
                same = same and i < len(previous) and previous[i] == lab and i < nl - 1
                shown.append("" if same else _tex(lab))
            previous = labels
            lines.append(" & ".join([*shown, *(_tex(c) for c in self._cells(values))]) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        from html import escape

        nl = len(self.label_columns)
        head1 = f'<th colspan="{nl}"></th>' + "".join(
            f'<th colspan="{span}">{escape(h)}</th>' for h, span in self.groups
        )
        head2 = "".join(f"<th>{escape(c)}</th>" for c in [*self.label_columns, *self.columns])
        body = []
        for labels, values in self.rows:
            cells = "".join(f"<td>{escape(x)}</td>" for x in labels)
            cells += "".join(f'<td class="num">{c}</td>' for c in self._cells(values))
            body.append(f"<tr>{cells}</tr>")
        return (
            f'<table class="results" id="tbl-{escape(self.name)}"><caption>{escape(self.title)}</caption>'
            f"<thead><tr>{head1}</tr><tr>{head2}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )

    def write(self, out_dir: Path) -> list[Path]:
        """Writes ``<name>.md``, ``.csv`` and ``.tex``; returns the paths."""
        paths = []
        for ext, text in (("md", self.to_markdown()), ("csv", self.to_csv()), ("tex", self.to_latex())):
            path = out_dir / f"{self.name}.{ext}"
            with atomic_write(path) as f:
                f.write(text)
            paths.append(path)
        return paths


#: Markdown characters that could end a table cell or start formatting in a label (a model's name).
_MD_SPECIAL = set("\\|`*[]<>")
#: LaTeX's special characters, each replaced in one pass (so a backslash's braces are not escaped again).
_TEX_SPECIAL = {
    "\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_", "{": "\\{",
    "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}",
}  # fmt: skip


def _md(s: str) -> str:
    """A label as literal Markdown table-cell text (``|`` would split the cell, ``*`` start emphasis).

    ``_`` is escaped only where it could open or close emphasis (next to a space or an end of the label), so
    names such as ``grid__none`` stay as they are."""
    s = " ".join(str(s).splitlines())
    out = []
    for i, ch in enumerate(s):
        edge = i == 0 or i == len(s) - 1 or s[i - 1].isspace() or s[i + 1].isspace()
        out.append("\\" + ch if ch in _MD_SPECIAL or (ch == "_" and edge) else ch)
    return "".join(out)


def _tex(s: str) -> str:
    s = "".join(_TEX_SPECIAL.get(ch, ch) for ch in " ".join(str(s).splitlines()))
    return s.replace("d\\_inf", "$d_\\infty$").replace("<=", "$\\leq$").replace(">=", "$\\geq$")


def run_labels(key: RunKey) -> list[str]:
    """``[Input, CoT, Model]`` display labels of a run."""
    model, inp, cot = key
    return [INPUT_NAMES.get(inp, inp), COT_NAMES.get(cot, cot), model]


LABELS = ["Input format", "CoT format", "Model"]


def _sizes(cells: Mapping[tuple, Cell], split: str, default: Sequence[int]) -> list[int]:
    seen = {k[2] for k in cells if k[1] == split and k[2] is not None}
    return sorted(set(default) | {int(s) for s in seen}) if seen else list(default)


def table1(
    by_split_size: Mapping[tuple, Cell], runs: Sequence[RunKey], reference: Reference | None = None
) -> Table | None:
    """Paper Table 1: accuracy per map size, ``Avg`` (mean over sizes) and ``Pooled``, per run; with a
    ``reference``, its published rows too (every Table 1 column; ``Pooled`` left empty)."""
    title = "Accuracy on ID and OOD map sizes (Avg: mean over sizes as in the paper; Pooled: all maps)."
    return _size_table(
        by_split_size, runs, "table1", title + _ref_note(reference, "table1"), "acc", reference
    )


def table10(by_split_size: Mapping[tuple, Cell], runs: Sequence[RunKey], unit: str) -> Table | None:
    """Paper Table 10: mean length of correct outputs per map size."""
    return _size_table(
        by_split_size,
        runs,
        "table10",
        f"Mean output length of correct answers ({unit}) per map size (Avg: mean over sizes).",
        metric="correct_length",
    )


def _ref_note(reference: Reference | None, part: str) -> str:
    if reference is None:
        return ""
    return (
        f" Rows '{reference.label}': published values ({reference.sources.get(part, part)} of "
        f"{reference.citation.split('. ')[0]}), not a local run; columns it does not report are empty."
    )


def ordered_runs(runs: Iterable[RunKey], reference: Reference | None) -> list[RunKey]:
    """Paper order (input, CoT), a reference row right after the local rows of the same formats."""
    return sorted(
        iter_unique(runs),
        key=lambda k: (*run_sort_key(k)[:4], reference is not None and reference.is_key(k), k[0]),
    )


def _size_table(
    by_split_size: Mapping[tuple, Cell],
    runs: Sequence[RunKey],
    name: str,
    title: str,
    metric: str,
    reference: Reference | None = None,
) -> Table | None:
    ref = reference if metric == "acc" else None
    groups, columns, short, spec = [], [], [], []
    for header, sname, split, default in TABLE1_GROUPS:
        if not any(k[1] == split for k in by_split_size) and ref is None:
            continue
        sizes = _sizes(by_split_size, split, default)
        extra = ["Avg", "Pooled"] if metric == "acc" else ["Avg"]
        groups.append((header, len(sizes) + len(extra)))
        columns += [f"{s}x{s}" for s in sizes] + extra
        short.append(sname)
        spec.append((split, sizes))
    if not groups:
        return None
    rows = []
    ref_keys = [ref.key(i, c) for i, c in ref.formats("table1")] if ref else []
    for run in ordered_runs([*runs, *ref_keys], ref):
        values: list[float | None] = []
        if ref is not None and ref.is_key(run):
            for split, sizes in spec:
                values += [ref.acc_by_size.get((run[1], run[2], split, s)) for s in sizes]
                values += [ref.avg_by_split.get((run[1], run[2], split)), None]
            rows.append((run_labels(run), values))
            continue
        if not any((run, split, s) in by_split_size for split, sizes in spec for s in sizes):
            continue
        for split, sizes in spec:
            cells = [by_split_size.get((run, split, s)) for s in sizes]
            vals = [_metric(c, metric) for c in cells]
            values += vals
            values.append(analysis.macro_mean(vals))
            if metric == "acc":
                present = [c for c in cells if c is not None]
                values.append(analysis.pooled(present).acc if present else None)
        rows.append((run_labels(run), values))
    return Table(name, title, LABELS, groups, columns, rows, 2 if metric == "acc" else 0, short)


def _metric(cell: Cell | None, metric: str) -> float | None:
    if cell is None:
        return None
    if metric == "acc":
        return cell.acc
    if metric == "correct_length":
        return cell.mean_correct_length
    return cell.mean_length


def table5(
    by_split_size: Mapping[tuple, Cell],
    runs: Sequence[RunKey],
    unit: str,
    correct_only: bool = True,
    reference: Reference | None = None,
) -> Table | None:
    """Paper Table 5: mean output length per group of splits (mean over sizes of per-size means); with a
    ``reference`` (correct outputs only, as the paper), its published rows too."""
    ref = reference if correct_only else None
    metric = "correct_length" if correct_only else "length"
    spec = [
        (h, s, split)
        for h, s, split, _ in TABLE1_GROUPS
        if any(k[1] == split for k in by_split_size) or ref is not None
    ]
    if any(k[1] == EMBED_SPLIT for k in by_split_size):
        spec.append(("10x10 embedded", "embed10", EMBED_SPLIT))
    if not spec:
        return None
    rows = []
    ref_keys = [ref.key(i, c) for i, c in ref.formats("table5")] if ref else []
    for run in ordered_runs([*runs, *ref_keys], ref):
        if ref is not None and ref.is_key(run):
            rows.append(
                (run_labels(run), [ref.length_by_split.get((run[1], run[2], sp)) for _, _, sp in spec])
            )
            continue
        values = []
        for _, _, split in spec:
            cells = [c for k, c in by_split_size.items() if k[0] == run and k[1] == split]
            values.append(analysis.macro_mean(_metric(c, metric) for c in cells) if cells else None)
        if any(v is not None for v in values) or any(k[0] == run for k in by_split_size):
            rows.append((run_labels(run), values))
    what = "correct answers" if correct_only else "all outputs"
    name = "table5" if correct_only else "table5_all"
    title = f"Mean output length of {what} ({unit}; mean over map sizes)."
    if ref is not None:
        title += _ref_note(ref, "table5") + f" The paper's lengths are {ref.length_unit} of Qwen2.5-VL."
    return Table(name, title, LABELS, [("Mean length", len(spec))], [h for h, _, _ in spec], rows, 0)


def table3(
    by_split_dinf: Mapping[tuple, Cell], runs: Sequence[RunKey], reference: Reference | None = None
) -> Table | None:
    """Paper Table 3: accuracy on ``embed10-test`` per ``d_inf`` (Avg: mean over d_inf values); with a
    ``reference``, its published rows too (``Pooled`` left empty)."""
    if not any(k[1] == EMBED_SPLIT for k in by_split_dinf) and reference is None:
        return None
    seen = {int(k[2]) for k in by_split_dinf if k[1] == EMBED_SPLIT}
    groups, columns, short, spec = [], [], [], []
    for header, sname, values in TABLE3_GROUPS:
        lo, hi = min(values), max(values)
        ds = sorted(set(values) | {d for d in seen if (d <= hi if sname == "ID" else d >= lo)})
        groups.append((header, len(ds) + 2))
        columns += [str(d) for d in ds] + ["Avg", "Pooled"]
        short.append(sname)
        spec.append((sname, ds))
    rows = []
    ref_keys = [reference.key(i, c) for i, c in reference.formats("table3")] if reference else []
    for run in ordered_runs([*runs, *ref_keys], reference):
        vals: list[float | None] = []
        if reference is not None and reference.is_key(run):
            for sname, ds in spec:
                vals += [reference.acc_by_dinf.get((run[1], run[2], d)) for d in ds]
                vals += [reference.avg_by_dinf_group.get((run[1], run[2], sname)), None]
            rows.append((run_labels(run), vals))
            continue
        if not any(k[0] == run and k[1] == EMBED_SPLIT for k in by_split_dinf):
            continue
        for _, ds in spec:
            cells = [by_split_dinf.get((run, EMBED_SPLIT, d)) for d in ds]
            accs = [c.acc if c else None for c in cells]
            present = [c for c in cells if c is not None]
            vals += [*accs, analysis.macro_mean(accs), analysis.pooled(present).acc if present else None]
        rows.append((run_labels(run), vals))
    title = "Accuracy on 10x10 embedded maps per start-goal distance d_inf (Avg: mean over d_inf values)."
    return Table("table3", title + _ref_note(reference, "table3"), LABELS, groups, columns, rows, 2, short)


def verdict_table(by_split: Mapping[tuple, Cell], runs: Sequence[RunKey]) -> Table:
    """Share of each verdict per run and split (reads a drop in accuracy as holes vs stops vs no answer),
    with partial credit that reads models too weak to succeed: the share of maps whose plan starts on a
    shortest path, and the mean share of the start-goal distance covered."""
    rows = []
    splits = sorted({k[1] for k in by_split}, key=_split_order)
    for run in runs:
        for split in splits:
            cell = by_split.get((run, split))
            if cell is None:
                continue
            shares = [cell.verdicts.get(v, 0) / cell.n if cell.n else None for v in VERDICTS]
            partial = [cell.first_move_rate, cell.mean_progress]
            rows.append(([*run_labels(run), str(split)], [float(cell.n), *shares, *partial]))
    return Table(
        "verdicts",
        "Verdict breakdown (share of maps) per run and split; partial credit: share of maps whose plan "
        "starts on a shortest path, mean share of the start-goal distance covered.",
        [*LABELS, "Split"],
        [("", 1), ("Verdict share", len(VERDICTS)), ("Partial credit", 2)],
        ["n", *VERDICTS, "first move", "progress"],
        rows,
        2,
        int_columns=("n",),
    )


def split_table(by_split: Mapping[tuple, Cell], runs: Sequence[RunKey]) -> Table | None:
    """Accuracy per run and split, pooled over sizes, with 95% Wilson intervals and n: how far a skill
    learned in distribution carries out of it, next to the baselines on the same maps. With repeated
    samples anywhere, pass@k and maj@k beside them (empty for runs without samples)."""
    splits = sorted({k[1] for k in by_split}, key=_split_order)
    sampled = any(c.sampled for c in by_split.values())
    columns = ["acc", "lo", "hi", "n", *(("pass@k", "maj@k") if sampled else ())]
    rows = []
    for run in runs:
        values: list[float | None] = []
        for split in splits:
            cell = by_split.get((run, split))
            if not cell or not cell.n:
                values += [None] * len(columns)
                continue
            values += [cell.acc, *cell.interval, float(cell.n)]
            values += [cell.pass_rate, cell.maj_rate] if sampled else []
        if any(v is not None for v in values):
            rows.append((run_labels(run), values))
    if not rows:
        return None
    title = "Accuracy per split, pooled over sizes: accuracy, 95% Wilson interval, maps."
    if sampled:
        ks = sorted({k for c in by_split.values() for k in c.ks})
        title += (
            f" pass@k: one of the k = {', '.join(map(str, ks))} samples succeeds; maj@k: the most frequent "
            "plan succeeds (accuracy is the first sample's)."
        )
    return Table(
        "summary",
        title,
        list(LABELS),
        [(str(split), len(columns)) for split in splits],
        columns * len(splits),
        rows,
        2,
        short=[str(split) for split in splits],
        int_columns=("n",),
    )


def faithfulness_table(by_split: Mapping[tuple, Cell], records_faith: Mapping[tuple, dict]) -> Table | None:
    """CoT faithfulness per run and split: traced outputs, faithful share, answer-agrees share."""
    rows = []
    for key in sorted(records_faith, key=lambda k: (run_sort_key(k[0]), _split_order(k[1]))):
        f = records_faith[key]
        if not f["traced"]:
            continue
        rows.append(
            (
                [*run_labels(key[0]), str(key[1])],
                [
                    float(f["traced"]),
                    f["faithful"] / f["traced"],
                    f["agree"] / f["agree_n"] if f["agree_n"] else None,
                    f["div_steps"] / f["diverged"] if f["diverged"] else None,
                    f["faithful_success"] / f["success"] if f["success"] else None,
                ],
            )
        )
    if not rows:
        return None
    return Table(
        "faithfulness",
        "CoT faithfulness: share of traces whose written maps match the true states and whose answer agrees.",
        [*LABELS, "Split"],
        [("CoT traces", 5)],
        ["traces", "faithful", "answer agrees", "mean divergence step", "faithful if success"],
        rows,
        2,
        int_columns=("traces",),
    )


def _split_order(split: Any) -> tuple:
    s = str(split)
    return (analysis.TEST_SPLITS.index(s) if s in analysis.TEST_SPLITS else len(analysis.TEST_SPLITS), s)


# --------------------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # SVG ids are random unless salted: a fixed salt (and no date, see _save) makes report folders of the
    # same inputs byte-identical, so they can be compared with diff.
    matplotlib.rcParams["svg.hashsalt"] = "lakeshift"
    return plt


def _save(fig: Any, out_dir: Path, stem: str) -> dict[str, Path]:
    paths = {}
    for ext in ("png", "svg"):
        path = out_dir / f"{stem}.{ext}"
        with atomic_write(path, "wb") as f:
            fig.savefig(
                f,
                format=ext,
                dpi=110 if ext == "png" else None,
                bbox_inches="tight",
                metadata={"Date": None} if ext == "svg" else None,
            )
        paths[ext] = path
    _plt().close(fig)
    return paths


def _run_name(key: RunKey) -> str:
    labels = run_labels(key)
    return f"{labels[0]} / {labels[1]}" + (f" ({key[0]})" if not key[0].startswith("baseline") else "")


#: One colour per CoT format, the same in every figure; unknown formats take :data:`_EXTRA_COLORS`.
COT_COLORS = {
    "zero-shot": "#8c564b",
    "none": "#1f77b4",
    "desc": "#ff7f0e",
    "grid": "#2ca02c",
    "table": "#d62728",
    "grid+desc": "#9467bd",
    "table+desc": "#17becf",
}
_EXTRA_COLORS = ("#bcbd22", "#e377c2", "#393b79", "#637939", "#8c6d31", "#843c39")
#: Reference policies are grey (they are not models): shade and line style per policy.
BASELINE_STYLES = {"oracle": ("0.25", "-"), "greedy": ("0.5", "-."), "random": ("0.65", ":")}
#: Runs with the same input and CoT format (e.g. two study arms) differ by marker; a variant (what a model
#: name adds to its formats, e.g. ``@8min``) has the same marker in every panel.
VARIANT_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
#: A 95% Wilson band is drawn only over points with at least this many maps, and only in panels with at
#: most :data:`BAND_MAX_LINES` model lines: more bands than that hide the lines they qualify.
BAND_MIN_N = 30
BAND_MAX_LINES = 3
#: Points of fewer maps are not drawn (a share of 1 or 2 maps jumps between 0 and 1 and hides the trend);
#: the long-form CSVs keep them.
POINT_MIN_N = 5
#: Published reference curves: dashed, in their CoT format's colour, no markers.
REFERENCE_STYLE = {"linestyle": "--", "linewidth": 1.3, "marker": None, "alpha": 0.9}


class _Styles:
    """Line styles of a figure's runs: CoT colour, variant marker, grey baselines, dashed references."""

    def __init__(self, runs: Sequence[RunKey], reference: Reference | None) -> None:
        self.reference = reference
        models = [k for k in sorted(runs, key=run_sort_key) if self.kind(k) == "model"]
        variants = iter_unique(_variant(k) for k in models)
        marker = {v: VARIANT_MARKERS[i % len(VARIANT_MARKERS)] for i, v in enumerate(variants)}
        self.markers = {k: marker[_variant(k)] for k in models}
        extra = sorted({k[2] for k in runs if k[2] not in COT_COLORS})
        self.colors = {
            **COT_COLORS,
            **{c: _EXTRA_COLORS[i % len(_EXTRA_COLORS)] for i, c in enumerate(extra)},
        }

    def kind(self, key: RunKey) -> str:
        if self.reference is not None and self.reference.is_key(key):
            return "reference"
        return "baseline" if key[1] == "baseline" else "model"

    def color(self, key: RunKey) -> Any:
        if self.kind(key) == "baseline":
            return BASELINE_STYLES.get(key[2], ("0.5", "-"))[0]
        return self.colors.get(key[2], "0.3")

    def style(self, key: RunKey) -> dict[str, Any]:
        kind = self.kind(key)
        if kind == "reference":
            return {**REFERENCE_STYLE, "color": self.color(key), "label": f"{_cot_name(key)} ({key[0]})"}
        if kind == "baseline":
            shade, ls = BASELINE_STYLES.get(key[2], ("0.5", "-"))
            return {"color": shade, "linestyle": ls, "linewidth": 1.1, "label": f"{key[2]} (baseline)"}
        return {
            "color": self.color(key),
            "linestyle": "-",
            "linewidth": 1.4,
            "marker": self.markers.get(key, "o"),
            "ms": 3.5,
            "label": _model_label(key),
        }


def _cot_name(key: RunKey) -> str:
    return COT_NAMES.get(key[2], key[2])


def _variant(key: RunKey) -> str:
    """What a model name adds to its formats (``arm`` of ``arm/grid__none``; ``@8min`` of
    ``grid__none@8min``); the whole name if it does not contain them."""
    model, inp, cot = key
    return model.replace(f"{inp}__{cot}", "").strip("/_- ") if f"{inp}__{cot}" in model else model


def _model_label(key: RunKey) -> str:
    """``CoT (variant)`` for a legend whose panel names the input."""
    rest = _variant(key)
    return f"{_cot_name(key)} ({_short(rest)})" if rest else _cot_name(key)


def _short(name: str, limit: int = 30) -> str:
    """A model name for a legend: long names keep their informative tail."""
    return name if len(name) <= limit else "..." + name[-(limit - 3) :]


def _model_inputs(runs: Sequence[RunKey], styles: _Styles) -> list[str]:
    """Input formats of the model runs, in paper order (one row of panels each)."""
    return iter_unique(k[1] for k in sorted(runs, key=run_sort_key) if styles.kind(k) == "model")


def _reference_rows(
    reference: Reference | None, part: str, runs: Sequence[RunKey], styles: _Styles
) -> list[RunKey]:
    """Reference curves to overlay: those of the formats run locally, or all of them with no local model."""
    if reference is None:
        return []
    local = {k[1:] for k in runs if styles.kind(k) == "model"}
    pairs = reference.formats(part)
    return [reference.key(i, c) for i, c in pairs if not local or (i, c) in local]


def _draw(
    ax: Any, pts: Sequence[tuple[float, float | None, Cell | None]], style: dict[str, Any], band: bool
) -> None:
    """One line; with ``band``, its Wilson band over the points with at least :data:`BAND_MIN_N` maps."""
    pts = [p for p in pts if p[2] is None or p[2].n >= POINT_MIN_N]
    if not pts:
        return
    xs = [p[0] for p in pts]
    ax.plot(xs, [p[1] for p in pts], **style)
    cells = [p[2] for p in pts]
    if band and all(c is not None for c in cells):
        where = [c.n >= BAND_MIN_N for c in cells]  # type: ignore[union-attr]
        if sum(where) >= 2:
            lo = [c.interval[0] for c in cells]  # type: ignore[union-attr]
            hi = [c.interval[1] for c in cells]  # type: ignore[union-attr]
            ax.fill_between(xs, lo, hi, where=where, color=style["color"], alpha=0.15, linewidth=0)


def _panel_rows(
    plt: Any,
    runs: Sequence[RunKey],
    styles: _Styles,
    refs: Sequence[RunKey],
    inputs: Sequence[str | None],
    n_cols: int,
    col_width: float,
) -> tuple[Any, Any, list[int]]:
    """A grid of panels, one row per input format, each row as tall as its legend needs, shared axes;
    returns the figure, the axes and each row's legend column count."""
    heights, ncols = [], []
    for inp in inputs:
        models, base, rrefs = _panel_keys(runs, styles, inp, refs)
        h, nc = _row_height(_entries(models) + len(base) + len(rrefs))
        heights.append(h)
        ncols.append(nc)
    fig, axes = plt.subplots(
        len(inputs),
        n_cols,
        figsize=(col_width * n_cols + 0.8, sum(heights) + 0.6),
        squeeze=False,
        sharey=True,
        sharex="col",
        gridspec_kw={"height_ratios": heights, "top": _top(sum(heights) + 0.6)},
    )
    return fig, axes, ncols


def _integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _top(height: float) -> float:
    """The axes' top edge (figure fraction) leaving room for a two-line title of ``height`` inches."""
    return 1 - 0.85 / height


def _row_height(n_entries: int) -> tuple[float, int]:
    """Panel height (inches) tall enough for a legend of ``n_entries`` beside it, and its columns."""
    ncol = 1 if n_entries <= 12 else 2
    return max(2.3, 0.17 * math.ceil(n_entries / ncol) + 0.5), ncol


def _legend_beside(ax: Any, handles: Sequence[Any], labels: Sequence[str], ncol: int) -> None:
    """A legend to the right of ``ax``, outside every axes."""
    if handles:
        ax.legend(
            handles,
            labels,
            loc="center left",
            bbox_to_anchor=(1.02, 0.5),
            fontsize=7,
            frameon=False,
            ncol=ncol,
            borderaxespad=0.0,
        )


def _row_handles(axes_row: Sequence[Any]) -> tuple[list[Any], list[str]]:
    handles, labels = [], []
    for ax in axes_row:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels and not lab.startswith("_"):
                handles.append(h)
                labels.append(lab)
    return handles, labels


def _entries(keys: Sequence[RunKey]) -> int:
    return len(iter_unique(keys))


def _panel_keys(
    runs: Sequence[RunKey], styles: _Styles, inp: str | None, refs: Sequence[RunKey]
) -> tuple[list[RunKey], list[RunKey], list[RunKey]]:
    """Model runs of one input format, the baselines (every panel), the reference rows of that input."""
    models = [k for k in runs if styles.kind(k) == "model" and (inp is None or k[1] == inp)]
    base = [k for k in runs if styles.kind(k) == "baseline"]
    return models, base, [k for k in refs if inp is None or k[1] == inp]


def fig_accuracy_vs_length(
    by_length: Mapping[tuple, Cell],
    runs: Sequence[RunKey],
    train_hist: Mapping[int, int] | None,
) -> Any:
    """Paper Figure 4 as small multiples: the train/test histogram of optimal lengths on top, then one panel
    of accuracy vs optimal length per input format (test splits pooled; shared axes; CoT by colour)."""
    plt = _plt()
    styles = _Styles(runs, None)
    inputs: list[str | None] = list(_model_inputs(runs, styles)) or [None]
    heights, ncols = [], []
    for inp in inputs:
        models, base, _ = _panel_keys(runs, styles, inp, [])
        h, nc = _row_height(_entries(models) + len(base) + 1)
        heights.append(h)
        ncols.append(nc)
    height = 1.8 + sum(heights)
    fig = plt.figure(figsize=(7.5, height))
    grid = fig.add_gridspec(
        1 + len(inputs), 1, height_ratios=[1.5, *heights], hspace=0.35, top=1 - 0.85 / height
    )
    ax_h = fig.add_subplot(grid[0])
    test_hist: dict[int, int] = {}
    first = runs[0] if runs else None
    for key, cell in by_length.items():
        if key[0] == first and key[1] is not None:
            test_hist[int(key[1])] = test_hist.get(int(key[1]), 0) + cell.n
    width = 0.4
    if train_hist:
        tot = sum(train_hist.values())
        xs = sorted(train_hist)
        ax_h.bar([x - width / 2 for x in xs], [train_hist[x] / tot for x in xs], width, label="train maps")
    if test_hist:
        tot = sum(test_hist.values())
        xs = sorted(test_hist)
        ax_h.bar([x + width / 2 for x in xs], [test_hist[x] / tot for x in xs], width, label="test maps")
    ax_h.set_ylabel("share of maps")
    handles, labels = ax_h.get_legend_handles_labels()
    _legend_beside(ax_h, handles, labels, 1)
    axes: list[Any] = []
    for row, inp in enumerate(inputs):
        ax = fig.add_subplot(grid[row + 1], sharex=ax_h, sharey=axes[0] if axes else None)
        axes.append(ax)
        models, base, _ = _panel_keys(runs, styles, inp, [])
        band = len(models) <= BAND_MAX_LINES
        for key in [*models, *base]:
            pts = sorted(
                (int(k[1]), c.acc, c) for k, c in by_length.items() if k[0] == key and k[1] is not None
            )
            _draw(ax, pts, styles.style(key), band and styles.kind(key) == "model")
        if train_hist:
            # Shaded, not a line: lines are runs (and dashed ones are the paper's).
            longest = max([*train_hist, *(int(k[1]) for k in by_length if k[1] is not None)])
            if longest > max(train_hist):
                ax.axvspan(
                    max(train_hist) + 0.5, longest + 0.5, color="0.92", zorder=0, label="longer than training"
                )
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("accuracy")
        ax.set_title(f"{INPUT_NAMES.get(inp, inp)} input" if inp else "reference policies", fontsize=9)
        _legend_beside(ax, *_row_handles([ax]), ncols[row])
        if row < len(inputs) - 1:
            ax.tick_params(labelbottom=False)
    ax_h.tick_params(labelbottom=False)
    axes[-1].set_xlabel("optimal path length")
    axes[-1].xaxis.set_major_locator(_integer_ticks())
    fig.suptitle(
        "Accuracy vs optimal solution length (id-test, ood-size, ood-dist pooled)\n"
        f"bands: 95% Wilson where n >= {BAND_MIN_N} and <= {BAND_MAX_LINES} lines; grey: reference policies; "
        f"points of < {POINT_MIN_N} maps not drawn",
        fontsize=9,
    )
    return fig


def fig_accuracy_vs_dinf(
    by_split_dinf: Mapping[tuple, Cell], runs: Sequence[RunKey], reference: Reference | None = None
) -> Any:
    """Accuracy vs start-goal distance: a row of panels per input format, a column per split; the
    reference's Table 3 (``embed10-test``) dashed in that split's column."""
    plt = _plt()
    styles = _Styles(runs, reference)
    splits = sorted({k[1] for k in by_split_dinf}, key=_split_order)
    refs = _reference_rows(reference, "table3", runs, styles) if reference else []
    if reference is not None and not splits:
        splits = [reference.embed_split]
    if reference is not None and reference.embed_split not in splits:
        refs = []  # no column shares the reference's x-axis
    inputs: list[str | None] = list(_model_inputs(runs, styles)) or iter_unique(k[1] for k in refs) or [None]
    splits = splits or [""]
    fig, axes, ncols = _panel_rows(plt, runs, styles, refs, inputs, len(splits), 3.2)
    for row, inp in enumerate(inputs):
        models, base, rrefs = _panel_keys(runs, styles, inp, refs)
        band = len(models) <= BAND_MAX_LINES
        for col, split in enumerate(splits):
            ax = axes[row][col]
            for key in [*models, *base]:
                pts = sorted(
                    (int(k[2]), c.acc, c)
                    for k, c in by_split_dinf.items()
                    if k[0] == key and k[1] == split and k[2] is not None
                )
                _draw(ax, pts, styles.style(key), band and styles.kind(key) == "model")
            if reference is not None and split == reference.embed_split:
                for key in rrefs:
                    ref_pts = sorted(
                        (d, v, None) for (i, c, d), v in reference.acc_by_dinf.items() if (i, c) == key[1:]
                    )
                    _draw(ax, ref_pts, styles.style(key), False)
            ax.set_ylim(-0.02, 1.02)
            if row == 0:
                ax.set_title(str(split), fontsize=9)
            ax.xaxis.set_major_locator(_integer_ticks())
            if row == len(inputs) - 1:
                ax.set_xlabel("d_inf (start-goal distance)")
        axes[row][0].set_ylabel(f"{INPUT_NAMES.get(inp, inp)} input\naccuracy" if inp else "accuracy")
        _legend_beside(axes[row][-1], *_row_handles(axes[row]), ncols[row])
    note = f"; dashed: {reference.label}, {reference.sources.get('table3')}" if refs and reference else ""
    fig.suptitle(
        f"Accuracy vs start-goal distance (grey: reference policies{note})\n"
        f"bands: 95% Wilson where n >= {BAND_MIN_N} and <= {BAND_MAX_LINES} lines; "
        f"points of < {POINT_MIN_N} maps not drawn",
        fontsize=9,
    )
    return fig


#: Columns of the accuracy-vs-size figure: (title, splits, the reference's Table 1 splits).
SIZE_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("random d_inf (id-test 3-6, ood-size 7-10)", ("id-test", "ood-size")),
    ("d_inf >= 6 (ood-dist)", ("ood-dist",)),
)


def fig_accuracy_vs_size(
    by_split_size: Mapping[tuple, Cell], runs: Sequence[RunKey], reference: Reference | None = None
) -> Any:
    """Accuracy vs map size: a row per input format; columns random d_inf (id-test + ood-size) and
    d_inf >= 6 (ood-dist); the reference's Table 1 dashed in both."""
    plt = _plt()
    styles = _Styles(runs, reference)
    present = {k[1] for k in by_split_size}
    panels = [(t, s) for t, s in SIZE_PANELS if present & set(s) or reference is not None] or [SIZE_PANELS[0]]
    refs = _reference_rows(reference, "table1", runs, styles)
    inputs: list[str | None] = list(_model_inputs(runs, styles)) or iter_unique(k[1] for k in refs) or [None]
    fig, axes, ncols = _panel_rows(plt, runs, styles, refs, inputs, len(panels), 3.6)
    for row, inp in enumerate(inputs):
        models, base, rrefs = _panel_keys(runs, styles, inp, refs)
        band = len(models) <= BAND_MAX_LINES
        for col, (title, splits) in enumerate(panels):
            ax = axes[row][col]
            for key in [*models, *base]:
                pts = sorted(
                    (int(k[2]), c.acc, c)
                    for k, c in by_split_size.items()
                    if k[0] == key and k[1] in splits and k[2] is not None
                )
                _draw(ax, pts, styles.style(key), band and styles.kind(key) == "model")
            if reference is not None:
                for key in rrefs:
                    ref_pts = sorted(
                        (s, v, None)
                        for (i, c, sp, s), v in reference.acc_by_size.items()
                        if (i, c) == key[1:] and sp in splits
                    )
                    _draw(ax, ref_pts, styles.style(key), False)
            if "id-test" in splits:
                ax.axvline(6.5, color="0.6", linewidth=0.8)
            ax.set_ylim(-0.02, 1.02)
            ax.xaxis.set_major_locator(_integer_ticks())
            if row == 0:
                ax.set_title(title, fontsize=9)
            if row == len(inputs) - 1:
                ax.set_xlabel("map size n (n x n)")
        axes[row][0].set_ylabel(f"{INPUT_NAMES.get(inp, inp)} input\naccuracy" if inp else "accuracy")
        _legend_beside(axes[row][-1], *_row_handles(axes[row]), ncols[row])
    note = f"; dashed: {reference.label}, {reference.sources.get('table1')}" if refs and reference else ""
    fig.suptitle(
        f"Accuracy vs map size (left of the grey line: training sizes{note})\n"
        f"bands: 95% Wilson where n >= {BAND_MIN_N} and <= {BAND_MAX_LINES} lines; grey: reference policies",
        fontsize=9,
    )
    return fig


VERDICT_COLORS = {
    "success": "#2ca02c",
    "fell_in_hole": "#1f77b4",
    "stopped_short": "#ff7f0e",
    "passed_goal": "#9467bd",
    "unparseable": "#d62728",
    "no_answer": "#7f7f7f",
    "missing": "#000000",
}


def fig_verdicts(by_split: Mapping[tuple, Cell], runs: Sequence[RunKey]) -> Any:
    """Stacked bars of verdict shares: a panel per split, a bar per run (shared run axis)."""
    plt = _plt()
    splits = sorted({k[1] for k in by_split}, key=_split_order) or [""]
    keys = [r for r in runs if any((r, s) in by_split for s in splits)]
    fig, axes = plt.subplots(
        1,
        len(splits),
        figsize=(2.6 * len(splits) + 2.8, 0.2 * len(keys) + 1.6),
        squeeze=False,
        sharey=True,
    )
    ys = list(range(len(keys)))
    for ax, split in zip(axes[0], splits, strict=True):
        left = [0.0] * len(keys)
        for verdict in VERDICTS:
            shares = [
                by_split[(k, split)].verdicts.get(verdict, 0) / max(1, by_split[(k, split)].n)
                if (k, split) in by_split
                else 0.0
                for k in keys
            ]
            ax.barh(ys, shares, left=left, color=VERDICT_COLORS[verdict], label=verdict, height=0.8)
            left = [a + b for a, b in zip(left, shares, strict=True)]
        ax.set_xlim(0, 1)
        ax.set_title(str(split), fontsize=9)
        ax.set_xlabel("share of maps", fontsize=8)
    axes[0][0].set_yticks(ys)
    names = [_run_name(r) if r[1] == "baseline" else f"{run_labels(r)[0]} / {_model_label(r)}" for r in keys]
    axes[0][0].set_yticklabels(names, fontsize=6)
    axes[0][0].invert_yaxis()
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, ncol=len(VERDICTS), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    return fig


def plot_accuracy_vs_length(
    by_length: Mapping[tuple, Cell],
    runs: Sequence[RunKey],
    train_hist: Mapping[int, int] | None,
    out_dir: Path,
) -> dict[str, Path]:
    """Writes :func:`fig_accuracy_vs_length` as ``fig_accuracy_vs_length.png`` / ``.svg``."""
    return _save(fig_accuracy_vs_length(by_length, runs, train_hist), out_dir, "fig_accuracy_vs_length")


def plot_accuracy_vs_dinf(
    by_split_dinf: Mapping[tuple, Cell],
    runs: Sequence[RunKey],
    out_dir: Path,
    reference: Reference | None = None,
) -> dict[str, Path]:
    """Writes :func:`fig_accuracy_vs_dinf` as ``fig_accuracy_vs_dinf.png`` / ``.svg``."""
    return _save(fig_accuracy_vs_dinf(by_split_dinf, runs, reference), out_dir, "fig_accuracy_vs_dinf")


def plot_accuracy_vs_size(
    by_split_size: Mapping[tuple, Cell],
    runs: Sequence[RunKey],
    out_dir: Path,
    reference: Reference | None = None,
) -> dict[str, Path]:
    """Writes :func:`fig_accuracy_vs_size` as ``fig_accuracy_vs_size.png`` / ``.svg``."""
    return _save(fig_accuracy_vs_size(by_split_size, runs, reference), out_dir, "fig_accuracy_vs_size")


def plot_verdicts(by_split: Mapping[tuple, Cell], runs: Sequence[RunKey], out_dir: Path) -> dict[str, Path]:
    """Writes :func:`fig_verdicts` as ``fig_verdicts.png`` / ``.svg``."""
    return _save(fig_verdicts(by_split, runs), out_dir, "fig_verdicts")


# --------------------------------------------------------------------------------------------------------
# Building a report
# --------------------------------------------------------------------------------------------------------
@dataclass
class RunInput:
    """One predictions file to score.

    Attributes:
        path: The predictions JSONL.
        maps_path: Its ``maps.jsonl``.
        defaults: Metadata for records that lack it (``model``, ``input_format``, ``cot_format``).
        name: File stem for ``scored/<name>.jsonl``.
        paths: Every file of the set when it is split in shards (``lakeshift predict --shard``), read as
            one by :func:`lakeshift.shards.read_prediction_set`; empty: ``path`` alone.
    """

    path: Path
    maps_path: Path
    defaults: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    paths: list[Path] = field(default_factory=list)


@dataclass
class ReportResult:
    """What :func:`build_report` wrote and found."""

    out_dir: Path
    files: list[Path]
    n_records: int
    warnings: list[str]
    runs: list[RunKey]


def build_report(
    runs: Sequence[RunInput],
    out_dir: str | Path,
    *,
    compat: str | None = None,
    strict: bool = False,
    train_maps: str | Path | None = None,
    baselines: Sequence[str] = ("oracle", "greedy", "random"),
    check_trace: bool = True,
    n_examples: int = 600,
    images: bool = True,
    progress: bool = True,
    reference: str | Reference | None = None,
) -> ReportResult:
    """Scores every run and writes tables, plots, scored records and ``report.html`` into ``out_dir``.

    Args:
        runs: Predictions files with their maps files (may be empty with a ``reference``).
        out_dir: Output folder (created).
        compat: Extraction mode for every run.
        strict: Bad prediction records are errors instead of warnings.
        train_maps: A training split's ``maps.jsonl`` for the Figure 4 histogram.
        baselines: Reference policies added as rows for every maps file, answering the union of the maps
            that file's model runs were asked (their ``selection``).
        check_trace: Run the CoT faithfulness check.
        n_examples: Examples embedded in ``report.html`` (stratified by run, split, size and verdict).
        images: Embed map PNGs (``<split>/images/<id>.png`` next to the maps file) when present.
        progress: Show a tqdm bar on stderr.
        reference: Published results added as labelled rows of Tables 1, 3 and 5 and dashed curves
            (a :data:`lakeshift.references.KNOWN` name or a loaded :class:`Reference`).

    Raises:
        LakeshiftError: no runs (and no reference), unknown reference, unreadable inputs, or (``strict``)
            a bad prediction record.
    """
    from lakeshift import references, report_html

    ref = references.load(reference) if isinstance(reference, str) else reference
    if not runs and ref is None:
        raise LakeshiftError("no predictions files to report on")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs, warnings = _scoring_jobs(runs, strict, baselines)
    sampler = report_html.ExampleSampler(n_examples, n_strata_hint=max(1, len(jobs)))
    records, files = _score_jobs(jobs, out, sampler, warnings, compat, check_trace, images, progress)

    run_keys = sorted({run_key(r) for r in records}, key=run_sort_key)
    if ref is not None:
        taken = {k[0] for k in run_keys}
        moved = ref.relabel(taken)
        if moved.label != ref.label:
            warnings.append(f"a local run is named {ref.label!r}: the reference rows are {moved.label!r}")
        ref = moved
    cells = _Cells.of(records, run_keys)
    tables = _tables(cells, run_keys, records, ref)
    for t in tables:
        files += t.write(out)
    for name, by, fields in (
        ("by_size", cells.by_split_size, ["split", "size"]),
        ("by_dinf", cells.by_split_dinf, ["split", "d_inf"]),
        ("by_length", cells.by_length, ["optimal_length"]),
        ("by_split", cells.by_split, ["split"]),
    ):
        files.append(_write_long_csv(out / f"{name}.csv", analysis.long_rows(by, fields)))
    figures = _figures(cells, run_keys, train_maps, ref, out)
    for paths in figures.values():
        files += paths.values()

    with atomic_write(out / "warnings.txt") as f:
        f.write("".join(w + "\n" for w in warnings))
    files.append(out / "warnings.txt")
    html_path = out / "report.html"
    report_html.write_report(
        html_path,
        tables=tables,
        figures={title: paths["png"] for title, paths in figures.items()},
        examples=sampler.examples(),
        maps_images=sampler.images,
        warnings=warnings,
        summary={
            "records": len(records),
            "runs": len(run_keys),
            "length_unit": cells.unit,
            "compat": compat,
            "decoding": ", ".join(sorted({str(r["decoding"]) for r in records if r.get("decoding")})) or None,
            **({"reference": f"{ref.label}: {ref.citation}"} if ref is not None else {}),
        },
    )
    files.append(html_path)
    return ReportResult(out, files, len(records), warnings, run_keys)


_Job = tuple[str, Path, Mapping[str, ScoringMap], Any, dict[str, Any]]


def _scoring_jobs(
    runs: Sequence[RunInput], strict: bool, baselines: Sequence[str]
) -> tuple[list[_Job], list[str]]:
    """The predictions files to score, then the reference policies on the maps the models were asked."""
    from lakeshift import baselines as bl
    from lakeshift.scoring import Prediction, PredictionsFile, selected_maps

    maps_cache: dict[Path, dict[str, ScoringMap]] = {}
    for run in runs:
        mp = run.maps_path.resolve()
        if mp not in maps_cache:
            maps_cache[mp] = load_scoring_maps(mp)
    # Model runs are read first: the reference policies answer the same maps the models were asked.
    jobs: list[_Job] = []
    warnings: list[str] = []
    asked: dict[Path, dict[str, ScoringMap]] = {}
    given: dict[Path, set[str]] = {}  # policies whose predictions files are among the runs, per maps file
    for run in runs:
        mp = run.maps_path.resolve()
        pf = read_prediction_set(run.paths or [run.path], maps_cache[mp], strict=strict, maps_path=mp)
        warnings += pf.warnings
        jobs.append((run.name or run.path.stem, mp, maps_cache[mp], pf, run.defaults))
        policies = {(p.meta or {}).get("policy") for p in pf.predictions.values()}
        if len(policies) == 1 and None not in policies:  # a `lakeshift baseline` file
            given.setdefault(mp, set()).update(str(p) for p in policies)
        else:
            asked.setdefault(mp, {}).update(selected_maps(maps_cache[mp], pf))
    for mp, maps in maps_cache.items():
        subset = asked.get(mp) or maps
        for policy in baselines:
            if policy in given.get(mp, ()):
                # Its own row would share the file's run name and count every map twice.
                warnings.append(f"{mp}: a {policy} baseline file is among the runs; its row is that file's")
                continue
            preds = {
                r["id"]: Prediction(
                    r["id"], r["output"], {k: v for k, v in r.items() if k not in ("id", "output")}, 0
                )
                for r in bl.baseline_predictions(subset.values(), policy)
            }
            split = next(iter(maps.values())).split or mp.parent.name
            jobs.append((f"baseline-{policy}__{split}", mp, subset, PredictionsFile(mp, preds, []), {}))
    return jobs, warnings


def _score_jobs(
    jobs: Sequence[_Job],
    out: Path,
    sampler: Any,
    warnings: list[str],
    compat: str | None,
    check_trace: bool,
    images: bool,
    progress: bool,
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Scores every job, writes ``scored/<name>.jsonl`` (names made unique) and feeds the example sampler."""
    from tqdm import tqdm

    records: list[dict[str, Any]] = []
    files: list[Path] = []
    used_names: set[str] = set()
    for name, mp, maps, pf, defaults in tqdm(jobs, desc="scoring", unit="file", disable=not progress):
        scored = list(score_predictions(maps, pf, compat=compat, check_trace=check_trace, defaults=defaults))
        for rec in scored:
            # One model decoded two ways is two runs: the decoding joins the name, so they never pool.
            if rec.get("decoding") not in (None, "greedy"):
                rec["model"] = f"{rec.get('model') or '?'}@{rec['decoding']}"
        n_missing = sum(1 for r in scored if r["verdict"] == "missing")
        if n_missing and not name.startswith("baseline-"):
            warnings.append(f"{pf.path}: {n_missing} of {len(maps)} maps have no prediction (scored missing)")
        stem = name
        i = 2
        while stem in used_names:
            stem, i = f"{name}-{i}", i + 1
        used_names.add(stem)
        path = out / "scored" / f"{stem}.jsonl"
        write_jsonl(path, scored)
        files.append(path)
        sampler.offer(scored, pf, maps, compat=compat, images_dir=mp.parent / "images" if images else None)
        records += scored
    return records, files


@dataclass
class _Cells:
    """The scored records counted by every grouping the tables and plots use."""

    by_split_size: dict[tuple, Cell]
    by_split_dinf: dict[tuple, Cell]
    by_split: dict[tuple, Cell]
    by_length: dict[tuple, Cell]
    model_runs: list[RunKey]
    unit: str

    @classmethod
    def of(cls, records: Sequence[Mapping[str, Any]], run_keys: Sequence[RunKey]) -> _Cells:
        by_split_size = analysis.by_fields(records, "split", "size")
        test_records = [r for r in records if r.get("split") in analysis.TEST_SPLITS[:3]] or records
        # Reference policies have no token counts: lengths are measured on model runs only.
        model_runs = [k for k in run_keys if k[1] != "baseline"] or list(run_keys)
        return cls(
            by_split_size=by_split_size,
            by_split_dinf=analysis.by_fields(records, "split", "d_inf"),
            by_split=analysis.by_fields(records, "split"),
            by_length=analysis.by_fields(test_records, "optimal_length"),
            model_runs=model_runs,
            unit=analysis.length_unit(c for k, c in by_split_size.items() if k[0] in model_runs),
        )


def _faithfulness_counts(records: Iterable[Mapping[str, Any]]) -> dict[tuple, dict[str, int]]:
    """Per (run, split): traced outputs, faithful ones, answer agreement, divergence steps, successes."""
    faith: dict[tuple, dict[str, int]] = {}
    for r in records:
        if r.get("trace_faithful") is None:
            continue
        f = faith.setdefault(
            (run_key(r), r.get("split")),
            dict.fromkeys(
                (
                    "traced",
                    "faithful",
                    "agree",
                    "agree_n",
                    "div_steps",
                    "diverged",
                    "success",
                    "faithful_success",
                ),
                0,
            ),
        )
        f["traced"] += 1
        f["faithful"] += bool(r["trace_faithful"])
        if r.get("trace_answer_agrees") is not None:
            f["agree_n"] += 1
            f["agree"] += bool(r["trace_answer_agrees"])
        if r.get("trace_divergence_step") is not None:
            f["diverged"] += 1
            f["div_steps"] += r["trace_divergence_step"]
        if r["success"]:
            f["success"] += 1
            f["faithful_success"] += bool(r["trace_faithful"])
    return faith


def _tables(
    cells: _Cells, run_keys: Sequence[RunKey], records: Sequence[Mapping[str, Any]], ref: Reference | None
) -> list[Table]:
    """Every table with at least one row (the reference's rows only in Tables 1, 3 and 5)."""
    tables = (
        split_table(cells.by_split, run_keys),
        table1(cells.by_split_size, run_keys, ref),
        table3(cells.by_split_dinf, run_keys, ref),
        table5(cells.by_split_size, cells.model_runs, cells.unit, reference=ref),
        table5(cells.by_split_size, cells.model_runs, cells.unit, correct_only=False),
        table10(cells.by_split_size, cells.model_runs, cells.unit),
        verdict_table(cells.by_split, run_keys),
        faithfulness_table(cells.by_split, _faithfulness_counts(records)),
    )
    return [t for t in tables if t is not None and (t.rows or records)]


def _figures(
    cells: _Cells,
    run_keys: Sequence[RunKey],
    train_maps: str | Path | None,
    ref: Reference | None,
    out: Path,
) -> dict[str, dict[str, Path]]:
    """Writes the four figures; returns ``{caption: {"png": path, "svg": path}}``."""
    train_hist = None
    if train_maps is not None:
        from lakeshift.io import read_jsonl

        train_hist = analysis.training_lengths(rec for _, rec in read_jsonl(train_maps))
    size_note = dinf_note = ""
    if ref is not None:
        size_note = f"; dashed: {ref.label} ({ref.sources.get('table1')}, same formats)"
        if any(k[1] == ref.embed_split for k in cells.by_split_dinf) or not run_keys:
            dinf_note = f"; dashed on {ref.embed_split}: {ref.label} ({ref.sources.get('table3')})"
    length_note = " (the paper's Figure 4 is not tabulated: no reference curve)" if ref is not None else ""
    if not run_keys:  # the reference alone: only the figures it has curves for
        return {
            "Accuracy vs start-goal distance (rows: input format" + dinf_note + ")": plot_accuracy_vs_dinf(
                cells.by_split_dinf, run_keys, out, ref
            ),
            "Accuracy vs map size (rows: input format" + size_note + ")": plot_accuracy_vs_size(
                cells.by_split_size, run_keys, out, ref
            ),
        }
    return {
        "Accuracy vs optimal path length (paper Figure 4; one panel per input format)"
        + length_note: plot_accuracy_vs_length(cells.by_length, run_keys, train_hist, out),
        "Accuracy vs start-goal distance (rows: input format; columns: split" + dinf_note + ")": (
            plot_accuracy_vs_dinf(cells.by_split_dinf, run_keys, out, ref)
        ),
        "Accuracy vs map size (rows: input format" + size_note + ")": plot_accuracy_vs_size(
            cells.by_split_size, run_keys, out, ref
        ),
        "Verdict breakdown (one panel per split)": plot_verdicts(cells.by_split, run_keys, out),
    }


def _write_long_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    with atomic_write(path) as f:
        if rows:
            # Only some rows have the repeated-sampling columns.
            fieldnames = iter_unique(k for row in rows for k in row)
            w = csv.DictWriter(f, fieldnames=fieldnames, lineterminator="\n")
            w.writeheader()
            for row in rows:
                w.writerow({k: "" if v is None else v for k, v in row.items()})
    return path


def fmt_summary(summary: Mapping[str, Any]) -> str:
    """The text ``lakeshift score`` prints: accuracy with Wilson interval overall and per size, verdicts."""
    n, k = summary["n"], summary["success"]
    lo, hi = analysis.wilson(k, n)
    lines = [f"accuracy {k}/{n} = {k / n if n else math.nan:.3f}  (95% CI {lo:.3f}-{hi:.3f})"]
    for size, (ks, ns) in summary["by_size"].items():
        lo, hi = analysis.wilson(ks, ns)
        lines.append(f"  {size}x{size}: {ks}/{ns} = {ks / ns:.3f}  ({lo:.3f}-{hi:.3f})")
    lines.append("verdicts: " + ", ".join(f"{v} {c}" for v, c in summary["verdicts"].items() if c))
    samples = summary.get("samples")
    if samples:
        k = "-".join(str(x) for x in sorted({min(samples["k"]), max(samples["k"])})) if samples["k"] else "?"
        lines.append(
            f"repeated samples (k = {k}): pass@k {samples['pass']}/{n} = {samples['pass'] / n:.3f}, "
            f"maj@k {samples['maj']}/{n} = {samples['maj'] / n:.3f}"
        )
    return "\n".join(lines)


def terminal_summary(report_dir: Path, width: int = 80) -> str:
    """The table ``lakeshift report`` and ``lakeshift run``/``demo`` print: one row per run (its model
    name), then per split the accuracy with its 95% Wilson interval, read from the report's
    ``by_split.csv``. The split columns go in as many blocks (each repeating the model column) as ``width``
    needs; the full tables stay in the report files. Empty when the report has no ``by_split.csv``."""
    path = report_dir / "by_split.csv"
    if not path.is_file():
        return ""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    runs: dict[tuple[str, str, str], dict[str, str]] = {}
    for row in rows:
        if row["n"] and int(row["n"]):
            runs.setdefault((row["model"], row["input_format"], row["cot_format"]), {})[row["split"]] = (
                f"{float(row['acc']):.2f} ({float(row['lo']):.2f}-{float(row['hi']):.2f})"
            )
    # A run is its model name, unless two runs share it (one model name, two formats): then its formats too.
    names = Counter(model for model, _, _ in runs)
    cells = {(m if names[m] == 1 else f"{m} ({i} / {c})"): v for (m, i, c), v in runs.items()}
    splits = sorted({split for by_split in cells.values() for split in by_split}, key=_split_order)
    if not splits:
        return ""
    name_width = max(len("model"), *(len(m) for m in cells))
    cell_width = max(len("0.00 (0.00-0.00)"), *(len(s) for s in splits))
    per_block = max(1, (width - name_width) // (cell_width + 2))
    lines = [f"Accuracy per split, 95% interval (the full tables: {report_dir / 'summary.md'}):"]
    for start in range(0, len(splits), per_block):
        block = splits[start : start + per_block]
        lines.append("")
        lines.append("model".ljust(name_width) + "".join(f"  {s:<{cell_width}}" for s in block).rstrip())
        for model, by_split in cells.items():
            values = "".join(f"  {by_split.get(s, '-'):<{cell_width}}" for s in block)
            lines.append((model.ljust(name_width) + values).rstrip())
    if any(row.get("maj_at_k") for row in rows):
        lines += ["", "Runs with repeated samples show their first sample; pass@k and maj@k: summary.md."]
    return "\n".join(lines)


def iter_unique(items: Iterable[Any]) -> list[Any]:
    """Order-preserving de-duplication."""
    return list(dict.fromkeys(items))
