"""Learning curves and recipe sweeps for small models trained from scratch on this CPU (run by hand).

    python benchmarks/bench_learning.py --out bench-learning                      # the default sweep
    python benchmarks/bench_learning.py --out bench-learning --only desc-coords-mini-15
    python benchmarks/bench_learning.py --out bench-learning --list
    python benchmarks/bench_learning.py --out bench-learning --only A B --jobs 2    # two arms at a time
    python benchmarks/bench_learning.py --out bench-learning --only A --validation  # + validation splits

Each arm trains one model with ``lakeshift train`` under a time budget (``--max-minutes``, learning rate
annealed with the clock), predicts greedily with ``lakeshift predict`` on id-test (50 maps per size 3-6)
and on ood-size / ood-dist (25 per size 7-10), and scores with ``lakeshift score``; with ``--validation``
also on the validation splits ``val-id`` (50 per size 3-6) and ``val-ood`` (25 per size 7-10, d_inf >= 6),
disjoint from the training and test maps: choose arms and settings on those. The data is one suite (``SUITE``
below: 40,000 training maps with id-train's distribution) generated once into ``OUT/data``. Its seed 0 is that
of the ``configs/studies/cpu-*.yaml`` studies, whose id-test and OOD maps begin with the bench's; the
out-of-distribution studies (``configs/studies/ood-*.yaml``, ``configs/suites/suite-ood.yaml``) use seed 24,
so nothing chosen here was chosen on their test maps.
Results go to ``OUT/results.jsonl`` one line per arm as it finishes (rerunning skips finished arms, so an
interrupted sweep resumes), with the load average before and after training; ``OUT/results.md`` is the
table. Run one sweep at a time, on an otherwise idle machine: two training jobs on 2 cores slow each
other far more than 2x, unless each has its own core: ``--jobs N`` runs N arms at once with
``cpu_count // N`` threads each (on 2 cores two 1-thread `mini` runs at once made 1.1x the steps of
2-thread runs one after the other; benchmarks/log.md, "Threads"), and each row records its threads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lakeshift.studies.run import share_of_cores

SUITE = {
    "name": "bench-learning",
    "seed": 0,
    "splits": [
        {
            "name": "id-train",
            "train": True,
            "groups": [
                {"size": s, "count": c, "hole_prob": 0.2}
                for s, c in ((3, 4000), (4, 8000), (5, 12000), (6, 16000))
            ],
        },
        {
            "name": "id-test",
            "exclude": ["id-train"],
            "groups": [{"size": s, "count": 50, "hole_prob": 0.2} for s in (3, 4, 5, 6)],
        },
        {
            "name": "ood-size",
            "exclude": ["id-train"],
            "groups": [{"size": s, "count": 25, "hole_prob": 0.1} for s in (7, 8, 9, 10)],
        },
        {
            "name": "ood-dist",
            "exclude": ["id-train"],
            "groups": [{"size": s, "count": 25, "hole_prob": 0.1, "d_inf_min": 6} for s in (7, 8, 9, 10)],
        },
        # Validation maps for choosing arms, checkpoints and settings (``--validation``): their own split
        # names, hence their own random streams (map i of split s depends on (seed, s, i)), and disjoint
        # from the training and test maps, so no choice is made on a test split.
        {
            "name": "val-id",
            "exclude": ["id-train", "id-test"],
            "groups": [{"size": s, "count": 50, "hole_prob": 0.2} for s in (3, 4, 5, 6)],
        },
        {
            "name": "val-ood",
            "exclude": ["id-train", "ood-size", "ood-dist"],
            "groups": [{"size": s, "count": 25, "hole_prob": 0.1, "d_inf_min": 6} for s in (7, 8, 9, 10)],
        },
    ],
}
INPUTS = "grid,desc,table"
COTS = "none,coords,desc,grid+desc,grid,table,table+desc,astar"
SPLITS = ("id-test", "ood-size", "ood-dist")
#: The image arms' data: the same suite with images and the image SFT files (only generated for them).
IMAGE_DATA = "data-image"
VALIDATION_SPLITS = ("val-id", "val-ood")


def arm(
    input_format: str, cot: str, model: str, minutes: float, augment: str | None = None, **train: Any
) -> dict[str, Any]:
    """One sweep arm: a format pair, a named size, a time budget and extra ``lakeshift train`` options.

    ``augment`` (a ``lakeshift generate --augment`` value) trains on an augmented copy of the same suite
    (``OUT/data-<augment>``); every arm is tested on the same maps of ``OUT/data``.
    """
    extra = "".join(f"-{k.replace('_', '')}{v}" for k, v in sorted(train.items()))
    extra += f"-aug{augment_slug(augment)}" if augment else ""
    name = f"{input_format}-{cot.replace('+', '')}-{model}-{minutes:g}{extra}"
    return {
        "name": name,
        "input": input_format,
        "cot": cot,
        "model": model,
        "minutes": minutes,
        "augment": augment,
        "train": train,
    }


def augment_slug(augment: str) -> str:
    return augment.replace("=", "").replace(",", "-")


#: Base models the bench pretrains itself (into OUT/bases/<name>) before an arm fine-tunes them.
LOCAL_BASES = {
    "mini-cells-shift-base": "configs/pretrain/base-mini-cells-shift.yaml",
    "mini-cells-compose-base": "configs/pretrain/base-mini-cells-compose.yaml",
    "mini-cells-trace-next-base": "configs/pretrain/base-mini-cells-trace-next.yaml",
    "mini-cells-trace-goal-base": "configs/pretrain/base-mini-cells-trace-goal.yaml",
    "mini-cells-trace-player-base": "configs/pretrain/base-mini-cells-trace-player.yaml",
    "mini-vl-cells-image-base": "configs/pretrain/base-mini-vl-cells.yaml",
}
# The recipe arms measured on 2026-12-01 (benchmarks/log.md, RESULTS.md), then the learning curves.
CURVE_FORMATS = (("grid", "none"), ("grid", "coords"), ("desc", "desc"), ("grid", "grid+desc"))
#: Every CoT format, each with the input whose map it redraws (the paper's pairing), and no CoT.
TRACE_FORMATS = (
    ("grid", "grid+desc"),
    ("desc", "desc"),
    ("grid", "grid"),
    ("grid", "none"),
    ("table", "table+desc"),
    ("table", "table"),
    ("grid", "astar"),
    ("grid", "coords"),
)
ARMS = [
    arm("grid", "coords", "mini", 20, batch_size=32, lr=3e-3),
    arm("grid", "coords", "mini", 35, batch_size=32, lr=3e-3),
    *(arm(i, c, "mini", m, batch_size=32, lr=3e-3) for m in (5, 15, 45, 120) for i, c in CURVE_FORMATS),
    # Fine-tuning the shipped base (configs/pretrain/base-mini.yaml: map reading, random walks, no plan).
    *(arm(i, c, "mini-base", 5, batch_size=32, lr=3e-3) for i, c in CURVE_FORMATS),
    *(arm(i, c, "mini-base", 5, batch_size=32, lr=1e-3) for i, c in CURVE_FORMATS),
    *(arm(i, c, "mini-cells-base", m, batch_size=32, lr=3e-3) for m in (5, 15, 45) for i, c in CURVE_FORMATS),
    arm("grid", "none", "mini-cells-base", 60, batch_size=32, lr=3e-3),
    # Issue 9's demo levers at the demo's 5 minutes: a larger batch (fewer, fuller steps), a larger rate.
    arm("grid", "none", "mini-cells-base", 5, batch_size=64, lr=3e-3),
    arm("grid", "none", "mini-cells-base", 5, batch_size=32, lr=6e-3),
    # Row and column embeddings for map cells (lakeshift.models.cells), from scratch.
    *(
        arm(i, c, "mini-cells", m, batch_size=32, lr=3e-3, bf16=False)
        for m in (5, 15)
        for i, c in CURVE_FORMATS
    ),
    *(
        arm(i, c, "mini-base", 5, batch_size=32, lr=rate, bf16=False)
        for rate in (3e-3, 1e-3)
        for i, c in CURVE_FORMATS
    ),
    # Several optimal paths per map (the split's tie-break is one arbitrary rule the model must learn).
    *(arm(i, c, "mini-cells-base", 5, "paths=4", batch_size=32, lr=3e-3) for i, c in CURVE_FORMATS),
    # Issue 15: a base whose rows and columns move by a random offset per sequence (all 30 embeddings train).
    *(arm("grid", "none", "mini-cells-shift-base", m, batch_size=32, lr=3e-3) for m in (5, 60)),
    # ... and whose coordinate tokens are composed of trained row and column embeddings (the coords CoT).
    *(arm("grid", "coords", "mini-cells-compose-base", m, batch_size=32, lr=3e-3) for m in (5, 60)),
    # The trace-fluent base (configs/pretrain/base-mini-cells-trace.yaml): every CoT, no CoT as control.
    *(
        arm(i, c, "mini-cells-trace-base", m, batch_size=32, lr=3e-3)
        for m in (5, 15)
        for i, c in TRACE_FORMATS
    ),
    # ... continued with redrawn grids coupled to the cells they predict and stated moves walked.
    *(
        arm(i, c, "mini-cells-trace-next-base", m, batch_size=32, lr=3e-3)
        for m in (5, 15)
        for i, c in TRACE_FORMATS
    ),
    # ... the same, with every random walk ended at a goal moved to its last cell (walks_end_at_goal).
    *(
        arm(i, c, "mini-cells-trace-goal-base", m, batch_size=32, lr=3e-3)
        for m in (5, 15)
        for i, c in TRACE_FORMATS
    ),
    # ... and told where the player stands: desc maps walk, redrawn grids flag it (cell_player).
    *(
        arm(i, c, "mini-cells-trace-player-base", m, batch_size=32, lr=3e-3)
        for m in (5, 15)
        for i, c in TRACE_FORMATS
    ),
    # ... with a table map's cells given grid positions (--cells maps=...): table input learns only with them.
    *(
        arm(
            "table",
            c,
            "mini-cells-trace-player-base",
            m,
            batch_size=32,
            lr=3e-3,
            cells="maps=grid+table+desc",
        )
        for m in (5, 15)
        for c in ("table+desc", "table")
    ),
    # Image input: the image base (one visual token per cell, with its row and column), tower frozen.
    *(
        arm("image", "none", "mini-vl-cells-image-base", m, batch_size=32, lr=3e-3, vision_tower="frozen")
        for m in (5, 15)
    ),
]


#: The environment of every command (``--jobs`` gives each arm its share of the cores).
ENV = dict(os.environ)


def sh(argv: list[str], log: Path) -> float:
    """Runs ``argv`` with its output appended to ``log``; returns its peak resident memory in MiB."""
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(argv)}\n")
        f.flush()
        child = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=ENV)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"failed (exit {child.returncode}): {' '.join(argv)}; see {log}")
    return usage.ru_maxrss / 1024  # (kilobytes on Linux)


def load() -> float:
    return os.getloadavg()[0]


def run_arm(a: dict[str, Any], out: Path, data: Path, splits: tuple[str, ...] = SPLITS) -> dict[str, Any]:
    run = out / "runs" / a["name"]
    log = out / "runs" / f"{a['name']}.log"
    run.parent.mkdir(parents=True, exist_ok=True)
    argv = ["lakeshift", "train", "--data", str(data), "--input", a["input"], "--cot", a["cot"]]
    model = str(out / "bases" / a["model"]) if a["model"] in LOCAL_BASES else a["model"]
    argv += ["--model", model, "--prompt", "map-only", "--max-minutes", str(a["minutes"])]
    argv += ["--epochs", "1000", "--out", str(run)]
    if a.get("augment"):
        argv[argv.index("--data") + 1] = str(out / f"data-{augment_slug(a['augment'])}")
    if a["input"] == "image":
        data = out / IMAGE_DATA
        argv[argv.index("--data") + 1] = str(data)
    for key, value in a["train"].items():
        flag = key.replace("_", "-")
        argv += (
            [f"--{flag}" if value else f"--no-{flag}"]
            if isinstance(value, bool)
            else [f"--{flag}", str(value)]
        )
    if not (run / "model").is_dir():
        if run.exists():
            argv.append("--resume")
        load_before = load()
        peak_mib: float | None = sh(argv, log)
    else:
        load_before = peak_mib = None
    load_after = load()
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    row: dict[str, Any] = {
        "arm": a["name"],
        "input": a["input"],
        "cot": a["cot"],
        "model": a["model"],
        "n_params": record["model"].get("n_params"),
        "minutes": a["minutes"],
        "train": a["train"],
        "steps": record.get("global_step"),
        "train_seconds": record.get("train_seconds"),
        "load_before": load_before,
        "load_after_train": load_after,
        "threads": record.get("host", {}).get("threads"),
        "tokens_per_s": _tokens_per_second(run, record.get("train_seconds")),
        "peak_train_mib": None if peak_mib is None else round(peak_mib),
        "date": time.strftime("%Y-%m-%d"),
    }
    for split in splits:
        preds = run / f"{split}.jsonl"
        sh(
            [
                "lakeshift",
                "predict",
                "--model",
                str(run),
                "--data",
                str(data),
                "--split",
                split,
                "--out",
                str(preds),
            ],
            log,
        )
        scored = run / f"{split}.scored.jsonl"
        sh(
            [
                "lakeshift",
                "score",
                "--maps",
                str(data / split / "maps.jsonl"),
                "--predictions",
                str(preds),
                "--out",
                str(scored),
            ],
            log,
        )
        verdicts = [json.loads(x) for x in scored.read_text(encoding="utf-8").splitlines() if x.strip()]
        k, n = sum(bool(v["success"]) for v in verdicts), len(verdicts)
        by_size: dict[int, list[int]] = {}
        for v in verdicts:
            by_size.setdefault(int(v["size"]), [0, 0])
            by_size[int(v["size"])][0] += bool(v["success"])
            by_size[int(v["size"])][1] += 1
        faithful = [v["trace_faithful"] for v in verdicts if v.get("trace_faithful") is not None]
        row[split] = {
            "k": k,
            "n": n,
            "acc": round(k / n, 4) if n else None,
            "by_size": {str(s): f"{kk}/{nn}" for s, (kk, nn) in sorted(by_size.items())},
            # the scorer's trace check (None for formats it cannot check, e.g. no CoT)
            "faithful": sum(faithful) if faithful else None,
            "verdicts": dict(sorted(Counter(str(v["verdict"]) for v in verdicts).items())),
        }
    return row


def _tokens_per_second(run: Path, seconds: float | None) -> float | None:
    """Training tokens (the trainer's ``num_tokens``, prompt and answer) per second of training."""
    logged = [json.loads(x) for x in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if x]
    tokens = [m["num_tokens"] for m in logged if "num_tokens" in m]
    return round(tokens[-1] / seconds) if tokens and seconds else None


def table(rows: list[dict[str, Any]]) -> str:
    splits = [s for s in (*SPLITS, *VALIDATION_SPLITS) if any(s in r for r in rows)]
    lines = [
        "| arm | params | steps | load | " + " | ".join(splits) + " |",
        "|---|---|---|---|" + "---|" * len(splits),
    ]
    for r in rows:
        cells = [
            "-"
            if s not in r
            else f"{r[s]['k']}/{r[s]['n']} = {r[s]['acc']:.3f}"
            + (f", faithful {r[s]['faithful']}" if r[s].get("faithful") is not None else "")
            for s in splits
        ]
        lb = "-" if r["load_before"] is None else f"{r['load_before']:.1f}"
        lines.append(
            f"| {r['arm']} | {r['n_params']:,} | {r['steps']} | {lb}/{r['load_after_train']:.1f} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-learning"))
    parser.add_argument("--only", nargs="*", help="arm names to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the arms and exit")
    parser.add_argument("--jobs", type=int, default=1, help="arms run at once, each with its share of cores")
    parser.add_argument(
        "--validation",
        action="store_true",
        help="also predict the validation splits (val-id, val-ood): choose arms on these, never on test maps",
    )
    args = parser.parse_args()
    if args.list:
        for a in ARMS:
            print(a["name"])
        return 0
    arms = [a for a in ARMS if not args.only or a["name"] in args.only]
    if args.only and len(arms) != len(args.only):
        known = {a["name"] for a in ARMS}
        raise SystemExit(f"unknown arm(s): {', '.join(sorted(set(args.only) - known))} (see --list)")
    args.out.mkdir(parents=True, exist_ok=True)
    suite = args.out / "suite.json"
    suite.write_text(json.dumps(SUITE, indent=1), encoding="utf-8")
    data = args.out / "data"
    sh(
        [
            "lakeshift",
            "generate",
            "--suite",
            str(suite),
            "--out",
            str(data),
            "--no-images",
            "--no-progress",
            "--force",  # OUT/data is the bench's own: splits it already holds with this config are kept
            "--inputs",
            INPUTS,
            "--cots",
            COTS,
        ],
        args.out / "generate.log",
    )
    if any(a["input"] == "image" for a in arms):
        images = args.out / IMAGE_DATA
        argv = ["lakeshift", "generate", "--suite", str(suite), "--out", str(images), "--images", "--force"]
        argv += ["--no-progress", "--inputs", "image", "--cots", "none"]
        sh(argv, args.out / "generate.log")
        for split in SPLITS:  # the image arms are tested on the maps the text arms are
            if (images / split / "maps.jsonl").read_bytes() != (data / split / "maps.jsonl").read_bytes():
                raise SystemExit(f"{images / split}: test maps differ from {data / split}")
    for augment in sorted({a["augment"] for a in arms if a.get("augment")}):
        augmented = args.out / f"data-{augment_slug(augment)}"
        formats = [a for a in arms if a.get("augment") == augment]
        inputs = ",".join(sorted({a["input"] for a in formats}))
        cots = ",".join(sorted({a["cot"] for a in formats}))
        argv = ["lakeshift", "generate", "--suite", str(suite), "--out", str(augmented), "--no-images"]
        argv += ["--no-progress", "--inputs", inputs, "--cots", cots, "--augment", augment]
        sh(argv, args.out / "generate.log")
        for split in SPLITS:  # the arms must be comparable: same test maps whatever the training data
            if (augmented / split / "maps.jsonl").read_bytes() != (data / split / "maps.jsonl").read_bytes():
                raise SystemExit(f"{augmented / split}: test maps differ from {data / split}")
    for base in sorted({a["model"] for a in arms} & set(LOCAL_BASES)):
        folder = args.out / "bases" / base
        if not (folder / "model").is_dir():
            config = Path(__file__).resolve().parents[1] / LOCAL_BASES[base]
            argv = ["lakeshift", "pretrain", str(config), "--out", str(folder)]
            sh(argv + (["--resume"] if folder.exists() else []), args.out / f"pretrain-{base}.log")
    results = args.out / "results.jsonl"
    done = {json.loads(x)["arm"] for x in results.read_text().splitlines()} if results.is_file() else set()
    if args.jobs > 1:
        ENV.update(share_of_cores(args.jobs))
    lock = threading.Lock()

    def one(a: dict[str, Any]) -> None:
        print(f"arm {a['name']} ({a['minutes']:g} min of training)", file=sys.stderr, flush=True)
        row = run_arm(a, args.out, data, SPLITS + (VALIDATION_SPLITS if args.validation else ()))
        with lock, results.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for future in [pool.submit(one, a) for a in arms if a["name"] not in done]:
            future.result()
    rows = [json.loads(x) for x in results.read_text().splitlines()]
    (args.out / "results.md").write_text(table(rows), encoding="utf-8")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
