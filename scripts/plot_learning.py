"""Learning curves of ``bench_learning.py`` results: accuracy against training minutes, one line per recipe.

    python scripts/plot_learning.py OUT/results.jsonl [MORE.jsonl ...] --out curves.png

A recipe is every arm that differs only in its time budget (same format pair, model, training options and
augmentation); its arms make one line, with 95% Wilson intervals, in one panel per split (id-test,
ood-size, ood-dist). Arms of a single budget are drawn as points. The x axis is logarithmic (5, 15, 45,
120 minutes are evenly spaced); recipes measured at the same budget are set slightly apart.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from lakeshift.io import iter_lines
from lakeshift.report.analysis import wilson

SPLITS = ("id-test", "ood-size", "ood-dist")
TITLES = {"id-test": "ID (3x3-6x6)", "ood-size": "OOD size (7x7-10x10)", "ood-dist": "OOD d_inf >= 6"}


def recipe(row: dict[str, Any]) -> str:
    """The arm's name without its minutes: what one curve holds."""
    options = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in row["train"].items())
    augment = f", augment {row['augment']}" if row.get("augment") else ""
    return f"{row['input']} / {row['cot']}, {row['model']} ({options}{augment})"


def read_rows(paths: list[Path]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for path in paths:
        for n, line in iter_lines(path):  # a committed results.jsonl.gz reads as the plain file
            try:
                row = json.loads(line)
                rows[row["arm"]] = row  # a later file's arm replaces an earlier one of the same name
            except (json.JSONDecodeError, KeyError, TypeError):
                raise SystemExit(f"{path}:{n}: not a bench_learning result row") from None
    return list(rows.values())


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        curves[recipe(row)].append(row)
    fig, axes = plt.subplots(1, len(SPLITS), figsize=(15, 5.2), sharey=True)
    colors = plt.get_cmap("tab10").colors
    markers = "osD^v<>Ph*"
    for i, (name, arms) in enumerate(sorted(curves.items())):
        # recipes measured at the same budget sit side by side, not on top of each other
        dodge = 1 + 0.025 * (i - (len(curves) - 1) / 2)
        arms.sort(key=lambda r: r["minutes"])
        for ax, split in zip(axes, SPLITS, strict=True):
            pts = [(r["minutes"], r[split]["k"], r[split]["n"]) for r in arms if r.get(split, {}).get("n")]
            if not pts:
                continue
            xs = [m * dodge for m, _, _ in pts]
            ys = [k / n for _, k, n in pts]
            lo, hi = zip(*(wilson(k, n) for _, k, n in pts), strict=True)
            err = [[y - a for y, a in zip(ys, lo, strict=True)], [b - y for y, b in zip(ys, hi, strict=True)]]
            style = {"marker": markers[i // 10 % 10], "color": colors[i % 10], "ms": 5, "capsize": 3}
            ax.errorbar(xs, ys, yerr=err, label=name, **style)
    for ax, split in zip(axes, SPLITS, strict=True):
        ax.set_xscale("log")
        ticks = sorted({r["minutes"] for r in rows})
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_title(TITLES[split])
        ax.set_xlabel("training minutes (2 CPU cores)")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("success rate (95% Wilson interval)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    rows_of_legend = -(-len(labels) // 2)
    fig.tight_layout(rect=(0, 0.05 + 0.035 * rows_of_legend, 1, 1))
    fig.savefig(out, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="bench_learning.py results.jsonl files")
    parser.add_argument("--out", type=Path, required=True, help="the figure (.png, .pdf, .svg)")
    parser.add_argument("--only", nargs="*", help="recipes whose name contains one of these strings")
    args = parser.parse_args()
    for path in args.results:
        if not path.is_file():
            raise SystemExit(f"{path}: no such file")
    rows = read_rows(args.results)
    if args.only:
        rows = [r for r in rows if any(s in recipe(r) for s in args.only)]
    if not rows:
        raise SystemExit("no result rows to plot")
    plot(rows, args.out)
    print(f"wrote {args.out} ({len(rows)} arms)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
