"""The report's figures (PNG and SVG): accuracy against length, d_inf and size, and verdict shares.

Small multiples readable at 20 runs (the package docstring gives the layout rules)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lakeshift.io import atomic_write, printable
from lakeshift.report.analysis import Cell, RunKey, run_sort_key
from lakeshift.report.references import Reference
from lakeshift.report.tables import COT_NAMES, INPUT_NAMES, iter_unique, run_labels, split_order
from lakeshift.scoring import VERDICTS


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
    "wave": "#7b4173",
}
_EXTRA_COLORS = ("#bcbd22", "#e377c2", "#393b79", "#637939", "#8c6d31", "#843c39")
#: Reference policies are grey (they are not models): shade and line style per policy.
BASELINE_STYLES = {"oracle": ("0.25", "-"), "greedy": ("0.5", "-."), "random": ("0.65", ":")}
#: Runs with the same input and CoT format (e.g. two study arms) differ by marker; a variant (what a model
#: name adds to its formats, e.g. ``@8min``) has the same marker in every panel.
VARIANT_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
#: A 95% Wilson band is drawn only over points with at least this many maps, and only in panels with at
#: most :data:`BAND_MAX_LINES` model lines: more bands than that hide the lines they qualify. Every other
#: point carries its interval as an error bar.
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
    name = printable(name)
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
    ax: Any,
    pts: Sequence[tuple[float, float | None, Cell | None]],
    style: dict[str, Any],
    band: bool,
    faint: bool = False,
) -> None:
    """One line with its 95% Wilson interval at every point: with ``band``, a band over the points with at
    least :data:`BAND_MIN_N` maps; an error bar at every other point (small n, or a crowded panel), ``faint``
    for a reference policy's line, whose bars would otherwise hide the models' at the same x."""
    pts = [p for p in pts if p[2] is None or p[2].n >= POINT_MIN_N]
    if not pts:
        return
    xs = [p[0] for p in pts]
    ax.plot(xs, [p[1] for p in pts], **style)
    cells = [p[2] for p in pts]
    banded = [False] * len(pts)
    if band and all(c is not None for c in cells):
        where = [c.n >= BAND_MIN_N for c in cells]  # type: ignore[union-attr]
        if sum(where) >= 2:
            lo = [c.interval[0] for c in cells]  # type: ignore[union-attr]
            hi = [c.interval[1] for c in cells]  # type: ignore[union-attr]
            ax.fill_between(xs, lo, hi, where=where, color=style["color"], alpha=0.15, linewidth=0)
            banded = where
    bars = [
        (x, y, c)
        for (x, y, c), b in zip(pts, banded, strict=True)
        if c is not None and y is not None and not b
    ]
    if bars:
        ax.errorbar(
            [x for x, _, _ in bars],
            [y for _, y, _ in bars],
            yerr=[[y - c.interval[0] for _, y, c in bars], [c.interval[1] - y for _, y, c in bars]],
            fmt="none",
            ecolor=style["color"],
            elinewidth=0.6 if faint else 0.9,
            capsize=0 if faint else 2,
            alpha=0.3 if faint else 0.7,
        )


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
            [printable(label) for label in labels],
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
            _draw(
                ax, pts, styles.style(key), band and styles.kind(key) == "model", styles.kind(key) != "model"
            )
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
        f"95% Wilson intervals: bands where n >= {BAND_MIN_N} and <= {BAND_MAX_LINES} lines, bars elsewhere; "
        "grey: reference policies; "
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
    splits = sorted({k[1] for k in by_split_dinf}, key=split_order)
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
                _draw(
                    ax,
                    pts,
                    styles.style(key),
                    band and styles.kind(key) == "model",
                    styles.kind(key) != "model",
                )
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
        f"95% Wilson intervals: bands where n >= {BAND_MIN_N} and <= {BAND_MAX_LINES} lines, bars elsewhere; "
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
                _draw(
                    ax,
                    pts,
                    styles.style(key),
                    band and styles.kind(key) == "model",
                    styles.kind(key) != "model",
                )
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
        f"95% Wilson intervals: bands where n >= {BAND_MIN_N} and <= {BAND_MAX_LINES} lines, bars elsewhere; "
        "grey: reference policies",
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
    splits = sorted({k[1] for k in by_split}, key=split_order) or [""]
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
