"""Scored records stay byte-identical across refactors of the scorer: its output on fixed predictions (every
verdict, every trace CoT, every extraction mode, repeated samples) hashes to the value recorded by the code
of 2026-12-04. A change of the scorer's *behaviour* must update the hashes, saying why, in the same commit."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from test_report import SPLITS, make_suite, noisy_predictions

from lakeshift.scoring import load_scoring_maps, read_predictions, score_predictions

COTS = ("none", "desc", "grid", "grid+desc", "table", "table+desc", "coords", "astar")
GOLDEN = {
    None: "428541045ff622b2f6d7845f73f3823cbd24f7c947ad6494d256daed37322cd3",
    "frozen_ood": "9539f3acc2455bc7c7dd48c91003d6e21b4ab22b45aef67d31d3d2940691ef4a",
    "vsp": "c152af5892d5bb098eb2e79b1e629c758f0d2909f726b32b9d6d9c979e393e88",
}


def scored_bytes(root: Path, compat: str | None) -> bytes:
    data = make_suite(root, per_size=3)
    runs = root / "runs"
    lines: list[str] = []
    for i, cot in enumerate(COTS):
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
    for folder in (*COTS, "sampled"):
        for split in SPLITS:
            path = runs / folder / f"{split}.jsonl"
            if not path.is_file():
                continue
            maps = load_scoring_maps(data / split / "maps.jsonl")
            preds = read_predictions(path, maps)
            defaults = {
                "model": folder,
                "input_format": "grid",
                "cot_format": folder if folder in COTS else "none",
            }
            for rec in score_predictions(maps, preds, compat=compat, check_trace=True, defaults=defaults):
                lines.append(json.dumps(rec.to_json(), sort_keys=False))
    return "\n".join(lines).encode()


@pytest.mark.parametrize("compat", list(GOLDEN))
def test_scored_records_are_byte_identical_to_the_recorded_ones(tmp_path: Path, compat: str | None) -> None:
    got = scored_bytes(tmp_path, compat)
    digest = hashlib.sha256(got).hexdigest()
    if digest != GOLDEN[compat]:
        (tmp_path / "scored.jsonl").write_bytes(got)  # to diff against the previous code's output
    assert digest == GOLDEN[compat], f"scored records changed (written to {tmp_path / 'scored.jsonl'})"
