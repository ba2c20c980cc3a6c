"""Small data folders for the model tests, made by the real pipeline (``lakeshift generate``).

The model tests need a handful of maps in the on-disk layout that ``lakeshift train`` / ``predict`` read.
They get it from the generator itself, so they exercise the real prompts, traces and formats; tests that
train a model to memorise its maps pass ``--prompt map-only`` to keep the conversations short.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lakeshift.cli import main


def generate_split(
    root: Path,
    split: str,
    *,
    sizes: Sequence[int] = (3,),
    count: int = 4,
    inputs: Sequence[str] = ("grid",),
    cots: Sequence[str] = ("none",),
    images: bool = False,
    train: bool = False,
    seed: int = 0,
) -> Path:
    """Writes ``root/<split>`` with ``count`` maps of each size through ``lakeshift generate``.

    Args:
        root: the data folder (``--data`` of train/predict).
        split: the split name (map ids are ``<split>-00000``, ...).
        sizes: map sizes.
        count: maps per size.
        inputs: input formats of the SFT files (``image`` needs ``images=True``).
        cots: CoT formats of the SFT files.
        images: write the PNGs (and the ``image__*`` files); off keeps the fixture fast.
        train: a training split (the "train" prompt variant).
        seed: the suite seed.

    Returns:
        The split folder.
    """
    argv = ["generate", "--out", str(root), "--split", split, "--sizes", *map(str, sizes)]
    argv += ["--count", str(count), "--hole-prob", "0.2", "--seed", str(seed)]
    argv += ["--inputs", ",".join(inputs), "--cots", ",".join(cots), "--workers", "1", "--no-progress"]
    if train:
        argv.append("--train")
    if not images:
        argv.append("--no-images")
    code = main(argv)
    if code != 0:
        raise RuntimeError(f"lakeshift {' '.join(argv)} exited {code}")
    return Path(root) / split
