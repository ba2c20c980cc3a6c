"""Cells models: a small Qwen2 whose tokens that are map cells carry their row and column (position coupling).

A cells model (``--model mini-cells`` and the other cells sizes, the shipped ``mini-cells-*-base`` models)
adds to each token's embedding the embeddings of a row and a column (and optionally a player flag, an
ordered part and a map number) that a causal rule gives it. Seven modules, from pure data to torch:

- :mod:`~lakeshift.models.cells.spec`: :class:`CellSpec`, what the rule does, one typed field per behaviour
  (which grids get cells, what walks, which map formats are read, the player flag, the ordered part, training
  offsets, composed coordinates, the 1-D sequence position), checked as one; saved as ``config.json``'s
  ``cells``;
- :mod:`~lakeshift.models.cells.vocab`: :class:`CellVocab`, the token ids the rule reads, derived from the
  tokenizer (:func:`absent_table`: a saved one that lacks a table);
- :mod:`~lakeshift.models.cells.positions`: the rule itself (:func:`cell_positions`, :class:`CellWalker`),
  testable without torch;
- :mod:`~lakeshift.models.cells.local`: under ``attention: local``, which earlier tokens each token attends
  to (:class:`LocalKeys`; :class:`TokenReader` reads both rules), testable without torch;
- :mod:`~lakeshift.models.cells.drafts`: the map before at the same cells, the drafts a decoder verifies
  (:class:`MapDrafts`), testable without torch;
- :mod:`~lakeshift.models.cells.modeling`: the transformers classes (:func:`register`), :func:`set_spec`,
  the weights each spec makes (:data:`PARTS`; :func:`weight_mismatch` against a checkpoint's);
- :mod:`~lakeshift.models.cells.vision`: the same coupling for a vision model's visual tokens
  (:func:`register_vision`): each merged token gets its row and column in the image's token grid.

The named sizes are presets of the spec (:data:`lakeshift.models.registry.CELL_SIZES`); a training run
changes a model's spec with ``--cells FIELD=VALUE,...`` or a config's ``cells:`` mapping.
"""

from lakeshift.models.cells.drafts import MapDrafts
from lakeshift.models.cells.local import LocalKeys, TokenReader
from lakeshift.models.cells.modeling import (
    MODEL_TYPE,
    ORDER_SCALE,
    PARTS,
    check_sizes,
    part_of,
    part_weights,
    parts,
    register,
    set_spec,
    set_vocab,
    shifted,
    spec_of,
    weight_mismatch,
)
from lakeshift.models.cells.positions import MAX_CELL, MAX_FRAME, CellWalker, PositionRule, cell_positions
from lakeshift.models.cells.spec import (
    FIELDS,
    GRIDS,
    CellSpec,
    check_overrides,
    format_overrides,
    parse_overrides,
)
from lakeshift.models.cells.vision import VISION_MODEL_TYPE, register_vision
from lakeshift.models.cells.vocab import CellVocab, absent_table

__all__ = [
    "FIELDS",
    "GRIDS",
    "MAX_CELL",
    "MAX_FRAME",
    "MODEL_TYPE",
    "ORDER_SCALE",
    "PARTS",
    "VISION_MODEL_TYPE",
    "CellSpec",
    "CellVocab",
    "CellWalker",
    "LocalKeys",
    "MapDrafts",
    "PositionRule",
    "TokenReader",
    "absent_table",
    "cell_positions",
    "check_overrides",
    "check_sizes",
    "format_overrides",
    "parse_overrides",
    "part_of",
    "part_weights",
    "parts",
    "register",
    "register_vision",
    "set_spec",
    "set_vocab",
    "shifted",
    "spec_of",
    "weight_mismatch",
]
