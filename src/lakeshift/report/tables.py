"""The paper's tables (1, 3, 5, 10) and ours (verdicts, splits, faithfulness) in Markdown, CSV and LaTeX."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeshift.io import atomic_write, printable
from lakeshift.report import analysis
from lakeshift.report.analysis import Cell, RunKey, run_sort_key
from lakeshift.report.references import Reference
from lakeshift.scoring import VERDICTS

INPUT_NAMES = {"image": "Image", "desc": "Descr.", "table": "Table", "grid": "Grid", "baseline": "Baseline"}
COT_NAMES = {
    "zero-shot": "zero-shot",
    "none": "no CoT",
    "desc": "Descr.",
    "grid": "Grid",
    "table": "Table",
    "grid+desc": "Grid + Descr.",
    "table+desc": "Table + Descr.",
    "astar": "A* trace",
    "coords": "Coords",
    "wave": "Wave",
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
        int_columns: Value columns shown as whole numbers.
        published_from: The first row of published results (a reference's, never run here): they come
            last and are set apart under their own heading; ``None``: every row is a local run.
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
    published_from: int | None = None

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
        for i, (labels, values) in enumerate(self.rows):
            if i == self.published_from:
                lines.append("| " + " | ".join([f"**{PUBLISHED_HEADING}**", *[""] * (len(head) - 1)]) + " |")
            lines.append("| " + " | ".join([*map(_md, labels), *self._cells(values)]) + " |")
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.label_columns + self.flat_columns())
        for labels, values in self.rows:
            w.writerow([*map(printable, labels), *("" if v is None else round(v, 4) for v in values)])
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
        for i, (labels, values) in enumerate(self.rows):
            if i == self.published_from:
                width = nl + len(self.columns)
                lines += [
                    "\\midrule",
                    f"\\multicolumn{{{width}}}{{l}}{{\\textit{{{PUBLISHED_HEADING}}}}} \\\\",
                ]
                previous = []
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
        width = nl + len(self.columns)
        for i, (labels, values) in enumerate(self.rows):
            if i == self.published_from:
                body.append(f'<tr class="published"><th colspan="{width}">{PUBLISHED_HEADING}</th></tr>')
            cells = "".join(f"<td>{escape(x)}</td>" for x in labels)
            cells += "".join(f'<td class="num">{c}</td>' for c in self._cells(values))
            published = self.published_from is not None and i >= self.published_from
            body.append(f'<tr class="ref">{cells}</tr>' if published else f"<tr>{cells}</tr>")
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


#: The heading over a table's published rows (a reference's results, set apart from the local runs).
PUBLISHED_HEADING = "Published results, not run here"

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
    s = printable(" ".join(str(s).splitlines()))
    out = []
    for i, ch in enumerate(s):
        edge = i == 0 or i == len(s) - 1 or s[i - 1].isspace() or s[i + 1].isspace()
        out.append("\\" + ch if ch in _MD_SPECIAL or (ch == "_" and edge) else ch)
    return "".join(out)


def _tex(s: str) -> str:
    s = "".join(_TEX_SPECIAL.get(ch, ch) for ch in printable(" ".join(str(s).splitlines())))
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
    """The local runs in paper order (input, CoT), then the reference's rows in the same order: published
    results come after every local row, set apart (:attr:`Table.published_from`)."""
    return sorted(
        iter_unique(runs),
        key=lambda k: (reference is not None and reference.is_key(k), *run_sort_key(k)[:4], k[0]),
    )


def set_published_apart(table: Table, reference: Reference | None) -> Table:
    """Marks where ``table``'s reference rows begin (they come last: :func:`ordered_runs`)."""
    if reference is not None:
        found = (i for i, (labels, _) in enumerate(table.rows) if labels[-1] == reference.label)
        table.published_from = next(found, None)
    return table


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
    splits = sorted({k[1] for k in by_split}, key=split_order)
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
        "starts on a shortest path, mean share of the start-goal distance covered (0 for a plan that ends "
        "no closer or farther away).",
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
    splits = sorted({k[1] for k in by_split}, key=split_order)
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
    for key in sorted(records_faith, key=lambda k: (run_sort_key(k[0]), split_order(k[1]))):
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


def split_order(split: Any) -> tuple:
    s = str(split)
    return (analysis.TEST_SPLITS.index(s) if s in analysis.TEST_SPLITS else len(analysis.TEST_SPLITS), s)


def iter_unique(items: Iterable[Any]) -> list[Any]:
    """Order-preserving de-duplication."""
    return list(dict.fromkeys(items))


def run_card_table(cards: Mapping[str, Mapping[str, Any]]) -> Table | None:
    """One row per model trained by lakeshift, from its ``run.json`` (:func:`run_card`): what a reader
    needs before any number (the base model, how long it trained, on which maps, the data's hash)."""
    rows = []
    for model, card in sorted(cards.items()):
        labels = [model, str(card.get("base") or "-"), str(card.get("trained_on") or "-")]
        labels.append(str(card.get("data_sha256") or "-"))
        rows.append((labels, [card.get("steps"), card.get("minutes"), card.get("maps")]))
    if not rows:
        return None
    return Table(
        "runs",
        "Runs: the models of this report as their run.json records them (base model, optimizer steps, "
        "training minutes, training maps and the first 12 hex digits of the training file's sha256).",
        ["Model", "Base model", "Trained on", "Data sha256"],
        [("Training", 3)],
        ["steps", "minutes", "maps"],
        rows,
        1,
        ["train"],
        ("steps", "maps"),
    )


def run_card(record: Mapping[str, Any]) -> dict[str, Any]:
    """The run card of a ``run.json`` record: base model, steps, minutes, training maps, data hash (what is
    absent stays ``None``)."""
    data: Mapping[str, Any] = record["data"] if isinstance(record.get("data"), Mapping) else {}
    model: Mapping[str, Any] = record["model"] if isinstance(record.get("model"), Mapping) else {}
    number = lambda v: float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None  # noqa: E731
    fmt = "/".join(str(record[k]) for k in ("input_format", "cot_format") if isinstance(record.get(k), str))
    sha = data.get("sha256")
    seconds = number(record.get("train_seconds"))
    return {
        "base": model.get("name"),
        "steps": number(record.get("global_step")),
        "minutes": None if seconds is None else seconds / 60,
        "maps": number(data.get("n_records")),
        "trained_on": " ".join(x for x in (str(data.get("split") or ""), fmt) if x) or None,
        "data_sha256": sha[:12] if isinstance(sha, str) else None,
    }
