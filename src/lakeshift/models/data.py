"""Reading the SFT files (``DATA/<split>/sft/<input>__<cot>.jsonl``) for training and prediction.

Prompts (``--prompt``, :data:`PROMPTS`):

- ``mirage`` (default): the SFT file's user message as written, i.e. Mirage's rule text with the map in it
  (the paper's setup).
- ``map-only``: the user message becomes just the map in the record's input format, rendered with
  :func:`lakeshift.formats.render` from ``<split>/maps.jsonl`` (for image input: only the image block). The
  rule text is the same in every example and most of its tokens (benchmarks/log.md), and a small
  from-scratch model cannot use it anyway. The system message and the
  assistant turn are unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.io import file_sha256, png_problem, read_jsonl

ROLES = ("system", "user", "assistant")
PROMPTS = ("mirage", "map-only")


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
        prompt: ``"mirage"`` (user messages as in the file) or ``"map-only"`` (rewritten to the map alone).
    """

    path: Path
    split_dir: Path
    split: str
    input_format: str
    cot_format: str
    records: list[dict[str, Any]]
    sizes: dict[str, int]
    sha256: str
    prompt: str = "mirage"

    def selected_sizes(self) -> list[int]:
        """The map size of every record (those ``maps.jsonl`` gives)."""
        return [self.sizes[r["id"]] for r in self.records if r.get("id") in self.sizes]


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


def _map_sizes(split_dir: Path) -> dict[str, int]:
    from lakeshift.data.maps import load_maps

    maps = split_dir / "maps.jsonl"
    if not maps.is_file():
        return {}
    return {str(obj["id"]): int(obj["size"]) for obj in load_maps(maps)}  # validated as `score` does


def load_sft(
    data: str | Path,
    split: str,
    input_format: str,
    cot_format: str,
    *,
    sizes: list[int] | None = None,
    per_size: int | None = None,
    limit: int | None = None,
    need_assistant: bool = True,
    prompt: str = "mirage",
) -> SftSet:
    """Reads and validates an SFT file and selects records from it, in file order.

    Args:
        data: the folder written by ``lakeshift generate``.
        split: the split folder name.
        input_format: one of ``formats.INPUT_FORMATS``.
        cot_format: one of ``traces.COT_FORMATS``.
        sizes: keep maps of these sizes only (all if None).
        per_size: then keep the first ``per_size`` maps of each size.
        limit: then keep the first ``limit`` maps.
        need_assistant: require the assistant turn (training); prediction needs only system and user.
        prompt: ``"mirage"`` or ``"map-only"`` (see the module docstring).

    Raises:
        LakeshiftError: missing file, malformed record (file, line and field named), missing image,
            ``--sizes``/``--per-size``/``map-only`` without a ``maps.jsonl`` to read the maps from, or an
            unknown prompt.
    """
    if prompt not in PROMPTS:
        raise LakeshiftError(f"--prompt {prompt}: unknown (choose from {', '.join(PROMPTS)})")
    path = sft_path(data, split, input_format, cot_format)
    split_dir = path.parent.parent
    map_sizes = _map_sizes(split_dir)
    for wanted, option in ((sizes, "--sizes"), (per_size, "--per-size")):
        if wanted and not map_sizes:
            raise LakeshiftError(f"{option} needs {split_dir / 'maps.jsonl'} (map sizes), which is missing")
    selected: set[str] | None = None
    if sizes or per_size:
        from lakeshift.data.maps import select_maps

        rows = [{"id": i, "size": n} for i, n in map_sizes.items()]
        selected = {str(r["id"]) for r in select_maps(rows, sizes=sizes, per_size=per_size)}
    records: list[dict[str, Any]] = []
    for lineno, rec in read_jsonl(path, required=("id", "messages")):
        where = f"{path}, line {lineno}"
        messages = rec["messages"]
        ok = isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
        roles = [m.get("role") for m in messages] if ok else []
        expected = list(ROLES if need_assistant else ROLES[:2])
        if (
            roles[: len(expected)] != expected
            or any("content" not in m for m in messages)
            or not all(isinstance(m["content"], (str, list)) for m in messages)
        ):
            raise LakeshiftError(
                f"{where}: field 'messages' must be system, user, assistant turns with 'content'"
            )
        if not isinstance(rec["id"], (str, int)) or isinstance(rec["id"], bool):
            raise LakeshiftError(f"{where}: field 'id' must be a string, got {rec['id']!r}")
        rec["id"] = str(rec["id"])
        if input_format == "image":
            images = rec.get("images")
            if not images:
                raise LakeshiftError(f"{where}: missing field 'images' (image input)")
            if not isinstance(images, list) or not all(isinstance(p, str) for p in images):
                raise LakeshiftError(f"{where}: field 'images' must be a list of paths")
            for image in images:
                problem = png_problem(split_dir / image)  # a torn PNG would reach the model as noise
                if problem:
                    raise LakeshiftError(f"{where}: field 'images': {split_dir / image}: {problem}")
        if selected is not None:
            if rec["id"] not in map_sizes:
                raise LakeshiftError(f"{where}: id {rec['id']!r} is not in {split_dir / 'maps.jsonl'}")
            if rec["id"] not in selected:
                continue
        records.append(rec)
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise LakeshiftError(f"{path}: no records left (sizes={sizes}, per_size={per_size}, limit={limit})")
    if prompt == "map-only":
        records = map_only_records(records, split_dir, input_format, path)
    return SftSet(
        path, split_dir, split, input_format, cot_format, records, map_sizes, file_sha256(path), prompt
    )


def map_only_user(map_record: dict[str, Any], input_format: str) -> dict[str, Any]:
    """The ``map-only`` user turn of a map: its text rendering alone, or just the image block.

    Args:
        map_record: a ``maps.jsonl`` object.
        input_format: one of ``formats.INPUT_FORMATS``.

    Raises:
        LakeshiftError: the record's map is invalid (names the id and field).
    """
    if input_format == "image":
        return {"role": "user", "content": [{"type": "image"}]}
    from lakeshift import formats
    from lakeshift.data.maps import map_from_record

    return {"role": "user", "content": formats.render(map_from_record(map_record), input_format)}


def map_only_records(
    records: list[dict[str, Any]], split_dir: Path, input_format: str, sft_file: Path
) -> list[dict[str, Any]]:
    """Copies of ``records`` whose user turn is :func:`map_only_user` of the map with the same id.

    Raises:
        LakeshiftError: ``maps.jsonl`` is missing or malformed, or lacks one of the records' ids.
    """
    from lakeshift.data.maps import load_maps

    maps_file = split_dir / "maps.jsonl"
    if not maps_file.is_file():
        raise LakeshiftError(f"--prompt map-only needs {maps_file} (the maps), which is missing")
    by_id = {str(m["id"]): m for m in load_maps(maps_file)}
    out = []
    for rec in records:
        if rec["id"] not in by_id:
            raise LakeshiftError(f"{sft_file}: id {rec['id']!r} is not in {maps_file}")
        user = map_only_user(by_id[rec["id"]], input_format)
        out.append({**rec, "messages": [user if m["role"] == "user" else m for m in rec["messages"]]})
    return out


def split_hash(split_dir: Path) -> str | None:
    """The ``hash`` recorded in ``split.json`` by the generator, if any."""
    meta = split_dir / "split.json"
    if not meta.is_file():
        return None
    try:
        value = json.loads(meta.read_text(encoding="utf-8")).get("hash")
    except (OSError, ValueError, AttributeError):  # unreadable, not UTF-8 or JSON, not an object
        return None
    return str(value) if value is not None else None


def prompt_turns(record: dict[str, Any]) -> list[dict[str, Any]]:
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


def load_images(
    split_dir: Path,
    record: dict[str, Any],
    cell_pixels: int | None = None,
    map_size: int | None = None,
) -> list[Any]:
    """The record's images as RGB PIL images, as a model reads them (:func:`open_image`)."""
    return [open_image(split_dir / rel, cell_pixels, map_size) for rel in record.get("images", [])]


def open_image(path: Path, cell_pixels: int | None = None, map_size: int | None = None) -> Any:
    """A map image as an RGB PIL image: as rendered, or, for a model whose map cells are ``cell_pixels``
    pixels square (:attr:`lakeshift.models.registry.ModelSpec.cell_pixels`), resized by :func:`cell_image`
    for a ``map_size`` x ``map_size`` map. Without ``map_size`` (an image that came without its map record)
    the size is read from the frame where only one map has it: a frame of ``64 n`` pixels with ``n`` below 8
    (from 8x8 on, gymnasium's frames are all 512 pixels).

    Raises:
        LakeshiftError: the file is missing or not an image, or it must be resized and its map size is
            unknown or it is not that map's frame.
    """
    from PIL import Image

    try:
        with Image.open(path) as img:
            image = img.convert("RGB")
    except (OSError, ValueError, SyntaxError) as err:  # PIL's errors for missing, torn or non-PNG files
        raise LakeshiftError(f"{path}: not a readable image ({err})") from None
    if cell_pixels is None:
        return image
    if map_size is None and image.size[0] == image.size[1] and image.size[0] % 64 == 0:
        map_size = image.size[0] // 64 if image.size[0] < 512 else None
    if map_size is None:
        raise LakeshiftError(
            f"{path}: the model reads each map cell as a {cell_pixels}-pixel square, which needs the map's "
            f"size from {path.parent.parent / 'maps.jsonl'} (missing, or without this map)"
        )
    return cell_image(image, map_size, cell_pixels, str(path))


def cell_image(image: Any, map_size: int, cell_pixels: int, where: str = "image") -> Any:
    """A map's frame resized so that each of its cells is ``cell_pixels`` pixels square.

    The frame is gymnasium's (:func:`lakeshift.formats.image.frame_geometry`): ``map_size`` cells of ``cell``
    pixels from the top left corner, within a window that maps over 8x8 pad with a black strip on the right
    and bottom. The drawn square is cut out (the strip dropped; a frame already cropped to it is taken as
    is) and resized to ``map_size * cell_pixels`` pixels a side with a box filter: each new pixel is the
    average of the frame pixels under it, and the edges of the ``cell_pixels`` squares fall on the edges of
    the cells, so every square shows one cell and no pixel of it comes from another. With ``cell_pixels``
    28 (Qwen2.5-VL's merged visual token) the image has one visual token per cell, which Qwen's processor
    keeps as it is (its sides are multiples of 28 within the size's pixel bounds).

    Raises:
        LakeshiftError: the image is neither the window nor the drawn square of a ``map_size`` map, or
            the map is larger than :data:`lakeshift.models.tokenizer.MAX_MAP_SIZE`.
    """
    from PIL import Image

    from lakeshift.formats.image import frame_geometry
    from lakeshift.models.tokenizer import MAX_MAP_SIZE

    if not 1 <= map_size <= MAX_MAP_SIZE:
        raise LakeshiftError(
            f"{where}: a {map_size}x{map_size} map; a model reading one visual token per cell takes maps of "
            f"1x1 to {MAX_MAP_SIZE}x{MAX_MAP_SIZE} (its image processor's max_pixels)"
        )
    window, cell = frame_geometry(map_size)
    drawn = cell * map_size
    if image.size not in ((window, window), (drawn, drawn)):
        raise LakeshiftError(
            f"{where}: {image.size[0]}x{image.size[1]} pixels, not the frame of a {map_size}x{map_size} map "
            f"({window}x{window}, or {drawn}x{drawn} without the black strip), so its cells cannot be "
            f"resized to {cell_pixels} pixels"
        )
    side = map_size * cell_pixels
    return image.crop((0, 0, drawn, drawn)).resize((side, side), Image.Resampling.BOX)
