"""Byte- and pixel-exact checks against the official VSP / Mirage files (skipped when the data is absent)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lakeshift import formats, traces
from lakeshift.env import FrozenLakeMap
from lakeshift.formats import image, prompts


def _lines(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def test_maps(mirage_dir: Path) -> list[tuple[dict, FrozenLakeMap, Path]]:
    """(record, map, level folder) for the 400 official test maps."""
    out = []
    for rec in _lines(mirage_dir / "test_direct.jsonl"):
        level = mirage_dir / Path(rec["image_input"]).relative_to("data/vsp_spatial_planning").parents[1]
        out.append((rec, FrozenLakeMap.from_map_desc(rec["map_desc"]), level))
    assert len(out) == 400
    return out


@pytest.mark.parametrize(("fmt", "folder"), [("desc", "pure_text"), ("table", "table")])
def test_all_400_text_files_byte_for_byte(test_maps: list, fmt: str, folder: str) -> None:
    mismatches = []
    for rec, m, level in test_maps:
        ref = (level / folder / f"{rec['map_id']}.txt").read_bytes()
        if formats.file_text(m, fmt).encode("utf-8") != ref:
            mismatches.append(f"{level.name}/{folder}/{rec['map_id']}.txt")
        # The reference text parses back to the same map (the files are also valid parser input).
        assert formats.parse(ref.decode("utf-8"), fmt).to_map() == m
    assert not mismatches, f"{len(mismatches)} files differ, e.g. {mismatches[:5]}"


def test_all_400_images_pixel_for_pixel(test_maps: list) -> None:
    from PIL import Image

    mismatches = []
    for rec, m, level in test_maps:
        with Image.open(level / "img" / f"{rec['map_id']}.png") as im:
            ref = np.asarray(im.convert("RGB"))
        if not np.array_equal(ref, image.render_rgb(m)):
            mismatches.append(f"{level.name}/img/{rec['map_id']}.png")
    assert not mismatches, f"{len(mismatches)} images differ, e.g. {mismatches[:5]}"


def test_written_pngs_decode_to_the_official_pixels(test_maps: list, tmp_path: Path) -> None:
    from PIL import Image

    for rec, m, level in test_maps[::40]:
        for palette in (False, True):
            path = image.render_png(m, tmp_path / f"{rec['map_id']}.png", palette=palette)
            with Image.open(path) as ours, Image.open(level / "img" / f"{rec['map_id']}.png") as ref:
                assert np.array_equal(np.asarray(ours.convert("RGB")), np.asarray(ref.convert("RGB")))


@pytest.mark.parametrize(
    ("variant", "name"), [("test", "test_direct.jsonl"), ("train", "train_direct.jsonl")]
)
def test_prompts_byte_exact(mirage_dir: Path, variant: str, name: str) -> None:
    texts = {rec["text_input"] for rec in _lines(mirage_dir / name)}
    assert texts == {prompts.rule_text(variant)}
    assert prompts.user_prompt(variant, None) == prompts.rule_text(variant)
    before, after = prompts.split_at_image(variant)
    assert before + prompts.IMAGE_PLACEHOLDER + after == prompts.rule_text(variant)


def test_official_training_answers_give_traces_in_every_format(mirage_dir: Path) -> None:
    """The 1000 Mirage answers use our boxed spelling and every CoT format can narrate them."""
    rows = _lines(mirage_dir / "train_direct.jsonl")
    assert len(rows) == 1000
    for rec in rows:
        m = FrozenLakeMap.from_map_desc(rec["map_desc"])
        answer = rec["text_output"]
        path = answer[len("\\boxed{") : -1].split(", ")
        assert traces.boxed(path) == answer
        assert traces.completion(m, path, "none") == answer
        for cot in ("desc", "grid+desc"):
            text = traces.completion(m, path, cot)
            assert [s.move for s in traces.parse_steps(text, cot, m)] == path
