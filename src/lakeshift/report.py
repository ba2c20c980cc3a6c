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
  (``.png`` and ``.svg``);
* ``scored/<run>.jsonl`` (one scored record per map), ``report.html`` and ``warnings.txt``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeshift import analysis
from lakeshift.analysis import Cell, RunKey, run_key, run_sort_key
from lakeshift.errors import LakeshiftError
from lakeshift.io import atomic_write, write_jsonl
from lakeshift.scoring import VERDICTS, ScoringMap, load_scoring_maps, read_predictions, score_predictions

INPUT_NAMES = {"image": "Image", "desc": "Descr.", "table": "Table", "grid": "Grid", "baseline": "Baseline"}
COT_NAMES = {
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
            lines.append("| " + " | ".join([*labels, *self._cells(values)]) + " |")
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


def _tex(s: str) -> str:
    s = s.replace("\\", "\\textbackslash{}")
    for ch in "&%$#_{}":
        s = s.replace(ch, "\\" + ch)
    return s.replace("d\\_inf", "$d_\\infty$").replace("<=", "$\\leq$").replace(">=", "$\\geq$")


def run_labels(key: RunKey) -> list[str]:
    """``[Input, CoT, Model]`` display labels of a run."""
    model, inp, cot = key
    return [INPUT_NAMES.get(inp, inp), COT_NAMES.get(cot, cot), model]


LABELS = ["Input format", "CoT format", "Model"]


def _sizes(cells: Mapping[tuple, Cell], split: str, default: Sequence[int]) -> list[int]:
    seen = {k[2] for k in cells if k[1] == split and k[2] is not None}
    return sorted(set(default) | {int(s) for s in seen}) if seen else list(default)


def table1(by_split_size: Mapping[tuple, Cell], runs: Sequence[RunKey]) -> Table | None:
    """Paper Table 1: accuracy per map size, ``Avg`` (mean over sizes) and ``Pooled``, per run."""
    return _size_table(
        by_split_size,
        runs,
        "table1",
        "Accuracy on ID and OOD map sizes (Avg: mean over sizes as in the paper; Pooled: all maps).",
        metric="acc",
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


def _size_table(
    by_split_size: Mapping[tuple, Cell], runs: Sequence[RunKey], name: str, title: str, metric: str
) -> Table | None:
    groups, columns, short, spec = [], [], [], []
    for header, sname, split, default in TABLE1_GROUPS:
        if not any(k[1] == split for k in by_split_size):
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
    for run in runs:
        if not any((run, split, s) in by_split_size for split, sizes in spec for s in sizes):
            continue
        values: list[float | None] = []
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
    by_split_size: Mapping[tuple, Cell], runs: Sequence[RunKey], unit: str, correct_only: bool = True
) -> Table | None:
    """Paper Table 5: mean output length per group of splits (mean over sizes of per-size means)."""
    metric = "correct_length" if correct_only else "length"
    spec = [(h, s, split) for h, s, split, _ in TABLE1_GROUPS if any(k[1] == split for k in by_split_size)]
    if any(k[1] == EMBED_SPLIT for k in by_split_size):
        spec.append(("10x10 embedded", "embed10", EMBED_SPLIT))
    if not spec:
        return None
    rows = []
    for run in runs:
        values = []
        for _, _, split in spec:
            cells = [c for k, c in by_split_size.items() if k[0] == run and k[1] == split]
            values.append(analysis.macro_mean(_metric(c, metric) for c in cells) if cells else None)
        if any(v is not None for v in values) or any(k[0] == run for k in by_split_size):
            rows.append((run_labels(run), values))
    what = "correct answers" if correct_only else "all outputs"
    name = "table5" if correct_only else "table5_all"
    title = f"Mean output length of {what} ({unit}; mean over map sizes)."
    return Table(name, title, LABELS, [("Mean length", len(spec))], [h for h, _, _ in spec], rows, 0)


def table3(by_split_dinf: Mapping[tuple, Cell], runs: Sequence[RunKey]) -> Table | None:
    """Paper Table 3: accuracy on ``embed10-test`` per ``d_inf`` (Avg: mean over d_inf values)."""
    if not any(k[1] == EMBED_SPLIT for k in by_split_dinf):
        return None
    seen = {int(k[2]) for k in by_split_dinf if k[1] == EMBED_SPLIT}
    groups, columns, short, spec = [], [], [], []
    for header, sname, values in TABLE3_GROUPS:
        lo, hi = min(values), max(values)
        ds = sorted(set(values) | {d for d in seen if (d <= hi if sname == "ID" else d >= lo)})
        groups.append((header, len(ds) + 2))
        columns += [str(d) for d in ds] + ["Avg", "Pooled"]
        short.append(sname)
        spec.append(ds)
    rows = []
    for run in runs:
        if not any(k[0] == run and k[1] == EMBED_SPLIT for k in by_split_dinf):
            continue
        vals: list[float | None] = []
        for ds in spec:
            cells = [by_split_dinf.get((run, EMBED_SPLIT, d)) for d in ds]
            accs = [c.acc if c else None for c in cells]
            present = [c for c in cells if c is not None]
            vals += [*accs, analysis.macro_mean(accs), analysis.pooled(present).acc if present else None]
        rows.append((run_labels(run), vals))
    title = "Accuracy on 10x10 embedded maps per start-goal distance d_inf (Avg: mean over d_inf values)."
    return Table("table3", title, LABELS, groups, columns, rows, 2, short)


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

    return plt


def _save(fig: Any, out_dir: Path, stem: str) -> dict[str, Path]:
    paths = {}
    for ext in ("png", "svg"):
        path = out_dir / f"{stem}.{ext}"
        with atomic_write(path, "wb") as f:
            fig.savefig(f, format=ext, dpi=110 if ext == "png" else None, bbox_inches="tight")
        paths[ext] = path
    _plt().close(fig)
    return paths


def _run_name(key: RunKey) -> str:
    labels = run_labels(key)
    return f"{labels[0]} / {labels[1]}" + (f" ({key[0]})" if not key[0].startswith("baseline") else "")


def _colors(n: int) -> list[Any]:
    plt = _plt()
    cmap = plt.get_cmap("tab20" if n > 10 else "tab10")
    return [cmap(i % cmap.N) for i in range(n)]


def plot_accuracy_vs_length(
    by_length: Mapping[tuple, Cell],
    runs: Sequence[RunKey],
    train_hist: Mapping[int, int] | None,
    out_dir: Path,
) -> dict[str, Path]:
    """Paper Figure 4: accuracy vs optimal path length (test splits pooled), training histogram on top."""
    plt = _plt()
    fig, (ax_h, ax) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    test_hist: dict[int, int] = {}
    first = runs[0] if runs else None
    for key, cell in by_length.items():
        if key[0] == first and key[1] is not None:
            test_hist[int(key[1])] = test_hist.get(int(key[1]), 0) + cell.n
    width = 0.4
    if train_hist:
        tot = sum(train_hist.values())
        ax_h.bar(
            [x - width / 2 for x in train_hist], [v / tot for v in train_hist.values()], width, label="train"
        )
    if test_hist:
        tot = sum(test_hist.values())
        xs = sorted(test_hist)
        ax_h.bar([x + width / 2 for x in xs], [test_hist[x] / tot for x in xs], width, label="test")
    ax_h.set_ylabel("share of maps")
    ax_h.legend(fontsize=8)
    for key, color in zip(runs, _colors(len(runs)), strict=True):
        pts = sorted((int(k[1]), c) for k, c in by_length.items() if k[0] == key and k[1] is not None)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1].acc for p in pts]
        lo = [p[1].interval[0] for p in pts]
        hi = [p[1].interval[1] for p in pts]
        style = ":" if key[1] == "baseline" else "-"
        ax.plot(xs, ys, style, marker="o", ms=3, color=color, label=_run_name(key))
        ax.fill_between(xs, lo, hi, color=color, alpha=0.12, linewidth=0)
    if train_hist:
        ax.axvline(max(train_hist), color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("optimal path length")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=6, ncol=2, loc="upper right")
    fig.suptitle("Accuracy vs optimal solution length (test splits pooled; bands: 95% Wilson)")
    return _save(fig, out_dir, "fig_accuracy_vs_length")


def plot_accuracy_vs_dinf(by_split_dinf: Mapping[tuple, Cell], runs: Sequence[RunKey], out_dir: Path) -> dict:
    """Accuracy vs start-goal distance, one panel per split."""
    plt = _plt()
    splits = sorted({k[1] for k in by_split_dinf}, key=_split_order)
    fig, axes = plt.subplots(1, max(1, len(splits)), figsize=(4 * max(1, len(splits)), 3.8), squeeze=False)
    for ax, split in zip(axes[0], splits, strict=False):
        for key, color in zip(runs, _colors(len(runs)), strict=True):
            pts = sorted((int(k[2]), c) for k, c in by_split_dinf.items() if k[0] == key and k[1] == split)
            if pts:
                style = ":" if key[1] == "baseline" else "-"
                ax.plot(
                    [p[0] for p in pts],
                    [p[1].acc for p in pts],
                    style,
                    marker="o",
                    ms=3,
                    color=color,
                    label=_run_name(key),
                )
        ax.set_title(str(split))
        ax.set_xlabel("d_inf")
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("accuracy")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(
            handles,
            labels,
            fontsize=6,
            loc="lower center",
            ncol=4,
            bbox_to_anchor=(0.5, -0.02 - 0.03 * (len(labels) // 4)),
        )
    return _save(fig, out_dir, "fig_accuracy_vs_dinf")


def plot_accuracy_vs_size(by_split_size: Mapping[tuple, Cell], runs: Sequence[RunKey], out_dir: Path) -> dict:
    """Accuracy vs map size per run: random d_inf (id-test, ood-size) solid, d_inf >= 6 dashed."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, color in zip(runs, _colors(len(runs)), strict=True):
        for splits, style, label in ((("id-test", "ood-size"), "-", True), (("ood-dist",), "--", False)):
            pts = sorted((int(k[2]), c) for k, c in by_split_size.items() if k[0] == key and k[1] in splits)
            if pts:
                ax.plot(
                    [p[0] for p in pts],
                    [p[1].acc for p in pts],
                    style,
                    marker="o",
                    ms=3,
                    color=color,
                    label=_run_name(key) if label else None,
                )
    ax.axvline(6.5, color="grey", linewidth=0.8)
    ax.set_xlabel("map size (solid: random d_inf; dashed: d_inf >= 6)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=6, ncol=2, loc="upper right")
    return _save(fig, out_dir, "fig_accuracy_vs_size")


VERDICT_COLORS = {
    "success": "#2ca02c",
    "fell_in_hole": "#1f77b4",
    "stopped_short": "#ff7f0e",
    "passed_goal": "#9467bd",
    "unparseable": "#d62728",
    "no_answer": "#7f7f7f",
    "missing": "#000000",
}


def plot_verdicts(by_split: Mapping[tuple, Cell], runs: Sequence[RunKey], out_dir: Path) -> dict:
    """Stacked bars of verdict shares per run and split."""
    plt = _plt()
    keys = [
        (r, s) for r in runs for s in sorted({k[1] for k in by_split}, key=_split_order) if (r, s) in by_split
    ]
    fig, ax = plt.subplots(figsize=(9, 0.22 * len(keys) + 1.5))
    ys = list(range(len(keys)))
    left = [0.0] * len(keys)
    for verdict in VERDICTS:
        shares = [by_split[k].verdicts.get(verdict, 0) / max(1, by_split[k].n) for k in keys]
        ax.barh(ys, shares, left=left, color=VERDICT_COLORS[verdict], label=verdict, height=0.8)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{_run_name(r)} | {s}" for r, s in keys], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of maps")
    ax.legend(fontsize=7, ncol=len(VERDICTS), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return _save(fig, out_dir, "fig_verdicts")


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
    """

    path: Path
    maps_path: Path
    defaults: dict[str, Any] = field(default_factory=dict)
    name: str = ""


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
) -> ReportResult:
    """Scores every run and writes tables, plots, scored records and ``report.html`` into ``out_dir``.

    Args:
        runs: Predictions files with their maps files.
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

    Raises:
        LakeshiftError: no runs, unreadable inputs, or (``strict``) a bad prediction record.
    """
    from tqdm import tqdm

    from lakeshift import baselines as bl
    from lakeshift import report_html
    from lakeshift.scoring import Prediction, PredictionsFile, selected_maps

    if not runs:
        raise LakeshiftError("no predictions files to report on")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    maps_cache: dict[Path, dict[str, ScoringMap]] = {}
    for run in runs:
        mp = run.maps_path.resolve()
        if mp not in maps_cache:
            maps_cache[mp] = load_scoring_maps(mp)

    # Model runs are read first: the reference policies answer the same maps the models were asked.
    jobs: list[tuple[str, Path, Mapping[str, ScoringMap], PredictionsFile, dict[str, Any]]] = []
    warnings: list[str] = []
    asked: dict[Path, dict[str, ScoringMap]] = {}
    for run in runs:
        mp = run.maps_path.resolve()
        pf = read_predictions(run.path, maps_cache[mp], strict=strict)
        warnings += pf.warnings
        jobs.append((run.name or run.path.stem, mp, maps_cache[mp], pf, run.defaults))
        asked.setdefault(mp, {}).update(selected_maps(maps_cache[mp], pf))
    for mp, maps in maps_cache.items():
        subset = asked.get(mp) or maps
        for policy in baselines:
            preds = {
                r["id"]: Prediction(
                    r["id"], r["output"], {k: v for k, v in r.items() if k not in ("id", "output")}, 0
                )
                for r in bl.baseline_predictions(subset.values(), policy)
            }
            split = next(iter(maps.values())).split or mp.parent.name
            jobs.append((f"baseline-{policy}__{split}", mp, subset, PredictionsFile(mp, preds, []), {}))

    records: list[dict[str, Any]] = []
    files: list[Path] = []
    sampler = report_html.ExampleSampler(n_examples, n_strata_hint=len(jobs))
    used_names: set[str] = set()
    bar = tqdm(jobs, desc="scoring", unit="file", disable=not progress, file=None)
    for name, mp, maps, pf, defaults in bar:
        scored = list(score_predictions(maps, pf, compat=compat, check_trace=check_trace, defaults=defaults))
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

    run_keys = sorted({run_key(r) for r in records}, key=run_sort_key)
    by_split_size = analysis.by_fields(records, "split", "size")
    by_split_dinf = analysis.by_fields(records, "split", "d_inf")
    by_split = analysis.by_fields(records, "split")
    test_records = [r for r in records if r.get("split") in analysis.TEST_SPLITS[:3]] or records
    by_length = analysis.by_fields(test_records, "optimal_length")
    # Reference policies have no token counts: lengths are measured on model runs only.
    model_runs = [k for k in run_keys if k[1] != "baseline"] or run_keys
    unit = analysis.length_unit(c for k, c in by_split_size.items() if k[0] in model_runs)

    faith: dict[tuple, dict] = {}
    for r in records:
        if r.get("trace_faithful") is None:
            continue
        f = faith.setdefault(
            (run_key(r), r.get("split")),
            {
                "traced": 0,
                "faithful": 0,
                "agree": 0,
                "agree_n": 0,
                "div_steps": 0,
                "diverged": 0,
                "success": 0,
                "faithful_success": 0,
            },
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

    tables = [
        t
        for t in (
            table1(by_split_size, run_keys),
            table3(by_split_dinf, run_keys),
            table5(by_split_size, model_runs, unit),
            table5(by_split_size, model_runs, unit, correct_only=False),
            table10(by_split_size, model_runs, unit),
            verdict_table(by_split, run_keys),
            faithfulness_table(by_split, faith),
        )
        if t is not None
    ]
    for t in tables:
        files += t.write(out)
    for name, cells, fields in (
        ("by_size", by_split_size, ["split", "size"]),
        ("by_dinf", by_split_dinf, ["split", "d_inf"]),
        ("by_length", by_length, ["optimal_length"]),
        ("by_split", by_split, ["split"]),
    ):
        files.append(_write_long_csv(out / f"{name}.csv", analysis.long_rows(cells, fields)))

    train_hist = None
    if train_maps is not None:
        from lakeshift.io import read_jsonl

        train_hist = analysis.training_lengths(rec for _, rec in read_jsonl(train_maps))
    figures = {
        "Accuracy vs optimal path length (paper Figure 4)": plot_accuracy_vs_length(
            by_length, run_keys, train_hist, out
        ),
        "Accuracy vs start-goal distance": plot_accuracy_vs_dinf(by_split_dinf, run_keys, out),
        "Accuracy vs map size": plot_accuracy_vs_size(by_split_size, run_keys, out),
        "Verdict breakdown": plot_verdicts(by_split, run_keys, out),
    }
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
        summary={"records": len(records), "runs": len(run_keys), "length_unit": unit, "compat": compat},
    )
    files.append(html_path)
    return ReportResult(out, files, len(records), warnings, run_keys)


def _write_long_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    with atomic_write(path) as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
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
    return "\n".join(lines)


def iter_unique(items: Iterable[Any]) -> list[Any]:
    """Order-preserving de-duplication."""
    seen: set = set()
    return [x for x in items if not (x in seen or seen.add(x))]
