"""Scoring and report speed (prints numbers; no assertions).

    python benchmarks/bench_scoring.py                # all three measurements
    python benchmarks/bench_scoring.py --quick        # smaller sizes

1. answer-only: 100,000 predictions (``\\boxed{...}`` answers, right and wrong) scored on one core;
2. long CoT: 3,000-token ``table+desc`` / ``grid+desc`` traces on 10x10 maps, scored with faithfulness;
3. full report: 20 models x 6 splits (paper-sized splits), tables + plots + report.html.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_scoring import make_maps

from lakeshift import traces
from lakeshift.scoring import Prediction, PredictionsFile, score_predictions, scoring_map

MOVES = ("UP", "DOWN", "LEFT", "RIGHT")


def answer_only(n: int) -> None:
    maps = {sm.id: sm for sm in (scoring_map(r) for r in make_maps("b", (3, 4, 5, 6, 7, 8, 9, 10), 250))}
    ids = list(maps)
    rng = random.Random(0)
    preds = {}
    for i in range(n):
        sm = maps[ids[i % len(ids)]]
        path = list(sm.record["optimal_path"])
        if rng.random() < 0.5:
            path = [rng.choice(MOVES) for _ in path]
        preds[f"p{i}"] = (sm, "\\boxed{" + ", ".join(path) + "}")
    # Score prediction by prediction through the same function the files go through.
    table = {pid: sm for pid, (sm, _) in preds.items()}
    pf = PredictionsFile(
        Path("bench"), {pid: Prediction(pid, out, {}, 0) for pid, (_, out) in preds.items()}, []
    )
    t0 = time.perf_counter()
    recs = list(score_predictions(table, pf))
    dt = time.perf_counter() - t0
    ok = sum(r.success for r in recs)
    print(f"answer-only: {n} predictions in {dt:.2f} s = {n / dt:,.0f} predictions/s (accuracy {ok / n:.2f})")


def long_cot(n: int) -> None:
    recs = make_maps("c", (10,), 60, seed=1, min_dinf=6)
    for cot in ("table+desc", "grid+desc"):
        table, preds = {}, {}
        lengths = []
        for i in range(n):
            rec = recs[i % len(recs)]
            sm = scoring_map(rec)
            text = traces.completion(sm.map, rec["optimal_path"], cot)
            # Pad to ~3,000 tokens (~12,000 characters) by repeating the trace body: more steps to check.
            body, answer = text[: text.rfind("\\boxed{")], text[text.rfind("\\boxed{") :]
            while len(body) < 12_000:
                body += body
            text = body + answer
            lengths.append(len(text))
            pid = f"p{i}"
            table[pid] = sm
            preds[pid] = Prediction(pid, text, {"cot_format": cot}, 0)
        pf = PredictionsFile(Path("bench"), preds, [])
        t0 = time.perf_counter()
        out = list(score_predictions(table, pf))
        dt = time.perf_counter() - t0
        steps = sum(r.trace.steps for r in out if r.trace is not None) / n
        print(
            f"long CoT {cot}: {n} outputs of ~{sum(lengths) / n / 4:,.0f} tokens ({steps:.0f} steps each) "
            f"in {dt:.2f} s = {n / dt:,.0f} predictions/s with faithfulness"
        )
        t0 = time.perf_counter()
        list(score_predictions(table, pf, check_trace=False))
        dt = time.perf_counter() - t0
        print(f"  same outputs without faithfulness: {n / dt:,.0f} predictions/s")


SPLITS = {  # paper sizes: split -> (sizes, maps per size, min d_inf)
    "id-train": ((3, 4, 5, 6), 250, 0),
    "id-test": ((3, 4, 5, 6), 100, 0),
    "ood-size": ((7, 8, 9, 10), 200, 0),
    "ood-dist": ((7, 8, 9, 10), 200, 6),
    "embed10-train": ((10,), 1000, 0),
    "embed10-test": ((10,), 1600, 2),
}
MODELS = [
    (inp, cot)
    for inp in ("image", "desc", "table", "grid")
    for cot in ("none", "desc", "grid", "grid+desc", "table+desc")
]


def full_report(scale: float) -> None:
    from lakeshift.report import RunInput, build_report

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rng = random.Random(2)
        t0 = time.perf_counter()
        runs = []
        outputs: dict[tuple[str, str], list[str]] = {}
        n_preds = 0
        for split, (sizes, per, mind) in SPLITS.items():
            maps = make_maps(split, sizes, max(2, int(per * scale)), min_dinf=mind)
            (root / "data" / split).mkdir(parents=True)
            (root / "data" / split / "maps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in maps))
            for cot in {c for _, c in MODELS}:
                texts = []
                for rec in maps:
                    sm = scoring_map(rec)
                    path = list(rec["optimal_path"])
                    if rng.random() < 0.4:  # a wrong final answer, trace unchanged
                        path = path[:-1] or ["UP"]
                    ref = traces.completion(sm.map, rec["optimal_path"], cot)
                    texts.append(ref[: ref.rfind("\\boxed{")] + "\\boxed{" + ", ".join(path) + "}")
                outputs[(split, cot)] = texts
            for inp, cot in MODELS:
                path = root / "runs" / f"{inp}__{cot}" / f"{split}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("w") as f:
                    for rec, text in zip(maps, outputs[(split, cot)], strict=True):
                        f.write(
                            json.dumps({"id": rec["id"], "output": text, "n_output_tokens": len(text) // 3})
                            + "\n"
                        )
                        n_preds += 1
                runs.append(
                    RunInput(
                        path,
                        root / "data" / split / "maps.jsonl",
                        {"model": f"{inp}__{cot}", "input_format": inp, "cot_format": cot},
                        f"{inp}__{cot}__{split}",
                    )
                )
        print(f"full report: built {n_preds:,} predictions in {time.perf_counter() - t0:.1f} s (not timed)")
        t0 = time.perf_counter()
        res = build_report(
            runs, root / "out", train_maps=root / "data" / "id-train" / "maps.jsonl", progress=False
        )
        dt = time.perf_counter() - t0
        size = (root / "out" / "report.html").stat().st_size / 1e6
        print(
            f"full report: 20 models x 6 splits, {res.n_records:,} scored records (with baselines) "
            f"in {dt:.1f} s; "
            f"report.html {size:.1f} MB"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    answer_only(10_000 if args.quick else 100_000)
    long_cot(200 if args.quick else 1_000)
    full_report(0.1 if args.quick else 1.0)


if __name__ == "__main__":
    main()
