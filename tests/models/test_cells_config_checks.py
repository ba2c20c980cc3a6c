"""A cells checkpoint's ``config.json`` must describe the weights beside it: the spec (``cells``) makes
exactly the parts ``model.safetensors`` holds, the spec is there beside its tables (``cell_vocab``), and
every table lakeshift saves with the spec is there. Anything else is refused where the model is resolved,
as one line naming the file and the field, instead of loading a model that silently drops trained weights,
starts some at random or reads no wave frame."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lakeshift.errors import LakeshiftError
from lakeshift.models.cells import CellSpec, CellVocab, parse_overrides, part_of, part_weights
from lakeshift.models.cells.spec import ATTENTIONS, COORDINATES, GRIDS, OFFSETS, SEQUENCE_POSITIONS, WALKS

#: The spec with every part on (player, order, coupled map numbers and edges, local slot vectors).
EVERY_PART = CellSpec(
    grids="coupled", walk="trace", maps=("grid", "desc"), player=True, order=True, attention="local"
)
LAYERS = 2


def _config(spec: CellSpec, vocab: CellVocab, vocab_size: int) -> Any:
    from lakeshift.models.cells import register

    config_class, _ = register()
    return config_class(
        cells=spec.to_json(),
        cell_vocab=vocab.to_config(),
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
        pad_token_id=0,
    )


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from lakeshift.models.tokenizer import build_structured_tokenizer

    return build_structured_tokenizer([])


def _saved(folder: Path, spec: CellSpec, tokenizer: Any) -> tuple[Path, Any]:
    """A random cells model of ``spec`` (every part's weights non-zero), saved with its tokenizer."""
    import torch

    from lakeshift.models.cells import register

    _, model_class = register()
    torch.manual_seed(0)
    model = model_class(_config(spec, CellVocab.from_tokenizer(tokenizer), len(tokenizer)))
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if part_of(name) is not None:
                weight.normal_(0, 1.0)
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, model


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, tokenizer: Any) -> dict[str, tuple[Path, Any]]:
    """Two saved models: ``every`` (:data:`EVERY_PART`) and ``plain`` (the default spec)."""
    root = tmp_path_factory.mktemp("cells-models")
    return {
        "every": _saved(root / "every", EVERY_PART, tokenizer),
        "plain": _saved(root / "plain", CellSpec(), tokenizer),
    }


def _edited(saved: dict, tmp_path: Path, model: str, edit: dict[str, Any]) -> Path:
    """A copy of a saved model whose ``config.json`` has ``edit`` applied: ``{"cells.grids": "next"}`` sets
    a key of a mapping, ``...`` deletes it."""
    folder = tmp_path / model
    shutil.copytree(saved[model][0], folder)
    config = json.loads((folder / "config.json").read_text())
    for path, value in edit.items():
        *parents, key = path.split(".")
        holder = config
        for parent in parents:
            holder = holder[parent]
        if value is ...:
            del holder[key]
        else:
            holder[key] = value
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _wave_ids(tokenizer: Any) -> list[int]:
    """A grid conversation answered with the wave CoT: every part of the rule has tokens to read."""
    from lakeshift import formats, traces
    from lakeshift.env import FrozenLakeMap

    m = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
    messages = [
        {"role": "user", "content": formats.render(m, "grid")},
        {"role": "assistant", "content": traces.completion(m, m.optimal_path(), "wave")},
    ]
    return tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]


@pytest.mark.parametrize("model", ["every", "plain"])
def test_an_unedited_checkpoint_resolves_loads_and_gives_the_saved_model_s_logits(
    saved: dict, tokenizer: Any, model: str
) -> None:
    import torch

    from lakeshift.models.cells import spec_of
    from lakeshift.models.registry import load_model, resolve_model

    folder, original = saved[model]
    loaded = load_model(resolve_model(str(folder)))
    loaded.eval()
    assert spec_of(loaded) == spec_of(original)
    ids = torch.tensor([_wave_ids(tokenizer)])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, original(ids).logits)


#: A change to a saved model's config.json and what the one error line names after the file.
EDITS = {
    "the spec lost": ("every", {"cells": ...}, "cells: missing, but the config has cell_vocab"),
    "grids no longer coupled": (
        "every",
        {"cells.grids": "next", "cells.attention": "full"},
        "cells.grids: next, but {weights} holds model.embed_tokens.frame.weight, a weight only grids: "
        "coupled makes (loading would drop",
    ),
    "grids coupled without its weights": (
        "plain",
        {"cells.grids": "coupled"},
        "cells.grids: coupled, but {weights} has no model.embed_tokens.frame.weight (it would start from "
        "random weights)",
    ),
    "attention no longer local": (
        "every",
        {"cells.attention": "full"},
        "cells.attention: full, but {weights} holds model.layers.0.self_attn.slot_keys.weight, a weight only "
        "attention: local makes",
    ),
    "attention local without its slot vectors": (
        "plain",
        {"cells.grids": "coupled", "cells.attention": "local"},
        "cells.grids: coupled, but {weights} has no model.embed_tokens.frame.weight",
    ),
    "player off": ("every", {"cells.player": False}, "cells.player: false, but {weights} holds"),
    "player on without its weights": (
        "plain",
        {"cells.grids": "next", "cells.walk": "trace", "cells.player": True},
        "cells.player: true, but {weights} has no model.embed_tokens.player.weight",
    ),
    "order off": ("every", {"cells.order": False}, "cells.order: false, but {weights} holds"),
    "the wave word's table removed": (
        "every",
        {"cell_vocab.wave": ...},
        "cell_vocab.wave: missing (lakeshift saves every table with this spec; without it each wave frame's "
        "grid would get no cells)",
    ),
    "another table removed": ("plain", {"cell_vocab.box": ...}, "cell_vocab.box: missing"),
}


@pytest.mark.parametrize("case", EDITS)
def test_a_config_that_does_not_match_its_weights_is_one_line_naming_file_and_field(
    saved: dict, tmp_path: Path, case: str
) -> None:
    from lakeshift.models.registry import resolve_model

    model, edit, message = EDITS[case]
    folder = _edited(saved, tmp_path, model, edit)
    with pytest.raises(LakeshiftError) as err:
        resolve_model(str(folder))
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"{folder / 'config.json'}: "), text
    assert message.format(weights=folder / "model.safetensors") in text, text


def test_predict_and_train_refuse_it_before_any_work(saved: dict, tmp_path: Path) -> None:
    from tests.cli_checks import one_error_line, quiet_main

    folder = _edited(saved, tmp_path, "every", {"cells.grids": "next", "cells.attention": "full"})
    needle = f"{folder / 'config.json'}: cells.grids: next, but"
    data = tmp_path / "no-data"  # never read: the model is resolved first
    for command in ("predict", "train"):
        out = tmp_path / f"{command}-out"
        argv = [command, "--model", folder, "--data", data, "--split", "id-train", "--input", "grid"]
        code, err = quiet_main([*argv, "--cot", "wave", "--out", out])
        one_error_line(code, err, needle)
        assert not out.exists()


def test_a_checkpoint_saved_before_wave_frames_were_read_loads_without_the_wave_table(
    saved: dict, tmp_path: Path
) -> None:
    """Its spec has no ``sequence`` (added with the wave table): the rule reads no wave frame, as before."""
    from lakeshift.models.registry import load_model, resolve_model

    edit = {"cells.sequence": ..., "cells.attention": ..., "cell_vocab.wave": ...}
    folder = _edited(saved, tmp_path, "plain", edit)
    model = load_model(resolve_model(str(folder)))
    assert model.model.embed_tokens.rule.wave == -1


def test_loading_refuses_what_the_built_model_and_the_weights_disagree_on(
    saved: dict, tmp_path: Path
) -> None:
    """The loaded model's own parameters against the weights file, past the resolve-time check: a cells
    part named by its field, any other weight by its name."""
    from lakeshift.models.registry import ModelSpec, load_model, resolve_model

    folder = _edited(saved, tmp_path, "every", {"cells.grids": "next", "cells.attention": "full"})
    config = json.loads((folder / "config.json").read_text())
    spec = ModelSpec(str(folder), "path", str(folder), False, "lakeshift_cells", config)
    with pytest.raises(LakeshiftError, match=r"config\.json: cells\.grids: next, but .* holds model\.embed"):
        load_model(spec)
    fewer = _edited(saved, tmp_path / "fewer", "plain", {"num_hidden_layers": 1, "layer_types": ...})
    with pytest.raises(LakeshiftError, match=r"its weights hold model\.layers\.1\..*has none"):
        load_model(resolve_model(str(fewer)))


def _specs() -> list[CellSpec]:
    """Every valid combination of the fields that make parts, and every value of each other field beside
    all parts on."""
    specs = []
    for grids, walk, player, order, attention in itertools.product(
        GRIDS, WALKS, (False, True), (False, True), ATTENTIONS
    ):
        try:
            specs.append(CellSpec(grids=grids, walk=walk, player=player, order=order, attention=attention))
        except LakeshiftError:
            continue  # a combination the rule does not implement
    others: dict[str, tuple[Any, ...]] = {
        "maps": (("grid",), ("grid", "table"), ("grid", "desc"), ("grid", "table", "desc")),
        "offsets": OFFSETS,
        "coordinates": COORDINATES,
        "sequence": SEQUENCE_POSITIONS,
    }
    for name, values in others.items():
        specs += [EVERY_PART.replace({name: value}) for value in values]
    return specs


def test_the_parts_table_names_exactly_the_weights_each_spec_builds(tokenizer: Any) -> None:
    """What the check compares a checkpoint's weights with (:func:`part_weights`) is what the model of
    every spec builds, so no field can add or drop a weight the check does not know of."""
    import torch

    from lakeshift.models.cells import register

    _, model_class = register()
    vocab = CellVocab.from_tokenizer(tokenizer)
    for spec in _specs():
        with torch.device("meta"):
            model = model_class(_config(spec, vocab, len(tokenizer)))
        built = {name for name in model.state_dict() if part_of(name) is not None}
        assert built == set(part_weights(spec, LAYERS)), spec


def test_a_cells_field_given_twice_on_the_command_line_is_refused(tmp_path: Path) -> None:
    from tests.cli_checks import one_error_line, quiet_main

    with pytest.raises(LakeshiftError, match=r"^grids: given twice \(grids=next, grids=every\)"):
        parse_overrides("grids=next,walk=trace,grids=every")
    argv = ["train", "--cells", "grids=next,grids=every", "--model", "micro-cells", "--data", tmp_path]
    code, err = quiet_main([*argv, "--input", "grid", "--cot", "none", "--out", tmp_path / "run"])
    one_error_line(code, err, "argument --cells: grids: given twice (grids=next, grids=every)")
    assert not (tmp_path / "run").exists()
