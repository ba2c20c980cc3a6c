"""Resource bounds for ``lakeshift generate``, estimated from sizes, counts and formats before any work: the
memory, disk and time of writing a suite, and the bytes of one map's SFT records that the study-time
estimates (:mod:`lakeshift.studies.estimates`) build on.

Why: SFT files grow fast with the map size. A ``grid`` CoT writes the whole map after every move, so one
``n x n`` record holds about ``2n`` maps of ``n^2`` characters (``n^3``); at ``n = 1000`` one record is
gigabytes. A run that cannot fit should say so at once, not hang the machine.

How the estimate works: the bytes of one map's SFT records, per (input, CoT) pair, are measured on small
calibration maps (sizes 6 to 24, a hole lattice, start and goal in opposite corners, so the optimal path has
the largest hole-free length ``2(n - 1)``) and extrapolated with a least-squares cubic in ``n`` (every format
is at most cubic: a map per step). Peak memory is the largest chunk of records in flight per worker plus
the map records themselves; time follows the throughputs of benchmarks/log.md (2 cores). It is an upper
estimate of typical maps, good to a small factor, which is what refusing a hopeless run needs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lakeshift.data import records
from lakeshift.data.maps import record_from_map
from lakeshift.data.suites import MAPS_PER_JOB
from lakeshift.env import FrozenLakeMap
from lakeshift.errors import LakeshiftError
from lakeshift.io import dumps, free_disk

#: Measured: SFT text rendered and written per second and worker (grid CoT at n = 150..300: 33-42 MB/s).
SFT_BYTES_PER_S = 30e6
#: Measured: a gymnasium frame rendered and saved as PNG, per map and worker.
IMAGE_S = 0.01
PNG_BYTES = 12_000
#: Measured: one map drawn and solved, per cell (n = 60..600: ~0.02 us per cell per attempt, a few attempts).
SOLVE_S_PER_CELL = 2e-7
SOLVE_S_PER_MAP = 60e-6
#: Strings are built, joined and sent between processes: each chunk's text is held about this many times.
COPIES = 2
_CAL_SIZES = (6, 9, 12, 15, 18, 21, 24)


@dataclass(frozen=True)
class Estimate:
    """What generating a suite will take (upper estimates)."""

    memory_bytes: float
    seconds: float
    disk_bytes: float
    n_maps: int
    largest: int  # the largest map size

    def describe(self) -> str:
        return (
            f"{self.n_maps:,} maps up to {self.largest}x{self.largest}: about "
            f"{format_bytes(self.memory_bytes)} of memory, {format_bytes(self.disk_bytes)} on disk, "
            f"{_duration(self.seconds)}"
        )


def format_bytes(n: float) -> str:
    """A size as users read it: ``"1.5 GB"``, or ``"12 MB"`` below a tenth of a gigabyte."""
    return f"{n / 2**30:.1f} GB" if n >= 2**30 / 10 else f"{n / 2**20:.0f} MB"


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:,.0f} days"


def calibration_record(n: int) -> dict:
    """The ``n x n`` map record the estimates measure: a hole lattice with start and goal in opposite corners,
    so the optimal path has the largest hole-free length ``2(n - 1)``."""
    holes = frozenset((r, c) for r in range(1, n) for c in range(n - 1) if (r + 2 * c) % 5 == 0)
    holes -= {(n - 1, n - 1)}
    return record_from_map(FrozenLakeMap(n, holes, (0, 0), (n - 1, n - 1)), f"cal-{n}", "calibration")


@lru_cache(maxsize=64)
def _format_model(input_format: str, cot_format: str) -> tuple[float, ...]:
    """Least-squares coefficients ``(c0, c1, c2, c3)`` of one record's bytes as a cubic in ``n``."""
    xs, ys = [], []
    for n in _CAL_SIZES:
        rec = calibration_record(n)
        made = records.sft_records(rec, "test", [input_format], [cot_format], f"images/{rec['id']}.png")
        xs.append(float(n))
        ys.append(float(len(dumps(next(iter(made.values()))).encode("utf-8")) + 1))
    return _lstsq_cubic(xs, ys)


def _lstsq_cubic(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, ...]:
    """Solves the 4x4 normal equations of a cubic fit (pure Python: the core imports no numpy)."""
    a = [[sum(x ** (i + j) for x in xs) for j in range(4)] for i in range(4)]
    b = [sum(y * x**i for x, y in zip(xs, ys, strict=True)) for i in range(4)]
    for col in range(4):  # Gaussian elimination with partial pivoting
        pivot = max(range(col, 4), key=lambda r: abs(a[r][col]))
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        for r in range(col + 1, 4):
            f = a[r][col] / a[col][col]
            a[r] = [v - f * p for v, p in zip(a[r], a[col], strict=True)]
            b[r] -= f * b[col]
    coef = [0.0] * 4
    for r in range(3, -1, -1):
        coef[r] = (b[r] - sum(a[r][j] * coef[j] for j in range(r + 1, 4))) / a[r][r]
    return tuple(coef)


def record_bytes(n: int, inputs: Sequence[str], cots: Sequence[str]) -> float:
    """Estimated bytes of one ``n x n`` map's SFT lines, summed over every (input, CoT) pair."""
    total = 0.0
    for i in inputs:
        for c in cots:
            c0, c1, c2, c3 = _format_model(i, c)
            total += max(c0 + c1 * n + c2 * n * n + c3 * n**3, 1.0)
    return total


def estimate(
    sizes_counts: Sequence[tuple[int, int]],
    inputs: Sequence[str],
    cots: Sequence[str],
    *,
    images: bool,
    workers: int,
) -> Estimate:
    """The resources of generating ``count`` maps of each ``size`` with these SFT formats."""
    maps = sum(c for _, c in sizes_counts)
    if not sizes_counts or maps == 0:
        return Estimate(0.0, 0.0, 0.0, 0, 0)
    text_inputs = [i for i in inputs if images or i != "image"]
    per_size = {n: record_bytes(n, text_inputs, cots) for n in {n for n, _ in sizes_counts}}
    sft_total = sum(per_size[n] * c for n, c in sizes_counts)
    # The largest maps' records of one job together: its text, held COPIES times, per busy worker; the map
    # records (rows of n characters, the path) stay in memory for the whole split.
    biggest: list[float] = []
    for n, c in sorted(sizes_counts, reverse=True):
        biggest += [per_size[n]] * min(c, MAPS_PER_JOB - len(biggest))
        if len(biggest) >= MAPS_PER_JOB:
            break
    n_chunks = max(1, -(-maps // MAPS_PER_JOB))
    # The workers' chunks, and with a pool the one the writer holds.
    in_flight = min(workers, n_chunks) + (workers > 1)
    records = sum(c * (3 * n * n + 40 * n + 600) for n, c in sizes_counts)
    largest = max(n for n, _ in sizes_counts)
    solver = min(workers, maps) * (largest**3 / 2 + 8 * largest**2)
    memory = COPIES * sum(biggest) * in_flight + records + solver + 100e6
    seconds = sft_total / SFT_BYTES_PER_S
    seconds += sum(c * (SOLVE_S_PER_MAP + SOLVE_S_PER_CELL * n * n * n / 10) for n, c in sizes_counts)
    if images and "image" in inputs:
        seconds += maps * IMAGE_S
    seconds /= max(1, min(workers, n_chunks))
    disk = sft_total + records / 3 + (maps * PNG_BYTES if images else 0)
    return Estimate(memory, seconds, disk, maps, largest)


def available_memory() -> float:
    """Bytes of memory this process can use: ``MemAvailable`` (Linux), else the physical memory."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return float("inf")


def check(
    est: Estimate, out: Path, *, max_memory_gb: float | None, max_hours: float, where: str | None = None
) -> None:
    """Refuses (one line) a run that the machine cannot hold or that would take absurdly long.

    ``where`` names the request in a file (``base.yaml: corpus.maps``) for runs that have no command-line
    options to loosen the limits; the message then asks for fewer or smaller maps.

    Raises:
        LakeshiftError: naming the estimate, the limit and the option that raises it.
    """
    if est.n_maps == 0:
        return
    prefix = f"{where}: " if where else ""
    limit = max_memory_gb * 2**30 if max_memory_gb is not None else available_memory()
    if est.memory_bytes > limit:
        which = f"--max-memory-gb {max_memory_gb:g}" if max_memory_gb is not None else "available memory"
        advice = (
            "use fewer or smaller maps"
            if where
            else "use smaller sizes, fewer --inputs/--cots or --workers, or raise --max-memory-gb if the "
            "estimate is too cautious"
        )
        raise LakeshiftError(
            f"{prefix}{est.describe()}; that is more than the {format_bytes(limit)} of {which}: {advice}"
        )
    if est.seconds > max_hours * 3600:
        advice = "use fewer or smaller maps" if where else "lower the counts or sizes, or raise --max-hours"
        which = f"{max_hours:g} hours" if where else f"--max-hours {max_hours:g}"
        raise LakeshiftError(f"{prefix}{est.describe()}; that is more than {which}: {advice}")
    disk = free_disk(out)
    if est.disk_bytes > disk:
        advice = (
            "use fewer or smaller maps" if where else "use smaller sizes or counts, or fewer --inputs/--cots"
        )
        raise LakeshiftError(f"{prefix}{est.describe()}; {out} has only {format_bytes(disk)} free: {advice}")


def suite_sizes(specs: Sequence, imported_counts: dict[str, int] | None = None) -> list[tuple[int, int]]:
    """``(size, count)`` of every group of a suite's :class:`~lakeshift.data.generate.SplitSpec` list; an
    embedded split has as many ``embed_size`` maps as its source split (``imported_counts`` for imports)."""
    counts = dict(imported_counts or {})
    out: list[tuple[int, int]] = []
    for spec in specs:
        if spec.embed_source:
            n = counts.get(spec.embed_source, 0)
            out.append((spec.embed_size, n))
        elif spec.name not in counts:
            out += [(g.size, g.count) for g in spec.groups]
            counts[spec.name] = sum(g.count for g in spec.groups)
        counts.setdefault(spec.name, sum(g.count for g in spec.groups))
    return out
