"""Scored records stay byte-identical across refactors of the scorer: its output on fixed predictions (every
verdict, every trace CoT, every extraction mode, repeated samples) hashes to the value recorded by the code
of 2026-12-04. A change of the scorer's *behaviour* must update the hashes, saying why, in the same commit."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from suite_fixtures import scored_bytes

GOLDEN = {
    None: "428541045ff622b2f6d7845f73f3823cbd24f7c947ad6494d256daed37322cd3",
    "frozen_ood": "9539f3acc2455bc7c7dd48c91003d6e21b4ab22b45aef67d31d3d2940691ef4a",
    "vsp": "c152af5892d5bb098eb2e79b1e629c758f0d2909f726b32b9d6d9c979e393e88",
}


@pytest.mark.parametrize("compat", list(GOLDEN))
def test_scored_records_are_byte_identical_to_the_recorded_ones(tmp_path: Path, compat: str | None) -> None:
    got = scored_bytes(tmp_path, compat)
    digest = hashlib.sha256(got).hexdigest()
    if digest != GOLDEN[compat]:
        (tmp_path / "scored.jsonl").write_bytes(got)  # to diff against the previous code's output
    assert digest == GOLDEN[compat], f"scored records changed (written to {tmp_path / 'scored.jsonl'})"
