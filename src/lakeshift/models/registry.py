"""Which model a name means: named from-scratch sizes, local folders, run folders, hub ids; text vs vision.

``resolve_model`` only reads configs (cheap, no weights), so bad names fail before any long work. The
``load_*`` and ``build_*`` functions do the heavy part.

Named sizes are Qwen2-architecture models with random weights and a tokenizer built from the training
data (structured by default, see :mod:`lakeshift.models.tokenizer`). The vision sizes (:data:`VISION_SIZES`)
are random Qwen2.5-VL models of the same spirit: ``tiny-vl`` exercises the image path on a CPU, ``mini-vl``
has ``mini``'s language model and reads each map cell as one visual token. Base models
(:data:`BASE_MODELS`) are named sizes pretrained by ``lakeshift pretrain`` on map reading and random walks
(:mod:`lakeshift.models.pretrain`) and shipped in the package, to be fine-tuned per format.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lakeshift.errors import LakeshiftError
from lakeshift.models import cells
from lakeshift.models.tokenizer import (
    IM_END,
    MAX_MAP_SIZE,
    PAD_TOKEN,
    build_tokenizer,
    load_tokenizer,
)

# Qwen2 shapes (hidden, layers, heads, kv heads, MLP width); parameter counts for a ~100-symbol vocabulary.
NAMED_SIZES: dict[str, dict[str, int]] = {
    "micro": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "mlp": 192},  # ~0.1M: tests
    "mini": {"hidden": 128, "layers": 4, "heads": 4, "kv_heads": 2, "mlp": 384},  # ~0.9M
    "tiny": {"hidden": 256, "layers": 4, "heads": 4, "kv_heads": 2, "mlp": 688},  # ~3M: CPU runs
    "small": {"hidden": 512, "layers": 8, "heads": 8, "kv_heads": 4, "mlp": 1376},  # ~21M
    "base": {"hidden": 768, "layers": 12, "heads": 12, "kv_heads": 4, "mlp": 2048},  # ~75M: GPU
}
TINY_VL = "tiny-vl"
MINI_VL = "mini-vl"
MINI_VL_CELLS = "mini-vl-cells"
#: Where a vision model's visual tokens are (:attr:`VisionSize.visual_positions`).
VisualPositions = Literal["rope", "cells"]


@dataclass(frozen=True)
class CellSize:
    """A named cells size: a shape of :data:`NAMED_SIZES` and the cells spec it starts with."""

    shape: str
    spec: cells.CellSpec = field(default_factory=cells.CellSpec)


#: Named sizes with row and column embeddings for map cells (:mod:`lakeshift.models.cells`): presets of
#: the cells spec. ``-shift``: random row and column offsets in training and cells for every redrawn grid;
#: ``-compose``: those and composed coordinate tokens.
CELL_SIZES: dict[str, CellSize] = {
    "micro-cells": CellSize("micro"),
    "mini-cells": CellSize("mini"),
    "tiny-cells": CellSize("tiny"),
    "mini-cells-shift": CellSize("mini", cells.CellSpec(grids="every", offsets="random")),
    "mini-cells-compose": CellSize(
        "mini", cells.CellSpec(grids="every", offsets="random", coordinates="composed")
    ),
}
_CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
#: Shipped base checkpoints and the config that rebuilds each (``lakeshift pretrain CONFIG``).
BASE_MODELS: dict[str, str] = {
    "mini-cells-base": "configs/pretrain/base-mini-cells.yaml",
    "mini-cells-trace-base": "configs/pretrain/base-mini-cells-trace.yaml",
    "mini-cells-trace-player-base": "configs/pretrain/base-mini-cells-trace-player.yaml",
    "mini-cells-trace-wide-base": "configs/pretrain/base-mini-cells-trace-wide.yaml",
}
# Positions are rotary (no learned table), so this only bounds the longest conversation (char-level
# table+desc traces on 10x10 maps reach ~15k characters).
MAX_POSITIONS = 32768
#: Qwen2.5-VL's patch geometry (the 7B model's): 14-pixel patches, 2x2 of them merged into one visual token,
#: so a merged token covers 28 x 28 pixels.
VL_PATCH = 14
VL_MERGE = 2
VL_TOKEN_PIXELS = VL_PATCH * VL_MERGE


@dataclass(frozen=True)
class VisionSize:
    """A named Qwen2.5-VL size: its language model, its vision tower, and how a map image reaches it.

    Attributes:
        text: the language model's shape, as a :data:`NAMED_SIZES` entry.
        mrope_section: the multimodal rotary sections (temporal, height, width), summing to half the
            language model's head size.
        vision: the vision tower's ``depth``, ``hidden``, ``mlp`` and ``heads``.
        min_pixels, max_pixels: the image processor's bounds on an image's area (Qwen's ``smart_resize``).
        cell_pixels: ``None``: the image goes to the processor as rendered, which resizes it to multiples of
            28 pixels within the bounds; a number: lakeshift first resizes each map image so that every cell
            is this many pixels square (:func:`lakeshift.models.data.cell_image`), saved with the model as
            ``config.json``'s ``map_cell_pixels``.
        tie_embeddings: whether the output layer is the input embedding (as for the text named sizes).
        visual_positions: ``rope``: a visual token's place is Qwen2.5-VL's 3-D rotary position only;
            ``cells``: each merged visual token also gets learned embeddings of its row and column in the
            image's token grid (:mod:`lakeshift.models.cells.vision`; with ``cell_pixels`` 28, its map
            cell's), as a cells text model's map cells do.
    """

    text: dict[str, int]
    mrope_section: tuple[int, int, int]
    vision: dict[str, int]
    min_pixels: int
    max_pixels: int
    cell_pixels: int | None = None
    tie_embeddings: bool = False
    visual_positions: VisualPositions = "rope"


#: The vision sizes. ``tiny-vl``: the image path at test scale; its images are at most 112 x 112 pixels,
#: so a visual token covers about a cell of a 4x4 map and more of larger ones. ``mini-vl``: ``mini``'s
#: language model (mrope sections scaled from the 7B model's 16/24/24 of 64) and a two-block vision tower;
#: each cell of an N x N map is resized to 28 pixels, so the image is 28N pixels square and each of its N * N
#: merged visual tokens shows exactly one cell, for every N from 2 to the structured tokenizer's
#: :data:`~lakeshift.models.tokenizer.MAX_MAP_SIZE` (the processor's ``max_pixels`` is set to that map's
#: image; a larger map is refused where its image is read). ``mini-vl-cells``: ``mini-vl`` whose visual tokens
#: also get their cell's row and column embeddings.
VISION_SIZES: dict[str, VisionSize] = {
    TINY_VL: VisionSize(
        text={"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "mlp": 128},
        mrope_section=(2, 3, 3),
        vision={"depth": 2, "hidden": 64, "mlp": 128, "heads": 2},
        min_pixels=56 * 56,
        max_pixels=112 * 112,
    ),
    MINI_VL: VisionSize(
        text=NAMED_SIZES["mini"],
        mrope_section=(4, 6, 6),
        vision={"depth": 2, "hidden": 64, "mlp": 256, "heads": 2},
        min_pixels=(2 * VL_TOKEN_PIXELS) ** 2,
        max_pixels=(MAX_MAP_SIZE * VL_TOKEN_PIXELS) ** 2,
        cell_pixels=VL_TOKEN_PIXELS,
        tie_embeddings=True,
    ),
}
VISION_SIZES[MINI_VL_CELLS] = dataclasses.replace(VISION_SIZES[MINI_VL], visual_positions="cells")

NAMED_MODELS = (*NAMED_SIZES, *CELL_SIZES, *VISION_SIZES, *BASE_MODELS)
#: The ``config.json`` key of a vision model whose map images lakeshift resizes per cell
#: (:attr:`VisionSize.cell_pixels`).
CELL_PIXELS_KEY = "map_cell_pixels"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
RUN_FILE = "run.json"


@dataclass
class ModelSpec:
    """A resolved ``--model`` argument.

    Attributes:
        name: what the user passed.
        kind: ``"named"`` (built from scratch), ``"path"`` (local folder) or ``"hub"`` (Hugging Face id).
        source: folder or hub id to load from (``None`` for named sizes).
        vision: whether the model takes images (an image-text-to-text model such as Qwen2.5-VL).
        model_type: the config's ``model_type`` (``qwen2`` for named sizes).
        config: the raw config dict (empty for named sizes).
        small: a small model of lakeshift's own (a named size, a shipped base model, or a run folder that
            trained with the ``scratch`` preset), trained further with that preset and CPU settings; a
            small vision model trains its vision tower (it starts random), any other has it frozen.
        cell_pixels: for a vision model whose map images lakeshift resizes so that each cell is this many
            pixels square (:attr:`VisionSize.cell_pixels`); ``None``: images as rendered.
    """

    name: str
    kind: str
    source: str | None
    vision: bool
    model_type: str
    config: dict[str, Any] = field(default_factory=dict)
    small: bool = False
    cell_pixels: int | None = None


def _vision_types() -> set[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def _causal_types() -> set[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def is_run_folder(path: Path) -> bool:
    """Whether ``path`` is a lakeshift training run folder (SFT, GRPO or pretraining): it has ``run.json``.
    The only non-empty folders ``train --out`` writes into: checkpoint rotation, the model card and the
    metrics log would otherwise delete or overwrite a user's own ``checkpoint-N/``, ``README.md``, ..."""
    return (path / RUN_FILE).is_file()


def model_folder(path: Path) -> Path:
    """The weights folder of ``path``: a training run folder's ``model/`` or the folder itself."""
    if (path / RUN_FILE).is_file() and (path / "model" / "config.json").is_file():
        return path / "model"
    return path


def resolve_model(name: str) -> ModelSpec:
    """Resolves ``--model`` without loading weights.

    Raises:
        LakeshiftError: unknown name, a folder without ``config.json``, an unreachable hub id, or a model that
            is neither a causal LM nor an image-text-to-text model.
    """
    if name in NAMED_SIZES:
        return ModelSpec(name, "named", None, False, "qwen2", small=True)
    if name in CELL_SIZES:
        return ModelSpec(name, "named", None, False, cells.MODEL_TYPE, small=True)
    if name in VISION_SIZES:
        size = VISION_SIZES[name]
        model_type = cells.VISION_MODEL_TYPE if size.visual_positions == "cells" else "qwen2_5_vl"
        return ModelSpec(name, "named", None, True, model_type, small=True, cell_pixels=size.cell_pixels)
    if name in BASE_MODELS:
        folder = _CHECKPOINTS / name
        if not (folder / "config.json").is_file():
            raise LakeshiftError(
                f"--model {name}: the base checkpoint {folder} is missing from this installation "
                f"(rebuild it with `lakeshift pretrain {BASE_MODELS[name]} --out runs/{name}` and pass "
                f"--model runs/{name})"
            )
        return _spec_from_config(name, "path", str(folder), _read_config(folder / "config.json"), small=True)
    path = Path(name)
    if path.exists():
        if not path.is_dir():
            raise LakeshiftError(
                f"--model {name}: not a folder (expected a checkpoint or training run folder)"
            )
        folder = model_folder(path)
        config_file = folder / "config.json"
        if not config_file.is_file():
            if (path / RUN_FILE).is_file():
                raise LakeshiftError(f"--model {name}: the run has no model/ yet (training unfinished?)")
            raise LakeshiftError(f"--model {name}: {config_file} not found (not a model checkpoint folder)")
        run = run_record(path)
        problem = saved_model_problem(folder)
        if problem:
            raise LakeshiftError(f"--model {name}: {problem}")
        config = _read_config(config_file)
        return _spec_from_config(name, "path", str(folder), config, small=_trained_small(run))
    if not _HUB_ID.match(name):
        raise LakeshiftError(
            f"--model {name}: unknown model: not one of the named sizes ({', '.join(NAMED_MODELS)}), "
            "not an existing folder, and not a Hugging Face id of the form org/name"
        )
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(name).to_dict()
    except (OSError, ValueError) as err:
        raise LakeshiftError(
            f"--model {name}: cannot load its config from the Hugging Face hub ({err})"
        ) from None
    return _spec_from_config(name, "hub", name, config)


def resolve_offline(name: str) -> ModelSpec | None:
    """:func:`resolve_model` for every name but a hub id, which is ``None`` here (it is checked online, when
    it is loaded): what a plan can check of a model before anything runs.

    Raises:
        LakeshiftError: as :func:`resolve_model`.
    """
    if name not in NAMED_MODELS and not Path(name).exists() and _HUB_ID.match(name):
        return None
    return resolve_model(name)


def _read_config(config_file: Path) -> dict[str, Any]:
    from lakeshift.io import read_json

    config = read_json(config_file)
    if not isinstance(config, dict):
        raise LakeshiftError(f"{config_file}: expected a JSON object, got {type(config).__name__}")
    return config


_CHECKPOINT_NAME = re.compile(r"checkpoint-\d+")


def run_folder(path: Path) -> Path | None:
    """The training run a model path belongs to: ``RUN`` for ``RUN`` itself and for its own folders
    ``RUN/model``, ``RUN/adapter`` and ``RUN/checkpoint-N``; ``None`` for a path outside any run."""
    if (path / RUN_FILE).is_file():
        return path
    own = path.name in ("model", "adapter") or _CHECKPOINT_NAME.fullmatch(path.name)
    return path.parent if own and (path.parent / RUN_FILE).is_file() else None


def run_record(model: str | Path) -> dict[str, Any]:
    """The ``run.json`` of the run ``model`` belongs to (:func:`run_folder`), or ``{}`` outside a run: what
    every reader of a model takes its formats, prompt and recipe from, whichever of its folders it names.

    Raises:
        LakeshiftError: a ``run.json`` that is not a JSON object, or a run still marked ``running`` whose
            final model is the one asked for (killed or out of disk while saving it; its checkpoints are
            complete and may be named).
    """
    from lakeshift.io import read_json

    path = Path(model)
    run_dir = run_folder(path)
    if run_dir is None:
        return {}
    run_file = run_dir / RUN_FILE
    record = read_json(run_file)
    if not isinstance(record, dict):
        raise LakeshiftError(f"{run_file}: expected a JSON object, got {type(record).__name__}")
    final = run_dir / "model"
    asked_final = path.resolve() in (run_dir.resolve(), final.resolve())
    if record.get("status") == "running" and final.exists() and asked_final:
        # run.json says "done" only after model/ is completely saved: this one was cut short while saving.
        raise LakeshiftError(
            f"{run_file}: status 'running', so {final} is not a complete model (killed or out of disk while "
            "saving?); finish the run with `lakeshift train ... --resume`"
        )
    return record


#: The JSON files a saved model folder may hold; a torn one fails in transformers with a traceback.
MODEL_JSON_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "preprocessor_config.json",
    "processor_config.json",
    "chat_template.json",
)


def saved_model_problem(folder: Path) -> str | None:
    """Why a saved model folder cannot be loaded, or ``None``: its weights (:func:`weights_problem`) and
    every JSON file it holds (:data:`MODEL_JSON_FILES`) must be complete. Cheap: no tensor is read."""
    from lakeshift.io import read_json

    for name in MODEL_JSON_FILES:
        if (folder / name).is_file():
            try:
                read_json(folder / name)
            except LakeshiftError as err:
                return f"{err} (a save or copy that did not finish?)"
    problem = weights_problem(folder)
    return f"{folder}: {problem} (a save or copy that did not finish?)" if problem else None


def weights_problem(folder: Path) -> str | None:
    """Why the weights of a saved model or checkpoint folder cannot be loaded, or ``None``: they must be
    there (``model.safetensors``, its shards, an adapter or a legacy ``.bin``) and each complete (a
    safetensors file its full length, a torch zip file its central directory, written last)."""
    names = ("model.safetensors", "adapter_model.safetensors")
    weights = [folder / n for n in names if (folder / n).is_file()]
    for index in (folder / "model.safetensors.index.json", folder / "pytorch_model.bin.index.json"):
        if index.is_file():
            try:
                shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
            except (OSError, ValueError, KeyError, AttributeError, TypeError):
                return f"{index.name} is unreadable"
            weights += [folder / str(shard) for shard in sorted(shards)]
    for legacy in ("pytorch_model.bin", "adapter_model.bin"):
        if (folder / legacy).is_file():
            weights.append(folder / legacy)
    if not weights:
        return "no model weights (no model.safetensors)"
    for file in weights:
        problem = torn_file(file)
        if problem:
            return problem
    return None


def torn_file(file: Path) -> str | None:
    """Why a weights, optimizer or scheduler file is not complete (``"<name> is cut short"``), or ``None``."""
    import zipfile

    if not file.is_file():
        return f"no {file.name}"
    try:
        if file.suffix == ".safetensors":
            with file.open("rb") as f:
                header_len = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(header_len))
            end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
            if file.stat().st_size < 8 + header_len + end:
                return f"{file.name} is cut short"
        else:
            with zipfile.ZipFile(file) as z:  # torch.save's format: the directory at the end goes first
                z.namelist()
    except (OSError, ValueError, KeyError, TypeError, AttributeError, zipfile.BadZipFile):
        return f"{file.name} is unreadable"
    return None


def _trained_small(record: dict[str, Any]) -> bool:
    """Whether ``record`` (a ``run.json``) is a lakeshift run (SFT or pretraining) of a small model: it
    trained with the ``scratch`` preset, so fine-tuning it further does too (a fine-tuned 7B run says
    ``paper``)."""
    hparams, init = record.get("hparams"), record.get("init")
    if isinstance(init, dict) and init.get("from_named_size"):  # GRPO after a small model's SFT
        return True
    return isinstance(hparams, dict) and hparams.get("preset") == "scratch"


def _spec_from_config(
    name: str, kind: str, source: str, config: dict[str, Any], small: bool = False
) -> ModelSpec:
    model_type = str(config.get("model_type", ""))
    if kind == "path":
        check_cells_checkpoint(Path(source), config)
    if model_type == cells.MODEL_TYPE:
        return ModelSpec(name, kind, source, False, model_type, config, small)
    if model_type in _vision_types() or "vision_config" in config:
        cell_pixels = config.get(CELL_PIXELS_KEY)
        if cell_pixels is not None and (
            not isinstance(cell_pixels, int) or isinstance(cell_pixels, bool) or cell_pixels < 1
        ):
            raise LakeshiftError(
                f"--model {name}: config.json: {CELL_PIXELS_KEY}: {cell_pixels!r} is not a positive number "
                "of pixels"
            )
        return ModelSpec(name, kind, source, True, model_type, config, small, cell_pixels)
    if model_type in _causal_types():
        return ModelSpec(name, kind, source, False, model_type, config, small)
    raise LakeshiftError(
        f"--model {name}: model_type {model_type!r} is neither a causal language model nor an "
        "image-text-to-text model; lakeshift trains and generates with those only"
    )


def weight_names(folder: Path) -> tuple[str, set[str]] | None:
    """The tensor names of a saved model's full weights, read from the safetensors header (or the shards'
    index) without loading a tensor, and the file they were read from; ``None`` without such weights (an
    adapter, a legacy ``.bin``) or when they are unreadable (:func:`weights_problem` says so)."""
    index = folder / "model.safetensors.index.json"
    try:
        if index.is_file():
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            return index.name, {str(k) for k in weight_map}
        file = folder / "model.safetensors"
        if file.is_file():
            with file.open("rb") as f:
                header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
            return file.name, {str(k) for k in header if k != "__metadata__"}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return None


def check_cells_checkpoint(folder: Path, config: dict[str, Any]) -> None:
    """A local checkpoint's cells settings, checked where it is loaded, without reading a tensor: a cells
    model's spec and token tables (:meth:`cells.CellSpec.from_json` or ``from_legacy``,
    :meth:`cells.CellVocab.from_config` or ``from_legacy``) are valid, the spec is there beside its tables,
    none of the tables lakeshift saves with the spec is left out (:func:`cells.absent_table`) and none that
    the rule needs is empty, every token id is in the vocabulary, and its weights are those its spec makes
    (:func:`cells.weight_mismatch`: a part the spec makes that the weights lack would start from random
    weights, one they hold that the spec does not make would be dropped); a checkpoint whose weights are a
    cells model's is declared one (another ``model_type`` would drop its row and column embeddings without
    a word).

    Raises:
        LakeshiftError: ``FOLDER/config.json: FIELD: problem``.
    """
    where = folder / "config.json"
    weights = weight_names(folder)
    model_type = config.get("model_type")
    if model_type != cells.MODEL_TYPE:
        keys = [k for k in config if k == "cells" or k.startswith("cell_")]
        rows = weights is not None and "model.embed_tokens.row.weight" in weights[1]
        if keys or rows:
            held = (
                f"its {weights[0] if weights else ''} holds row and column embeddings"
                if rows
                else (f"it has the cells key {keys[0]!r}")
            )
            raise LakeshiftError(
                f"{where}: model_type: {model_type!r}, but the checkpoint is a cells model ({held}, which "
                f"{model_type} would drop); a cells model's model_type is {cells.MODEL_TYPE}"
            )
        return
    legacy = "cells" not in config
    if legacy and "cell_vocab" in config:
        raise LakeshiftError(
            f"{where}: cells: missing, but the config has cell_vocab (lakeshift saves the spec beside its "
            "tables: without it the model would load with the default spec, not the one it was trained with)"
        )
    if legacy:
        spec = cells.CellSpec.from_legacy(config, str(where))
    else:
        spec = cells.CellSpec.from_json(config["cells"], f"{where}: cells")
    if "cell_vocab" in config:
        vocab, prefix = (
            cells.CellVocab.from_config(config["cell_vocab"], f"{where}: cell_vocab"),
            "cell_vocab.",
        )
        absent = cells.absent_table(config["cell_vocab"], config["cells"])
        if absent:
            lost = {"wave": "each wave frame's grid would get no cells"}.get(absent, "its tokens go unread")
            raise LakeshiftError(
                f"{where}: cell_vocab.{absent}: missing (lakeshift saves every table with this spec; without "
                f"it {lost})"
            )
    else:
        vocab, prefix = cells.CellVocab.from_legacy(config, str(where)), "cell_"
    missing = vocab.missing(walks=spec.walk != "none")
    if missing:
        raise LakeshiftError(
            f"{where}: {prefix}{missing[0]}: missing or empty (the cells rule reads it: without it the "
            "model's cells would be switched off)"
        )
    vocab_size = config.get("vocab_size")
    if isinstance(vocab_size, int) and not isinstance(vocab_size, bool):
        problem = vocab.id_problem(vocab_size)
        if problem:
            raise LakeshiftError(f"{where}: {prefix}{problem}")
    if weights is None:
        return
    layers = config.get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool):
        layers = len({n.split(".")[2] for n in weights[1] if n.startswith("model.layers.")})
    mismatch = cells.weight_mismatch(spec, weights[1], layers)
    if mismatch:
        raise LakeshiftError(_weights_message(where, folder / weights[0], spec, legacy, *mismatch))


#: The flat config keys of the spec fields a checkpoint of an earlier generation saved (``cell_*``).
_LEGACY_KEYS = {"grids": "cell_grids", "player": "cell_player", "order": "cell_order"}


def _weights_message(
    where: Path | str,
    file: Path | str,
    spec: cells.CellSpec,
    legacy: bool,
    name: str,
    part: str,
    needed: bool,
) -> str:
    """The one line saying that a cells checkpoint's config (``where``) and its weights (``file``) disagree
    on the weight ``name`` of ``part``: the spec makes it and the weights lack it (``needed``), or the
    weights hold it and the spec does not make it; named by the field that decides it."""

    def shown(value: Any) -> str:
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    need = cells.PARTS.get(part)
    if need is None:
        said = f"model_type: {cells.MODEL_TYPE}"
    else:
        field = need[0]
        key = _LEGACY_KEYS.get(field, f"cells.{field}") if legacy else f"cells.{field}"
        said = f"{key}: {shown(getattr(spec, field))}"
    if needed:
        return f"{where}: {said}, but {file} has no {name} (it would start from random weights)"
    made_by = f"only {need[0]}: {shown(need[1])} makes" if need else "no cells field makes"
    return (
        f"{where}: {said}, but {file} holds {name}, a weight {made_by} (loading would drop the trained "
        "weight without a word)"
    )


def cell_spec(spec: ModelSpec) -> cells.CellSpec:
    """The cells spec a model starts with: its named size's preset, or its config's (any generation).

    Raises:
        LakeshiftError: the model is not a cells model.
    """
    if spec.model_type != cells.MODEL_TYPE:
        raise LakeshiftError(
            f"--cells: needs a cells model (--model mini-cells, mini-cells-base, ...; {spec.name} is "
            f"{spec.model_type})"
        )
    if spec.name in CELL_SIZES:
        return CELL_SIZES[spec.name].spec
    config = spec.config
    if "cells" in config:
        return cells.CellSpec.from_json(config["cells"], f"{spec.name}: config.json: cells")
    return cells.CellSpec.from_legacy(config)


def hidden_size(spec: ModelSpec) -> int | None:
    """The model's hidden size from its shape or config (``None`` when the config does not say)."""
    if spec.name in VISION_SIZES:
        return VISION_SIZES[spec.name].text["hidden"]
    if spec.kind == "named":
        cell_size = CELL_SIZES.get(spec.name)
        return NAMED_SIZES[cell_size.shape if cell_size else spec.name]["hidden"]
    value = spec.config.get("hidden_size", spec.config.get("text_config", {}).get("hidden_size"))
    return value if isinstance(value, int) else None


def check_modality(spec: ModelSpec, input_format: str) -> None:
    """Refuses image input for a text-only model (a vision model may take text input, as in the paper).

    Raises:
        LakeshiftError: the combination cannot work.
    """
    if input_format == "image" and not spec.vision:
        raise LakeshiftError(
            f"--model {spec.name} is a text-only model ({spec.model_type}) but --input image needs an "
            f"image-text-to-text model (e.g. Qwen/Qwen2.5-VL-7B-Instruct, or {TINY_VL} on CPU)"
        )


def build_named(name: str, texts: list[str], tokenizer_kind: str = "structured") -> tuple[Any, Any]:
    """Builds a random-weights model and its processing class for a named size.

    Args:
        name: a key of :data:`NAMED_SIZES`, :data:`CELL_SIZES` or :data:`VISION_SIZES`.
        texts: training texts for the tokenizer's vocabulary.
        tokenizer_kind: one of :data:`lakeshift.models.tokenizer.TOKENIZERS`.

    Returns:
        ``(model, tokenizer_or_processor)``.
    """
    if name in VISION_SIZES:
        return build_vl(name, texts, tokenizer_kind)
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cell_size = CELL_SIZES.get(name)
    shape = NAMED_SIZES[cell_size.shape if cell_size else name]
    tokenizer = build_tokenizer(tokenizer_kind, texts)
    config_class, model_class = (Qwen2Config, Qwen2ForCausalLM)
    extra: dict[str, Any] = {}
    if cell_size:
        if tokenizer_kind != "structured":
            raise LakeshiftError(f"--model {name}: cell positions need --tokenizer structured")
        config_class, model_class = cells.register()
        vocab = cells.CellVocab.from_tokenizer(tokenizer)
        extra = {"cells": cell_size.spec.to_json(), "cell_vocab": vocab.to_config()}
    config = config_class(
        **extra,
        vocab_size=len(tokenizer),
        hidden_size=shape["hidden"],
        intermediate_size=shape["mlp"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
    )
    model = model_class(config)
    _set_generation_ids(model, tokenizer)
    return model, tokenizer


def _set_generation_ids(model: Any, tokenizer: Any) -> None:
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids(IM_END)
    model.generation_config.pad_token_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    model.generation_config.bos_token_id = None


def image_only_processor_class() -> type:
    """A Qwen2.5-VL processor without the video slot.

    ``Qwen2_5_VLProcessor`` insists on a video processor, which needs torchvision (absent here: it drags in a
    CUDA torch). Images are all this project feeds, so this subclass keeps the image processor and tokenizer.
    """
    from transformers import Qwen2_5_VLProcessor
    from transformers.processing_utils import ProcessorMixin

    class ImageOnlyQwenVLProcessor(Qwen2_5_VLProcessor):
        def __init__(
            self, image_processor: Any = None, tokenizer: Any = None, chat_template: Any = None, **_: Any
        ):
            self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
            self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    return ImageOnlyQwenVLProcessor


def build_tiny_vl(texts: list[str], tokenizer_kind: str = "structured") -> tuple[Any, Any]:
    """A random Qwen2.5-VL small enough for CPU tests, with an image-only processor and a local tokenizer."""
    return build_vl(TINY_VL, texts, tokenizer_kind)


def build_vl(name: str, texts: list[str], tokenizer_kind: str = "structured") -> tuple[Any, Any]:
    """A random Qwen2.5-VL of a :data:`VISION_SIZES` size, built from transformers' own classes, with an
    image-only processor (Qwen's image processor, patch 14, merge 2) and a tokenizer built from ``texts``.
    A size with :attr:`VisionSize.cell_pixels` saves it in the config as :data:`CELL_PIXELS_KEY`."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    size = VISION_SIZES[name]
    tokenizer = build_tokenizer(tokenizer_kind, texts, vision=True)
    image_processor = Qwen2VLImageProcessorPil(
        min_pixels=size.min_pixels,
        max_pixels=size.max_pixels,
        patch_size=VL_PATCH,
        merge_size=VL_MERGE,
        temporal_patch_size=2,
    )
    processor = image_only_processor_class()(
        image_processor, tokenizer, chat_template=tokenizer.chat_template
    )
    ids = tokenizer.convert_tokens_to_ids
    text, vision = size.text, size.vision
    extra: dict[str, Any] = {CELL_PIXELS_KEY: size.cell_pixels} if size.cell_pixels is not None else {}
    if size.tie_embeddings:
        extra["tie_word_embeddings"] = True
    config_class, model_class = Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    if size.visual_positions == "cells":
        config_class, model_class = cells.register_vision()
    config = config_class(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": text["hidden"],
            "intermediate_size": text["mlp"],
            "num_hidden_layers": text["layers"],
            "num_attention_heads": text["heads"],
            "num_key_value_heads": text["kv_heads"],
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e6,
                "mrope_section": list(size.mrope_section),
            },
            "max_position_embeddings": MAX_POSITIONS,
            "bos_token_id": None,
            "eos_token_id": ids(IM_END),
            "pad_token_id": ids(PAD_TOKEN),
        },
        vision_config={
            "depth": vision["depth"],
            "hidden_size": vision["hidden"],
            "intermediate_size": vision["mlp"],
            "num_heads": vision["heads"],
            "out_hidden_size": text["hidden"],
            "fullatt_block_indexes": [vision["depth"] - 1],
            "window_size": 4 * VL_TOKEN_PIXELS,
            "patch_size": VL_PATCH,
            "spatial_merge_size": VL_MERGE,
            "temporal_patch_size": 2,
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        bos_token_id=None,
        eos_token_id=ids(IM_END),
        pad_token_id=ids(PAD_TOKEN),
        **extra,
    )
    model = model_class(config)
    _set_generation_ids(model, tokenizer)
    return model, processor


def load_processing(spec: ModelSpec) -> Any:
    """The tokenizer (text models) or processor (vision models) saved with a checkpoint."""
    assert spec.source is not None
    if not spec.vision:
        if Path(spec.source).is_dir():
            return load_tokenizer(spec.source)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(spec.source)
    if spec.model_type in ("qwen2_5_vl", "qwen2_vl", cells.VISION_MODEL_TYPE):
        return _load_qwen_vl_processor(spec.source)
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(spec.source)


def _load_qwen_vl_processor(source: str) -> Any:
    from transformers import AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    folder = Path(source)
    tokenizer = load_tokenizer(folder) if folder.is_dir() else AutoTokenizer.from_pretrained(source)
    image_processor = Qwen2VLImageProcessorPil.from_pretrained(source)
    template = None
    if (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    elif (folder / "chat_template.json").is_file():
        template = json.loads((folder / "chat_template.json").read_text(encoding="utf-8")).get(
            "chat_template"
        )
    template = template or tokenizer.chat_template
    return image_only_processor_class()(image_processor, tokenizer, chat_template=template)


def load_model(spec: ModelSpec, dtype: Any = None) -> Any:
    """Loads a checkpoint's weights (causal LM or image-text-to-text model)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    if spec.model_type == cells.MODEL_TYPE:
        cells.register()
    if spec.model_type == cells.VISION_MODEL_TYPE:
        cells.register_vision()
    cls = AutoModelForImageTextToText if spec.vision else AutoModelForCausalLM
    kwargs = {"dtype": dtype} if dtype is not None else {}
    if spec.model_type != cells.MODEL_TYPE:
        return cls.from_pretrained(spec.source, **kwargs)
    model, info = cls.from_pretrained(spec.source, output_loading_info=True, **kwargs)
    problem = _loaded_weights_problem(spec, model, info)
    if problem:
        raise LakeshiftError(problem)
    vocab = cells.CellVocab.from_config(model.config.cell_vocab)
    if not vocab.complete:  # a legacy checkpoint saved without the markers: its tokenizer's
        tokenizer = tokenizer_of(load_processing(spec))
        cells.set_vocab(model, vocab.with_words_of(cells.CellVocab.from_tokenizer(tokenizer)))
    return model


def _loaded_weights_problem(spec: ModelSpec, model: Any, info: dict[str, Any]) -> str | None:
    """What a loaded cells model's spec built and its weights held disagree on (transformers' loading
    info: a weight the model has that the checkpoint lacked starts random, one the checkpoint held that the
    model has no place for is dropped), as one line naming the config and the field; or None. A local
    checkpoint's cells parts were checked when it was resolved (:func:`check_cells_checkpoint`); this also
    covers a hub checkpoint and any weight that is not a cells part."""
    source = Path(spec.source or "")
    where = source / "config.json" if source.is_dir() else f"{spec.source}: config.json"
    disagree = [(n, True) for n in info.get("missing_keys", ())]
    disagree += [(n, False) for n in info.get("unexpected_keys", ())]
    if not disagree:
        return None
    name, needed = sorted(disagree)[0]
    part = cells.part_of(name)
    if part is not None and part in cells.PARTS:
        legacy = "cells" not in spec.config
        return _weights_message(where, spec.source or "", cells.spec_of(model), legacy, name, part, needed)
    if needed:
        return f"{where}: the model it describes has {name}, but its weights lack it (it would start random)"
    return f"{where}: its weights hold {name}, but the model it describes has none (it would be dropped)"


def tokenizer_of(processing: Any) -> Any:
    """The tokenizer inside a processor, or the tokenizer itself."""
    return getattr(processing, "tokenizer", processing)


def freeze_vision_tower(model: Any) -> int:
    """Freezes the vision encoder (as the paper does); returns the number of frozen parameters."""
    tower = None
    for holder in (model, getattr(model, "model", None)):
        for attr in ("visual", "vision_tower", "vision_model"):
            if holder is not None and getattr(holder, attr, None) is not None:
                tower = getattr(holder, attr)
                break
        if tower is not None:
            break
    if tower is None:
        raise LakeshiftError(f"{type(model).__name__}: cannot find its vision tower to freeze")
    n = 0
    for param in tower.parameters():
        param.requires_grad_(False)
        n += param.numel()
    return n
