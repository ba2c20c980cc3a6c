"""Small suites and predictions for the scoring and report tests, made without ``lakeshift generate`` (so
those tests do not depend on the generator): random solvable maps, noisy predictions, a fake study, and the
scored file of the golden test."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from lakeshift import report
from lakeshift.data.maps import record_from_map
from lakeshift.env import FrozenLakeMap
from lakeshift.scoring import load_scoring_maps, read_predictions, score_predictions


def map_record(m: FrozenLakeMap, mid: str, split: str) -> dict:
    """A ``maps.jsonl`` record as ``lakeshift generate`` writes it."""
    return record_from_map(m, mid, split)


def make_maps(
    split: str, sizes: tuple[int, ...], per_size: int, seed: int = 0, min_dinf: int = 0
) -> list[dict]:
    """Random solvable maps (independent of helper DATA's generator, so these tests do not depend on it)."""
    rng = random.Random(f"{split}:{seed}")
    out: list[dict] = []
    for n in sizes:
        k = 0
        while k < per_size:
            cells = [(r, c) for r in range(n) for c in range(n)]
            s, g = rng.sample(cells, 2)
            if max(abs(s[0] - g[0]), abs(s[1] - g[1])) < min_dinf:
                continue
            holes = frozenset(x for x in cells if x not in (s, g) and rng.random() < 0.25)
            m = FrozenLakeMap(n, holes, s, g)
            if not m.solvable:
                continue
            out.append(map_record(m, f"{split}-{n}-{k}", split))
            k += 1
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


SPLITS = {
    "id-test": ((3, 4, 5, 6), 0),
    "ood-size": ((7, 8), 0),
    "ood-dist": ((7, 8), 6),
    "embed10-test": ((10,), 2),
}


def make_suite(root: Path, per_size: int = 6) -> Path:
    data = root / "data"
    for split, (sizes, min_dinf) in SPLITS.items():
        write_jsonl(data / split / "maps.jsonl", make_maps(split, sizes, per_size, min_dinf=min_dinf))
    write_jsonl(data / "id-train" / "maps.jsonl", make_maps("id-train", (3, 4), per_size))
    return data


def noisy_predictions(data: Path, runs: Path, folder: str, seed: int, cot: str = "none") -> None:
    """Predictions that are right about half the time, with every kind of failure."""
    from lakeshift import traces

    rng = random.Random(seed)
    for split in SPLITS:
        rows = []
        for line in (data / split / "maps.jsonl").read_text().splitlines():
            rec = json.loads(line)
            m = FrozenLakeMap.from_rows(rec["rows"])
            path = list(rec["optimal_path"])
            roll = rng.random()
            if roll < 0.1:
                continue  # missing
            if roll < 0.5:
                out = traces.completion(m, path, cot)
            elif roll < 0.7:
                out = "\\boxed{" + ", ".join(path[:-1] or ["UP"]) + "}"
            elif roll < 0.8:
                out = "I cannot solve this."
            else:
                out = "\\boxed{" + ", ".join(rng.choice(["UP", "DOWN", "LEFT", "RIGHT"]) for _ in path) + "}"
            rows.append({"id": rec["id"], "output": out, "n_output_tokens": len(out) // 4 + 1})
        write_jsonl(runs / folder / f"{split}.jsonl", rows)


#: The CPU study's 12 pairings (configs/studies/cpu-study.yaml), then 8 of them again as a second arm.
PAIRINGS = [(i, c) for i in ("grid", "table", "desc") for c in ("none", "desc", "grid", "grid+desc")]


STUDY_SPLITS = {
    "id-test": ((3, 4, 5, 6), 0),
    "ood-size": ((7, 8, 9, 10), 0),
    "ood-dist": ((7, 8, 9, 10), 6),
    "embed10-test": ((10,), 2),
}


def fake_study(root: Path, n_models: int, per_size: int = 8, seed: int = 0) -> tuple[Path, Path]:
    """A suite and ``n_models`` runs whose success falls with the optimal length (first 12: arm
    ``epochs``, the rest: arm ``compute``). Returns ``(data_dir, runs_dir)``."""
    data, runs = root / "data", root / "runs"
    for split, (sizes, min_dinf) in STUDY_SPLITS.items():
        write_jsonl(data / split / "maps.jsonl", make_maps(split, sizes, per_size, min_dinf=min_dinf))
    write_jsonl(data / "id-train" / "maps.jsonl", make_maps("id-train", (3, 4, 5, 6), per_size))
    rng = random.Random(seed)
    for m in range(n_models):
        inp, cot = PAIRINGS[m % len(PAIRINGS)]
        arm = "epochs" if m < len(PAIRINGS) else "compute"
        skill = rng.uniform(0.75, 0.98) * (0.9 if cot == "none" else 1.0)
        decay = rng.uniform(0.08, 0.3)
        for split in STUDY_SPLITS:
            rows = []
            for line in (data / split / "maps.jsonl").read_text().splitlines():
                rec = json.loads(line)
                path = rec["optimal_path"]
                ok = rng.random() < skill * math.exp(-decay * (len(path) - 1))
                moves = path if ok else [rng.choice(["UP", "DOWN", "LEFT", "RIGHT"]) for _ in path]
                out = "\\boxed{" + ", ".join(moves) + "}"
                rows.append(
                    {
                        "id": rec["id"],
                        "output": out,
                        "n_output_tokens": len(out) // 3,
                        "model": f"{arm}/{inp}__{cot}",
                        "input_format": inp,
                        "cot_format": cot,
                    }
                )
            write_jsonl(runs / arm / f"{inp}__{cot}" / f"{split}.jsonl", rows)
    return data, runs


def run_inputs(data: Path, runs: Path) -> list[report.RunInput]:
    return [
        report.RunInput(
            p, data / p.stem / "maps.jsonl", {}, f"{p.parent.parent.name}_{p.parent.name}_{p.stem}"
        )
        for p in sorted(runs.rglob("*.jsonl"))
    ]


#: The CoT formats of the golden scored file (tests/scoring/test_scoring_golden.py).
GOLDEN_COTS = ("none", "desc", "grid", "grid+desc", "table", "table+desc", "coords", "astar")


def scored_bytes(root: Path, compat: str | None) -> bytes:
    data = make_suite(root, per_size=3)
    runs = root / "runs"
    lines: list[str] = []
    for i, cot in enumerate(GOLDEN_COTS):
        noisy_predictions(data, runs, cot, i, cot=cot)
    sampled = runs / "sampled" / "id-test.jsonl"
    rng = random.Random(7)
    rows = [json.loads(line) for line in (runs / "none" / "id-test.jsonl").read_text().splitlines()]
    for row in rows:
        row["samples"] = [
            {"output": row["output"]},
            *({"output": rng.choice(["\\boxed{UP}", "no"])} for _ in range(3)),
        ]
    sampled.parent.mkdir(parents=True, exist_ok=True)
    sampled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for folder in (*GOLDEN_COTS, "sampled"):
        for split in SPLITS:
            path = runs / folder / f"{split}.jsonl"
            if not path.is_file():
                continue
            maps = load_scoring_maps(data / split / "maps.jsonl")
            preds = read_predictions(path, maps)
            defaults = {
                "model": folder,
                "input_format": "grid",
                "cot_format": folder if folder in GOLDEN_COTS else "none",
            }
            for rec in score_predictions(maps, preds, compat=compat, check_trace=True, defaults=defaults):
                lines.append(json.dumps(rec.to_json(), sort_keys=False))
    return "\n".join(lines).encode()


#: A study of one small split predicted zero-shot through the ``openai`` backend at ``{url}`` (a fake server),
#: with the report and no baselines: ``ZERO_SHOT_STUDY.format(url=..., name=..., count=...)``.
ZERO_SHOT_STUDY = """\
name: {name}
data:
  splits:
    - name: small-test
      groups:
        - {{size: 3, count: {count}, hole_prob: 0.2}}
  images: false
  inputs: [grid]
  cots: [none]
  workers: 1
predict:
  splits: [small-test]
  backend: openai
  base_url: {url}
  max_new_tokens: 16
models:
  - {{name: fake, input: grid, cot: none, zero_shot: true, model: fake}}
report:
  baselines: false
  examples: 2
"""
