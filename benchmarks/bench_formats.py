"""Speed of the text side of a suite: SFT records (prompts, traces, map rendering) and rendering alone.

Maps are drawn like the paper suite's generated splits (id sizes 3-6 with hole probability 0.2, ood-size and
ood-dist sizes 7-10 with 0.1, embed10-test 10x10), ``--per-group`` of each group. For each map all 24 SFT
records (4 input formats x 6 CoT formats, as :func:`lakeshift.data.suites.build_suite` writes them) are built
with :func:`lakeshift.data.records.sft_records` and serialised with :func:`lakeshift.io.dumps`. Also timed:
:func:`lakeshift.formats.render` of every intermediate state per text format, and
:func:`lakeshift.traces.completion` per CoT format. One core, best of ``--repeat``::

    python benchmarks/bench_formats.py [--per-group 60] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from lakeshift import formats, traces
from lakeshift.data import map_from_record, paper_suite, records
from lakeshift.data.generate import SplitSpec, generate_split
from lakeshift.io import dumps


def paper_like_maps(per_group: int) -> list[dict]:
    """``per_group`` maps of every generated group of the paper suite (no embedded split)."""
    out: list[dict] = []
    for spec in paper_suite():
        if spec.embed_source:
            continue
        groups = tuple(type(g)(**{**g.__dict__, "count": per_group}) for g in spec.groups)
        recs, _ = generate_split(SplitSpec(spec.name, groups, train=spec.train), seed=0)
        out.extend(recs)
    return out


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-group", type=int, default=60, help="maps per paper-suite group (22 groups)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    recs = paper_like_maps(args.per_group)
    n = len(recs)
    per_map = len(formats.INPUT_FORMATS) * len(traces.COT_FORMATS)
    mean_len = sum(r["optimal_length"] for r in recs) / n
    print(
        f"{n} paper-suite-like maps (sizes 3-10, mean optimal length {mean_len:.1f}), {per_map} records each"
    )

    def build() -> None:
        for rec in recs:
            records.sft_records(rec, "test")

    def build_and_dump() -> None:
        for rec in recs:
            for r in records.sft_records(rec, "test").values():
                dumps(r)

    for name, fn in (("build", build), ("build + dumps", build_and_dump)):
        t = best_of(args.repeat, fn)
        print(
            f"sft_records, {name:13s}: {n * per_map / t:10,.0f} records/s  ({n / t:7,.0f} maps/s, {t:.3f} s)"
        )

    maps = [map_from_record(r) for r in recs]
    states = [
        (m, pos) for m, r in zip(maps, recs, strict=True) for pos in m.simulate(r["optimal_path"]).positions
    ]
    for fmt in formats.TEXT_FORMATS:

        def render_all(fmt: str = fmt) -> None:
            for m, pos in states:
                formats.render(m, fmt, player=pos)

        t = best_of(args.repeat, render_all)
        print(f"render {fmt:5s}: {len(states) / t:10,.0f} states/s")
    for cot in traces.COT_FORMATS:

        def complete_all(cot: str = cot) -> None:
            for m, r in zip(maps, recs, strict=True):
                traces.completion(m, r["optimal_path"], cot)

        t = best_of(args.repeat, complete_all)
        print(f"completion {cot:10s}: {n / t:10,.0f} traces/s")


if __name__ == "__main__":
    main()
