"""Small hand-made splits in the on-disk SFT layout, for the model tests and benchmarks.

These records follow the layout of ``lakeshift generate`` (``<split>/maps.jsonl``, ``<split>/sft/*.jsonl``,
``<split>/images/<id>.png``) but with a deliberately short prompt and simple traces, so a model of a few
thousand parameters can memorise them in seconds on a CPU. They are fixtures, not benchmark data: real
experiments use ``lakeshift generate``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from lakeshift.env import FrozenLakeMap
from lakeshift.io import write_jsonl

SYSTEM = "You are a helpful assistant."


def random_maps(
    n: int, sizes: tuple[int, ...] = (3, 4), seed: int = 0, hole_p: float = 0.2
) -> list[FrozenLakeMap]:
    """``n`` distinct solvable random maps."""
    rng = random.Random(seed)
    out: list[FrozenLakeMap] = []
    seen: set[tuple[str, ...]] = set()
    while len(out) < n:
        size = sizes[len(out) % len(sizes)]
        cells = [(r, c) for r in range(size) for c in range(size)]
        start, goal = rng.sample(cells, 2)
        holes = frozenset(x for x in cells if x not in (start, goal) and rng.random() < hole_p)
        m = FrozenLakeMap(size=size, holes=holes, start=start, goal=goal)
        if m.solvable and tuple(m.rows) not in seen:
            seen.add(tuple(m.rows))
            out.append(m)
    return out


def _grid(m: FrozenLakeMap, player: tuple[int, int]) -> str:
    rows = []
    for r in range(m.size):
        row = ""
        for c in range(m.size):
            if (r, c) == player:
                row += "P"
            elif (r, c) in m.holes:
                row += "H"
            elif (r, c) == m.goal:
                row += "G"
            else:
                row += "F"
        rows.append(row)
    return "\n".join(rows)


def completion(m: FrozenLakeMap, path: list[str], cot: str) -> str:
    """A short completion: ``none`` is just the box; any other CoT draws the grid after each move."""
    box = "\\boxed{" + ", ".join(path) + "}"
    if cot == "none":
        return box
    steps, pos = [], m.start
    for move in path:
        pos = m.step(pos, move)
        steps.append(f"Move {move}.\n{_grid(m, pos)}")
    return "\n".join(steps) + "\n" + box


def write_split(
    root: str | Path,
    split: str,
    maps: list[FrozenLakeMap],
    pairs: tuple[tuple[str, str], ...] = (("grid", "none"),),
) -> Path:
    """Writes ``root/<split>`` with ``maps.jsonl`` and one SFT file per ``(input, cot)`` pair.

    Returns:
        The split folder.
    """
    split_dir = Path(root) / split
    (split_dir / "sft").mkdir(parents=True, exist_ok=True)
    map_rows: list[dict[str, Any]] = []
    for i, m in enumerate(maps):
        path = m.optimal_path()
        map_rows.append(
            {
                "id": f"m{i}",
                "split": split,
                "size": m.size,
                "rows": list(m.rows),
                "start": list(m.start),
                "goal": list(m.goal),
                "holes": m.n_holes,
                "d_inf": m.d_inf,
                "optimal_length": m.optimal_length,
                "optimal_path": path,
                "n_optimal_paths": m.n_optimal_paths,
            }
        )
    write_jsonl(split_dir / "maps.jsonl", map_rows)
    for input_format, cot in pairs:
        records = []
        for m, row in zip(maps, map_rows, strict=True):
            answer = completion(m, row["optimal_path"], cot)
            rec: dict[str, Any] = {"id": row["id"], "input_format": input_format, "cot_format": cot}
            if input_format == "image":
                image = f"images/{row['id']}.png"
                render_png(m, split_dir / image)
                user: Any = [
                    {"type": "text", "text": "Solve the lake:\n"},
                    {"type": "image"},
                    {"type": "text", "text": "\nAnswer in \\boxed{}."},
                ]
                rec["images"] = [image]
            else:
                user = f"Solve the lake:\n{_grid(m, m.start)}\nAnswer in \\boxed{{}}."
            rec["messages"] = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": user},
                {"role": "assistant", "content": answer},
            ]
            # Keep key order as the generator writes it (id, formats, messages, images).
            if "images" in rec:
                rec["images"] = rec.pop("images")
            records.append(rec)
        write_jsonl(split_dir / "sft" / f"{input_format}__{cot}.jsonl", records)
    return split_dir


def render_png(m: FrozenLakeMap, path: Path, cell: int = 16) -> None:
    """A plain coloured-squares picture of the map (fixture only; real images come from gymnasium)."""
    from PIL import Image, ImageDraw

    colours = {"P": (200, 30, 30), "H": (20, 20, 80), "G": (230, 200, 0), "F": (200, 230, 255)}
    img = Image.new("RGB", (m.size * cell, m.size * cell))
    draw = ImageDraw.Draw(img)
    for r, line in enumerate(_grid(m, m.start).split("\n")):
        for c, ch in enumerate(line):
            draw.rectangle([c * cell, r * cell, (c + 1) * cell - 1, (r + 1) * cell - 1], fill=colours[ch])
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
