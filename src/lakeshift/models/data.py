"""Reading the SFT files (``DATA/<split>/sft/<input>__<cot>.jsonl``) for training and prediction."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.io import read_jsonl

ROLES = ("system", "user", "assistant")


@dataclass
class SftSet:
    """The records of one ``<split>/sft/<input>__<cot>.jsonl`` file, after ``--sizes`` / ``--limit``.

    Attributes:
        path: the JSONL file.
        split_dir: its split folder (image paths are relative to it).
        split: the split name (the folder name).
        input_format: e.g. ``"grid"``.
        cot_format: e.g. ``"grid+desc"``.
        records: the records, in file order.
        sizes: map size by id (from ``maps.jsonl``; empty when that file is absent).
        sha256: hash of the whole file (before filtering), recorded in run folders and predictions.
    """

    path: Path
    split_dir: Path
    split: str
    input_format: str
    cot_format: str
    records: list[dict[str, Any]]
    sizes: dict[str, int]
    sha256: str


def sft_path(data: str | Path, split: str, input_format: str, cot_format: str) -> Path:
    """The SFT file of a split and format pair, with a clear error listing what the folder has instead.

    Raises:
        LakeshiftError: the data folder, the split or the format pair does not exist.
    """
    data = Path(data)
    if not data.is_dir():
        raise LakeshiftError(f"--data {data}: no such folder (generate it with `lakeshift generate`)")
    split_dir = data / split
    if not split_dir.is_dir():
        have = sorted(p.name for p in data.iterdir() if (p / "sft").is_dir())
        raise LakeshiftError(
            f"{data}: no split {split!r} (splits with SFT files: {', '.join(have) or 'none'})"
        )
    path = split_dir / "sft" / f"{input_format}__{cot_format}.jsonl"
    if not path.is_file():
        have = sorted(p.stem.replace("__", " x ") for p in (split_dir / "sft").glob("*.jsonl"))
        raise LakeshiftError(
            f"{path}: not found; {split_dir / 'sft'} has input x cot: {', '.join(have) or 'nothing'}"
        )
    return path


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _map_sizes(split_dir: Path) -> dict[str, int]:
    maps = split_dir / "maps.jsonl"
    if not maps.is_file():
        return {}
    return {str(obj["id"]): int(obj["size"]) for _, obj in read_jsonl(maps, required=("id", "size"))}


def load_sft(
    data: str | Path,
    split: str,
    input_format: str,
    cot_format: str,
    *,
    sizes: list[int] | None = None,
    limit: int | None = None,
    need_assistant: bool = True,
) -> SftSet:
    """Reads and validates an SFT file; keeps maps of ``sizes`` (all if None), then the first ``limit``.

    Raises:
        LakeshiftError: missing file, malformed record (file, line and field named), missing image, or
            ``--sizes`` without a ``maps.jsonl`` to read sizes from.
    """
    path = sft_path(data, split, input_format, cot_format)
    split_dir = path.parent.parent
    map_sizes = _map_sizes(split_dir)
    if sizes and not map_sizes:
        raise LakeshiftError(f"--sizes needs {split_dir / 'maps.jsonl'} (map sizes), which is missing")
    records: list[dict[str, Any]] = []
    for lineno, rec in read_jsonl(path, required=("id", "messages")):
        where = f"{path}, line {lineno}"
        messages = rec["messages"]
        roles = [m.get("role") for m in messages if isinstance(m, dict)]
        expected = list(ROLES if need_assistant else ROLES[:2])
        if roles[: len(expected)] != expected or any("content" not in m for m in messages):
            raise LakeshiftError(
                f"{where}: field 'messages' must be system, user, assistant turns with 'content'"
            )
        rec["id"] = str(rec["id"])
        if input_format == "image":
            images = rec.get("images")
            if not images:
                raise LakeshiftError(f"{where}: missing field 'images' (image input)")
            for image in images:
                if not (split_dir / image).is_file():
                    raise LakeshiftError(f"{where}: field 'images': {split_dir / image} not found")
        if sizes and rec["id"] not in map_sizes:
            raise LakeshiftError(f"{where}: id {rec['id']!r} is not in {split_dir / 'maps.jsonl'}")
        if sizes and map_sizes[rec["id"]] not in sizes:
            continue
        records.append(rec)
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise LakeshiftError(f"{path}: no records left (sizes={sizes}, limit={limit})")
    return SftSet(path, split_dir, split, input_format, cot_format, records, map_sizes, file_sha256(path))


def split_hash(split_dir: Path) -> str | None:
    """The ``hash`` recorded in ``split.json`` by the generator, if any."""
    meta = split_dir / "split.json"
    if not meta.is_file():
        return None
    try:
        value = json.loads(meta.read_text(encoding="utf-8")).get("hash")
    except json.JSONDecodeError:
        return None
    return str(value) if value is not None else None


def prompt_messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The system and user turns of an SFT record (what a model sees at prediction time)."""
    return [m for m in record["messages"] if m["role"] != "assistant"]


def reference_completion(record: dict[str, Any]) -> str | None:
    """The assistant turn's text of an SFT record, or None when the record has no assistant turn."""
    for message in record["messages"]:
        if message["role"] == "assistant":
            content = message["content"]
            if isinstance(content, str):
                return content
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return None


def load_images(split_dir: Path, record: dict[str, Any]) -> list[Any]:
    """The record's images as RGB PIL images."""
    from PIL import Image

    out = []
    for rel in record.get("images", []):
        with Image.open(split_dir / rel) as img:
            out.append(img.convert("RGB"))
    return out
