"""Shared fixtures: the public reference data (VSP / Mirage) that compatibility tests check against."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

REPO = Path(__file__).resolve().parents[1]


def reference_root() -> Path:
    """``$LAKESHIFT_REFERENCE_DATA`` or ``../shared/data/frozen_ood`` next to the repository."""
    env = os.environ.get("LAKESHIFT_REFERENCE_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data" / "frozen_ood"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """The ``frozen_ood`` reference folder; tests using it skip (with the reason) when it is absent."""
    root = reference_root()
    if not root.is_dir():
        pytest.skip(f"reference data not found at {root} (set LAKESHIFT_REFERENCE_DATA)")
    return root


@pytest.fixture(scope="session")
def mirage_dir(reference_dir: Path) -> Path:
    """The Mirage ``vsp_spatial_planning`` folder (train_direct.jsonl, test_direct.jsonl, imgs_test/)."""
    return reference_dir / "mirage" / "data" / "vsp_spatial_planning"
