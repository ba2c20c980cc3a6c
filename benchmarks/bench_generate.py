"""Generation speed.

1. Maps/s on one core, text only, with solving (optimal length, optimal path and number of optimal paths),
   full ``maps.jsonl`` records; the issue's target is at least 30,000 maps/s at 10x10::

       python benchmarks/bench_generate.py [--count N] [--size 10] [--hole-prob 0.1] [--d-inf-min 1]

2. The whole ``--suite paper`` (every split, images and all 24 SFT files per split) into a fresh folder: wall
   time, maps/s and peak memory (largest process); the target is under 60 s on the 2-core machine::

       python benchmarks/bench_generate.py --suite-out /tmp/paper-bench [--workers 2]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import time
from pathlib import Path

from lakeshift.data.generate import Group, SplitSpec, generate_split


def bench_maps(args: argparse.Namespace) -> None:
    spec = SplitSpec(
        "bench",
        (Group(args.size, args.count, args.hole_prob, d_inf_min=args.d_inf_min),),
        tie_break=args.tie_break,
    )
    best = best_cpu = float("inf")
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        records, stats = generate_split(spec, seed=0)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    n = len(records)
    print(
        f"{args.size}x{args.size}, hole prob {args.hole_prob}, d_inf >= {args.d_inf_min}, "
        f"tie-break {args.tie_break}: {n} maps in {best:.3f} s wall (best of {args.repeat}) = "
        f"{n / best:,.0f} maps/s; {n / best_cpu:,.0f} maps per CPU-second (one core; the wall figure "
        f"drops when other processes share the core); draws per map {stats.attempts / n:.2f}"
    )


def bench_suite(args: argparse.Namespace) -> None:
    from lakeshift.data import build_suite, paper_suite

    out = Path(args.suite_out)
    if out.exists():
        shutil.rmtree(out)
    t0 = time.perf_counter()
    result = build_suite(paper_suite(), out, suite_name="paper", workers=args.workers, progress=False)
    wall = time.perf_counter() - t0
    n = sum(int(r["count"]) for r in result.reports.values())
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    peak = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    print(
        f"--suite paper, {args.workers} worker(s): {n} maps, images and {len(result.written) * 24} SFT files "
        f"in {wall:.1f} s = {n / wall:.0f} maps/s; {size / 2**20:.0f} MiB written; "
        f"peak RSS of the largest process {peak / 1024:.0f} MiB"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=10)
    ap.add_argument("--hole-prob", type=float, default=0.1)
    ap.add_argument("--d-inf-min", type=int, default=1)
    ap.add_argument("--tie-break", default="direct")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--suite-out", help="benchmark the whole paper suite, written into this (fresh) folder")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.suite_out:
        bench_suite(args)
    else:
        bench_maps(args)


if __name__ == "__main__":
    main()
