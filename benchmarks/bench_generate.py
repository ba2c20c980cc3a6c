"""Map generation speed: maps/s on one core, text only, with solving (optimal length, path, path count).

Run: ``python benchmarks/bench_generate.py [--count N] [--size 10] [--hole-prob 0.1] [--d-inf-min 1]``.
The issue's target is at least 30,000 maps/s at 10x10.
"""

from __future__ import annotations

import argparse
import time

from lakeshift.generate import Group, SplitSpec, generate_split


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=10)
    ap.add_argument("--hole-prob", type=float, default=0.1)
    ap.add_argument("--d-inf-min", type=int, default=1)
    ap.add_argument("--tie-break", default="priority")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    spec = SplitSpec(
        "bench",
        (Group(args.size, args.count, args.hole_prob, d_inf_min=args.d_inf_min),),
        tie_break=args.tie_break,
    )
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        records, stats = generate_split(spec, seed=0)
        best = min(best, time.perf_counter() - t0)
    print(
        f"{args.size}x{args.size}, hole prob {args.hole_prob}, d_inf >= {args.d_inf_min}, "
        f"tie-break {args.tie_break}: {len(records)} maps in {best:.3f} s (best of {args.repeat}) = "
        f"{len(records) / best:,.0f} maps/s on one core; draws per map {stats.attempts / len(records):.2f}"
    )


if __name__ == "__main__":
    main()
