"""Visual cells: Qwen2.5-VL whose merged visual tokens carry the row and column of the token grid they sit in.

Qwen2.5-VL gives a visual token its place only through the 3-D rotary position (relative: a text token
reads where a visual token is only by comparing its own position with it). A cells text model adds learned
row and column embeddings to every map cell's token (:mod:`lakeshift.models.cells.modeling`); this model does
the same for the visual tokens: the merged token in row ``r`` and column ``c`` (1-based, row-major as the
vision tower emits them) gets ``visual_row[r] + visual_col[c]`` added after the merger. With
``mini-vl-cells`` each merged token shows exactly one map cell (28-pixel cells), so ``r`` and ``c`` are
the cell's row and column. Registered with the Auto classes as ``model_type`` ``lakeshift_cells_vl`` by
:func:`register_vision`, so checkpoints save and load like any other.

torch and transformers are imported when :func:`register_vision` runs, not with this module.
"""

from __future__ import annotations

from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.models.cells.positions import MAX_CELL

VISION_MODEL_TYPE = "lakeshift_cells_vl"

_registered: dict[str, Any] = {}


def register_vision() -> tuple[type, type]:
    """Defines and registers the config and model classes with transformers (once); returns them."""
    if _registered:
        return _registered["config"], _registered["model"]
    import torch
    from torch import nn
    from transformers import (
        AutoConfig,
        AutoModelForImageTextToText,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
    )
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
        Qwen2_5_VLModel,
        Qwen2_5_VLPreTrainedModel,
    )

    class CellsVLConfig(Qwen2_5_VLConfig):
        """Qwen2.5-VL's config; the model type says that visual tokens get row and column embeddings."""

        model_type = VISION_MODEL_TYPE

    class CellsVLModel(Qwen2_5_VLModel):
        def __init__(self, config: CellsVLConfig) -> None:
            super().__init__(config)
            hidden = config.text_config.hidden_size
            self.visual_row = nn.Embedding(MAX_CELL, hidden, padding_idx=0)
            self.visual_col = nn.Embedding(MAX_CELL, hidden, padding_idx=0)
            self.post_init()

        def get_image_features(
            self, pixel_values: torch.Tensor, image_grid_thw: torch.Tensor | None = None, **kwargs: Any
        ) -> Any:
            outputs = super().get_image_features(pixel_values, image_grid_thw, **kwargs)
            assert image_grid_thw is not None  # (Qwen's processor always gives it with pixel values)
            merge = self.visual.spatial_merge_size
            device = pixel_values.device
            added = []
            for tokens, (frames, height, width) in zip(
                outputs.pooler_output, image_grid_thw.tolist(), strict=True
            ):
                rows, cols = height // merge, width // merge
                if max(rows, cols) >= MAX_CELL:
                    raise LakeshiftError(
                        f"an image of {rows}x{cols} visual tokens: visual rows and columns go up to "
                        f"{MAX_CELL - 1} only"
                    )
                row = torch.arange(1, rows + 1, device=device).repeat_interleave(cols).repeat(frames)
                col = torch.arange(1, cols + 1, device=device).repeat(rows * frames)
                added.append(tokens + (self.visual_row(row) + self.visual_col(col)).to(tokens.dtype))
            outputs.pooler_output = tuple(added)
            return outputs

    class CellsVLForConditionalGeneration(Qwen2_5_VLForConditionalGeneration):
        config_class = CellsVLConfig

        def __init__(self, config: CellsVLConfig) -> None:
            # Qwen2_5_VLForConditionalGeneration's own __init__, with the visual cells' inner model
            Qwen2_5_VLPreTrainedModel.__init__(self, config)
            self.model = CellsVLModel(config)
            text = config.text_config
            self.lm_head = nn.Linear(text.hidden_size, text.vocab_size, bias=False)
            self.post_init()

    AutoConfig.register(VISION_MODEL_TYPE, CellsVLConfig)
    AutoModelForImageTextToText.register(CellsVLConfig, CellsVLForConditionalGeneration)
    _registered.update(config=CellsVLConfig, model=CellsVLForConditionalGeneration)
    return CellsVLConfig, CellsVLForConditionalGeneration
