"""Image input: a tiny random Qwen2.5-VL trains one step and predicts through the 7B model's code path."""

from __future__ import annotations

import json

import pytest
from model_fixtures import generate_split

from lakeshift.cli import main
from lakeshift.models.data import load_sft
from lakeshift.models.registry import (
    build_tiny_vl,
    freeze_vision_tower,
    load_model,
    load_processing,
    resolve_model,
)
from lakeshift.models.tokenizer import message_texts

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("vl")
    generate_split(root, "id-train", sizes=(3,), count=2, inputs=("image",), images=True, train=True, seed=2)
    return root


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
