"""Training curves of run folders: loss (SFT) or reward, success rate and completion length (GRPO) per step.

    python scripts/plot_training.py RUN [RUN ...] --out curves.png [--smooth 20]

Reads each run's ``metrics.jsonl`` (one row per log event, written by ``lakeshift train``) and draws one
panel per quantity the runs logged, a line per run, smoothed with a trailing mean over ``--smooth`` log
events (the raw values are drawn faintly behind).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PANELS = (
    ("loss", "training loss"),
    ("reward", "weighted reward (GRPO)"),
    ("success_rate", "sampled success rate (GRPO)"),
    ("completions/mean_length", "mean completion length, tokens (GRPO)"),
)


def series(run: Path, key: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if isinstance(row.get(key), (int, float)):
            steps.append(int(row["step"]))
            values.append(float(row[key]))
    return steps, values


def trailing_mean(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smooth", type=int, default=20)
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(k, t) for k, t in PANELS if any(series(r, k)[0] for r in args.runs)]
    if not panels:
        raise SystemExit("no run logged any of: " + ", ".join(k for k, _ in PANELS))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 2.8, 3.2), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels, strict=True):
        for i, run in enumerate(args.runs):
            steps, values = series(run, key)
            if not steps:
                continue
            color = f"C{i}"
            ax.plot(steps, values, color=color, alpha=0.2, lw=0.8)
            ax.plot(steps, trailing_mean(values, args.smooth), color=color, lw=1.6, label=run.name)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    # Beside the panels, never over the data; run names are long.
    fig.legend(handles, labels, loc="center right", fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1 - 2.8 / fig.get_figwidth(), 1))
    fig.savefig(args.out, dpi=120, metadata={"Software": None})
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
