"""Image input: a tiny random Qwen2.5-VL trains one step and predicts through the 7B model's code path;
mini-vl reads one visual token per map cell and trains its vision tower."""

from __future__ import annotations

import json

import pytest
from model_fixtures import generate_split

from lakeshift import Group, SplitSpec, generate_map, map_from_record
from lakeshift.cli import main
from lakeshift.errors import LakeshiftError
from lakeshift.formats.image import frame_geometry, render_image
from lakeshift.models.data import cell_image, load_sft, open_image
from lakeshift.models.registry import (
    build_named,
    build_tiny_vl,
    freeze_vision_tower,
    load_model,
    load_processing,
    resolve_model,
)
from lakeshift.models.tokenizer import message_texts


def _frame(size: int):
    split = SplitSpec("t", (Group(size=size, count=1, hole_prob=0.2),))
    return render_image(map_from_record(generate_map(split, seed=3, index=0)))


@pytest.fixture(scope="module")
def mini_vl_processor():
    return build_named("mini-vl", ["Grid:\n.  G  .\n.  X  .\n.  P  X"])[1]


@pytest.mark.parametrize("size", [2, 3, 4, 5, 6, 7, 8, 9, 10, 12])
def test_mini_vl_gives_each_map_cell_one_visual_token(mini_vl_processor, size):
    image = cell_image(_frame(size), size, cell_pixels=28)
    assert image.size == (28 * size, 28 * size)
    processor = mini_vl_processor
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}]}], add_generation_prompt=True, tokenize=False
    )
    enc = processor(text=[text], images=[image], return_tensors="pt")
    # image_grid_thw counts 14-pixel patches; 2x2 of them merge into one visual token.
    assert enc["image_grid_thw"].tolist() == [[1, 2 * size, 2 * size]]
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((enc["input_ids"] == pad).sum()) == size * size


@pytest.mark.parametrize("size", [3, 8, 9, 10])
def test_cell_image_keeps_every_cell_in_its_own_square(size):
    # A frame whose cells are flat colours (and gymnasium's black strip past 8x8): after resizing, every
    # 28-pixel square is exactly its cell's colour, so no visual token sees a neighbouring cell.
    from PIL import Image, ImageDraw

    window, cell = frame_geometry(size)
    frame = Image.new("RGB", (window, window))
    draw = ImageDraw.Draw(frame)
    colour = {(r, c): (20 * r + 7, 20 * c + 11, 200 - 9 * (r + c)) for r in range(size) for c in range(size)}
    for (r, c), rgb in colour.items():
        draw.rectangle((c * cell, r * cell, (c + 1) * cell - 1, (r + 1) * cell - 1), fill=rgb)
    image = cell_image(frame, size, cell_pixels=28)
    for (r, c), rgb in colour.items():
        square = image.crop((28 * c, 28 * r, 28 * (c + 1), 28 * (r + 1)))
        assert square.getcolors() == [(28 * 28, rgb)], (r, c)


def test_cell_image_refuses_what_it_cannot_align(tmp_path):
    with pytest.raises(LakeshiftError, match=r"^image: 200x200 pixels, not the frame of a 3x3 map \(192x192"):
        cell_image(_frame(3).resize((200, 200)), 3, cell_pixels=28)
    with pytest.raises(LakeshiftError, match=r"a 31x31 map; .* maps of 1x1 to 30x30"):
        cell_image(_frame(3), 31, cell_pixels=28)
    # Without the map's record the size comes from a frame only one map size has (64 n pixels, n < 8).
    small, large = tmp_path / "small.png", tmp_path / "large.png"
    _frame(5).save(small)
    _frame(9).save(large)
    assert open_image(small, cell_pixels=28).size == (140, 140)
    assert open_image(small).size == (320, 320)
    with pytest.raises(LakeshiftError, match=r"needs the map.s size from .*maps\.jsonl"):
        open_image(large, cell_pixels=28)
    assert open_image(large, cell_pixels=28, map_size=9).size == (252, 252)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("vl")
    generate_split(root, "id-train", sizes=(3,), count=2, inputs=("image",), images=True, train=True, seed=2)
    return root


@pytest.mark.slow
def test_tiny_vl_checkpoint_trains_and_predicts_like_the_7b_model(data, tmp_path):
    # A checkpoint folder, loaded exactly as Qwen/Qwen2.5-VL-7B-Instruct would be (config -> vision model).
    sft = load_sft(data, "id-train", "image", "none")
    model, processor = build_tiny_vl([t for r in sft.records for t in message_texts(r["messages"])])
    ckpt = tmp_path / "ckpt"
    model.save_pretrained(ckpt)
    processor.save_pretrained(ckpt)
    spec = resolve_model(str(ckpt))
    assert spec.vision and spec.model_type == "qwen2_5_vl"
    reloaded = load_model(spec)
    frozen = freeze_vision_tower(reloaded)
    assert frozen == sum(p.numel() for p in reloaded.model.visual.parameters())
    assert load_processing(spec).tokenizer.decode(processor.tokenizer("a  b\nc")["input_ids"]) == "a  b\nc"

    run = tmp_path / "run"
    argv = ["train", "--data", str(data), "--input", "image", "--cot", "none", "--model", str(ckpt)]
    assert main([*argv, "--out", str(run), "--max-steps", "1", "--batch-size", "2", "--lr", "1e-4"]) == 0
    record = json.loads((run / "run.json").read_text())
    assert record["hparams"]["preset"] == "paper" and record["model"]["vision"]
    assert record["model"]["frozen_vision_params"] == frozen
    assert record["model"]["n_trainable_params"] == record["model"]["n_params"] - frozen
    assert record["global_step"] == 1

    # Trained on the Mirage prompt (the 7B recipe); predicting with the image alone takes the same path.
    preds = tmp_path / "p.jsonl"
    argv = ["predict", "--model", str(run), "--data", str(data), "--split", "id-train", "--limit", "1"]
    assert main([*argv, "--out", str(preds), "--max-new-tokens", "4", "--prompt", "map-only"]) == 0
    (row,) = [json.loads(x) for x in preds.read_text().splitlines()]
    assert row["input_format"] == "image" and 1 <= row["n_output_tokens"] <= 4
    assert row["prompt"] == "map-only" and record["prompt"] == "mirage"


def _train_image_run(tmp_path, model: str):
    """Image / no CoT data of four maps, and a 2-step training run of ``model`` on it."""
    data = tmp_path / "data"
    generate_split(data, "id-train", sizes=(3, 4), count=2, inputs=("image",), images=True, train=True)
    run = tmp_path / "run"
    argv = ["train", "--data", str(data), "--input", "image", "--cot", "none", "--model", model]
    argv += ["--prompt", "map-only", "--out", str(run), "--max-steps", "2", "--batch-size", "2"]
    assert main(argv) == 0
    return data, run


def _assert_predicts_two_maps(tmp_path, data, run) -> None:
    preds = tmp_path / "p.jsonl"
    argv = ["predict", "--model", str(run), "--data", str(data), "--split", "id-train", "--limit", "2"]
    assert main([*argv, "--out", str(preds), "--max-new-tokens", "4"]) == 0
    rows = [json.loads(x) for x in preds.read_text().splitlines()]
    assert len(rows) == 2 and all(1 <= r["n_output_tokens"] <= 4 for r in rows)


@pytest.mark.slow
def test_mini_vl_trains_its_vision_tower_and_predicts_from_cell_sized_images(tmp_path):
    data, run = _train_image_run(tmp_path, "mini-vl")
    record = json.loads((run / "run.json").read_text())
    # Its vision tower starts random, so it trains with the rest (a pretrained model's is frozen).
    assert record["model"]["frozen_vision_params"] == 0
    assert record["model"]["n_trainable_params"] == record["model"]["n_params"]
    assert record["hparams"]["preset"] == "scratch" and record["hparams"]["vision_tower"] == "trained"
    spec = resolve_model(str(run))
    assert spec.vision and spec.cell_pixels == 28 and spec.small
    # --vision-tower frozen: the encoder and merger keep their weights (here: the run's)
    import torch

    frozen_run = tmp_path / "frozen"
    argv = ["train", "--data", str(data), "--input", "image", "--cot", "none", "--model", str(run)]
    argv += ["--prompt", "map-only", "--out", str(frozen_run), "--max-steps", "1", "--batch-size", "2"]
    assert main([*argv, "--vision-tower", "frozen"]) == 0
    record = json.loads((frozen_run / "run.json").read_text())
    tower = load_model(spec).model.visual
    assert record["model"]["frozen_vision_params"] == sum(p.numel() for p in tower.parameters())
    after = load_model(resolve_model(str(frozen_run))).model.visual.state_dict()
    assert all(torch.equal(value, after[name]) for name, value in tower.state_dict().items())
    model = load_model(spec)
    assert model.config.text_config.hidden_size == 128 and model.config.text_config.num_hidden_layers == 4
    _assert_predicts_two_maps(tmp_path, data, run)


def test_a_text_model_is_refused_a_vision_tower_in_one_line(tmp_path, capsys):
    data = tmp_path / "data"
    generate_split(data, "id-train", count=2, train=True)
    argv = ["train", "--data", str(data), "--input", "grid", "--cot", "none", "--model", "micro"]
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "run"), "--vision-tower", "frozen"]) == 2
    err = capsys.readouterr().err
    assert "--vision-tower frozen: --model micro has no vision tower" in err and len(err.splitlines()) == 1


def _image_inputs(processor, size: int):
    image = cell_image(_frame(size), size, cell_pixels=28)
    return processor.image_processor(images=[image], return_tensors="pt")


def test_mini_vl_cells_adds_each_visual_tokens_row_and_column():
    import torch
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    model, processor = build_named("mini-vl-cells", ["Grid:\n.  G  .\n.  X  .\n.  P  X"])
    assert model.config.model_type == "lakeshift_cells_vl"
    encoded = _image_inputs(processor, 3)
    with torch.no_grad():
        coupled = model.model.get_image_features(encoded["pixel_values"], encoded["image_grid_thw"])
        plain = Qwen2_5_VLModel.get_image_features(
            model.model, encoded["pixel_values"], encoded["image_grid_thw"]
        )
        (added,) = [c - p for c, p in zip(coupled.pooler_output, plain.pooler_output, strict=True)]
        # row-major, as the tower emits the merged tokens: token 3 * (r - 1) + (c - 1) shows cell (r, c)
        for index in range(9):
            r, c = divmod(index, 3)
            expected = model.model.visual_row.weight[r + 1] + model.model.visual_col.weight[c + 1]
            assert torch.allclose(added[index], expected, atol=1e-6)


@pytest.mark.slow
def test_mini_vl_cells_trains_saves_and_predicts(tmp_path):
    import torch
    from safetensors.torch import load_file

    data, run = _train_image_run(tmp_path, "mini-vl-cells")
    spec = resolve_model(str(run))
    assert spec.vision and spec.model_type == "lakeshift_cells_vl" and spec.cell_pixels == 28 and spec.small
    saved = load_file(str(run / "model" / "model.safetensors"))
    model = load_model(spec)
    assert torch.equal(model.model.visual_row.weight, saved["model.visual_row.weight"])
    assert torch.equal(model.model.visual_col.weight, saved["model.visual_col.weight"])
    _assert_predicts_two_maps(tmp_path, data, run)
