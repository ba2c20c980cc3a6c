"""The cells spec: what a cells model's position rule gives each token, one typed field per behaviour.

A :class:`CellSpec` is frozen and checked when made, so every combination of fields it holds is one the
rule (:mod:`lakeshift.models.cells.positions`) implements. It is saved in a checkpoint's ``config.json`` as
the mapping ``cells``; a training run changes it with ``lakeshift train --cells grids=next,walk=trace`` or a
study's ``train: {cells: {grids: next, walk: trace}}`` (:func:`parse_overrides`, :func:`check_overrides`).
Checkpoints of earlier generations stored the same behaviours as flat ``cell_*`` config keys;
:meth:`CellSpec.from_legacy` reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lakeshift.errors import LakeshiftError

Grids = Literal["first", "every", "next", "coupled"]
Walk = Literal["none", "answer", "trace"]
MapFormat = Literal["grid", "table", "desc"]
Offsets = Literal["none", "random"]
Coordinates = Literal["tokens", "composed"]
SequencePosition = Literal["rope", "none"]
Attention = Literal["full", "local"]

#: The values of :attr:`CellSpec.grids`, :attr:`CellSpec.walk`, ... in their documented order.
GRIDS: tuple[str, ...] = get_args(Grids)
WALKS: tuple[str, ...] = get_args(Walk)
MAP_FORMATS: tuple[str, ...] = get_args(MapFormat)
OFFSETS: tuple[str, ...] = get_args(Offsets)
COORDINATES: tuple[str, ...] = get_args(Coordinates)
SEQUENCE_POSITIONS: tuple[str, ...] = get_args(SequencePosition)
ATTENTIONS: tuple[str, ...] = get_args(Attention)
#: Fields fixed when a model is made: its weights depend on them (a composed output layer).
FIXED_FIELDS = ("coordinates",)


@dataclass(frozen=True)
class CellSpec:
    """What the position rule of a cells model does.

    Attributes:
        grids: which grids after the sequence's first get cells: ``first`` (none: only the first grid, the
            prompt's map with grid input, gets its rows and columns), ``every`` (each map a grid CoT redraws
            gets its own cells, so a copied cell shares the vector of the cell it copies) or ``next`` (each
            token of a redrawn grid gets the row and column of the cell it predicts, the one after it).
        walk: which move tokens get the cell their walk reaches from the map's start: ``none``, ``answer``
            (the moves of ``\\boxed{...}``) or ``trace`` (those and each move a trace states after
            ``will move``, on from the trace's previous stated move).
        maps: the map formats whose cells get their row and column, besides every coordinate token
            ``(r,c)``; ``grid`` always, ``table`` (``| Row R | @ | _ |``: the prompt's table is the map, the
            tables a table CoT redraws are redrawn maps, read as ``grids`` says) and ``desc`` (the numbers of
            ``row R, column C``; the player's cell starts the walk, ``This is a NxM map`` bounds it).
        player: a third embedding (0 none, 1 player) for the token of a redrawn map that predicts the cell
            the trace's stated moves have reached; needs ``grids: next`` or ``coupled`` and ``walk: trace``.
        order: a cell's row and column also enter as numbers, ``(r, c) / ORDER_SCALE`` through one learned
            linear map, so that rows and columns keep their order beyond the trained sizes.
        offsets: ``random``: in training, every row and column of a sequence with a grid moves by one random
            offset (:func:`lakeshift.models.cells.modeling.shifted`), and so do its map numbers, so that
            small maps train every row, column and map-number embedding; at test time nothing moves.
        coordinates: ``composed``: a coordinate token's vector is its spelling's shared vector plus its row
            and column embeddings, on the input side and in the tied output layer; ``tokens``: each
            coordinate token has its own vector. Fixed when the model is made.
        sequence: the 1-D position of each token: ``rope`` (the rotary position of Qwen2, its index in
            the sequence) or ``none`` (position 0 for every token: the rotary embedding is the identity, so
            attention tells tokens apart by content, cells and map numbers only; the causal mask still
            orders them).
        attention: which earlier tokens a token attends to: ``full`` (every one) or ``local`` (the rule of
            :mod:`lakeshift.models.cells.local`: a token of a redrawn map only the previous map's tokens
            within one row and one column of the cell it predicts, and itself; the newline ending a
            redrawn map only the start's cell of that map; ``\\boxed{`` and the answer's moves only the last
            map's cell their walk reaches; every other token every earlier one). Each local key also
            gets a learned vector of its slot (which neighbour it is). Needs ``grids: coupled`` (the maps
            and the cells their tokens predict) and a ``walk`` (the answer's cells).
    """

    grids: Grids = "first"
    walk: Walk = "answer"
    maps: tuple[MapFormat, ...] = ("grid",)
    player: bool = False
    order: bool = False
    offsets: Offsets = "none"
    coordinates: Coordinates = "tokens"
    sequence: SequencePosition = "rope"
    attention: Attention = "full"

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem:
            raise LakeshiftError(f"cells: {problem}")
        # one spelling per set of maps, in MAP_FORMATS order, so equal specs compare and save equal
        object.__setattr__(self, "maps", tuple(f for f in MAP_FORMATS if f in self.maps))

    def to_json(self) -> dict[str, Any]:
        """The spec as a JSON object (``config.json``'s ``cells``)."""
        return {**dataclasses.asdict(self), "maps": list(self.maps)}

    @classmethod
    def from_json(cls, value: Any, where: str = "cells") -> CellSpec:
        """A spec from :meth:`to_json`'s object.

        Raises:
            LakeshiftError: naming ``where`` and the field, for an unknown field or a bad value.
        """
        if not isinstance(value, Mapping):
            raise LakeshiftError(f"{where}: expected a mapping of cells fields, got {value!r}")
        return CellSpec().replace(value, where)

    def replace(self, overrides: Mapping[str, Any], where: str = "cells") -> CellSpec:
        """This spec with the fields of ``overrides`` changed, checked as one.

        Raises:
            LakeshiftError: ``WHERE.FIELD: problem`` for an unknown field or a bad value, ``WHERE: problem``
                for a combination the rule does not implement.
        """
        for name, value in overrides.items():
            problem = field_problem(name, value)
            if problem:
                raise LakeshiftError(f"{where}.{name}: {problem}")
        values: dict[str, Any] = {k: tuple(v) if k == "maps" else v for k, v in overrides.items()}
        try:
            return dataclasses.replace(self, **values)
        except LakeshiftError as err:
            raise LakeshiftError(f"{where}{str(err).removeprefix('cells')}") from None

    def changed(self, overrides: Mapping[str, Any], where: str = "cells") -> CellSpec:
        """This spec, a loaded model's, with the fields of ``overrides`` changed (:meth:`replace`), refusing
        a change of the fields fixed when a model is made (:data:`FIXED_FIELDS`)."""
        spec = self.replace(overrides, where)
        for name in FIXED_FIELDS:
            if getattr(spec, name) != getattr(self, name):
                raise LakeshiftError(
                    f"{where}.{name}: {getattr(self, name)} is fixed when a model is made (its weights "
                    "depend on it; choose a named size that has it)"
                )
        return spec

    @classmethod
    def from_legacy(cls, fields: Mapping[str, Any], where: str = "config.json") -> CellSpec:
        """The spec of a checkpoint saved with flat ``cell_*`` config keys (earlier generations).

        ``cell_grids``, ``cell_order`` map one to one; a non-empty ``cell_moves`` walks the answer,
        ``cell_trace_moves`` also the trace; ``cell_tables`` reads tables; ``cell_player`` read desc maps
        and gave the player flag, which only ever fired with ``next`` and trace moves; ``cell_shift`` is
        ``offsets: random``, a non-empty ``cell_coord_base`` ``coordinates: composed``.

        Raises:
            LakeshiftError: ``WHERE: KEY: problem`` for a ``cell_grids`` that is not a grids value, a flag
                that is not true or false (the string ``"false"`` would read as on), or a ``cell_moves`` or
                ``cell_coord_base`` that is not a table.
        """
        problem = legacy_problem(fields)
        if problem:
            raise LakeshiftError(f"{where}: {problem}")
        grids: Any = fields.get("cell_grids") or "first"
        walk: Any = "trace" if fields.get("cell_trace_moves") else "answer"
        walk = walk if fields.get("cell_moves") else "none"
        player = bool(fields.get("cell_player"))
        maps = ["grid"] + ["table"] * bool(fields.get("cell_tables")) + ["desc"] * player
        return cls(
            grids=grids,
            walk=walk,
            maps=tuple(maps),  # type: ignore[arg-type]
            player=player and grids == "next" and walk == "trace",
            order=bool(fields.get("cell_order")),
            offsets="random" if fields.get("cell_shift") else "none",
            coordinates="composed" if fields.get("cell_coord_base") else "tokens",
        )


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(CellSpec))
_CHOICES: dict[str, tuple[str, ...]] = {
    "grids": GRIDS,
    "walk": WALKS,
    "offsets": OFFSETS,
    "coordinates": COORDINATES,
    "sequence": SEQUENCE_POSITIONS,
    "attention": ATTENTIONS,
}


def fields_help() -> str:
    """Every field and its values, as ``--cells`` help lists them (made from the spec, so it cannot drift).

    Example:
        >>> fields_help().split(", ")[:3]
        ['grids first|every|next|coupled', 'walk none|answer|trace', 'maps grid[+table][+desc]']
    """

    def values(name: str) -> str:
        if name == "maps":
            return "grid" + "".join(f"[+{f}]" for f in MAP_FORMATS[1:])
        return "|".join(_CHOICES.get(name, ("true", "false")))

    return ", ".join(f"{name} {values(name)}" for name in FIELDS)


def field_problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` for field ``name`` of :class:`CellSpec`, or None."""
    if name not in FIELDS:
        return f"unknown cells field (fields: {', '.join(FIELDS)})"
    if name in _CHOICES:
        choices = _CHOICES[name]
        return None if value in choices else f"expected one of {', '.join(choices)}, got {value!r}"
    if name == "maps":
        if isinstance(value, str) or not isinstance(value, Iterable):
            return f"expected a list of map formats ({', '.join(MAP_FORMATS)}), got {value!r}"
        values = list(value)
        unknown = [v for v in values if v not in MAP_FORMATS]
        if unknown:
            return f"expected map formats among {', '.join(MAP_FORMATS)}, got {unknown[0]!r}"
        return None if "grid" in values else "grid maps are always read: list grid"
    return None if isinstance(value, bool) else f"expected true or false, got {value!r}"


def _problem(spec: CellSpec) -> str | None:
    """The first field or combination of ``spec`` the rule does not implement, or None."""
    for name in FIELDS:
        problem = field_problem(name, getattr(spec, name))
        if problem:
            return f"{name}: {problem}"
    if spec.player and (spec.grids not in ("next", "coupled") or spec.walk != "trace"):
        return (
            "player: the flag marks the cell stated moves reached: it needs grids: next or coupled and "
            "walk: trace"
        )
    if spec.attention == "local" and (spec.grids != "coupled" or spec.walk == "none"):
        return (
            "attention: local reads each map's cells and the answer's walked cells: it needs grids: coupled "
            "and walk: answer or trace"
        )
    return None


#: The flags of a legacy config (``cell_*`` keys) and its tables whose emptiness says what the model does.
LEGACY_FLAGS = ("cell_trace_moves", "cell_player", "cell_order", "cell_tables", "cell_shift")
LEGACY_TABLES = ("cell_moves", "cell_coord_base")


def legacy_problem(fields: Mapping[str, Any]) -> str | None:
    """``KEY: problem`` for the first behaviour key of a legacy config that :meth:`CellSpec.from_legacy`
    could only guess from, or None (a key left out has its old default)."""
    grids = fields.get("cell_grids") or "first"  # null: the generation before grids existed
    if grids not in GRIDS:
        return f"cell_grids: expected one of {', '.join(GRIDS)}, got {grids!r}"
    for key in LEGACY_FLAGS:
        if key in fields and not isinstance(fields[key], bool):
            return f"{key}: expected true or false, got {fields[key]!r}"
    for key in LEGACY_TABLES:
        if key in fields and not isinstance(fields[key], Mapping):
            return f"{key}: expected a mapping of token ids, got {type(fields[key]).__name__}"
    return None


def parse_overrides(text: str) -> dict[str, Any]:
    """The command-line form of a cells change, ``FIELD=VALUE,...`` (``maps`` joined by ``+``, booleans
    ``true`` / ``false``), as a mapping for :meth:`CellSpec.replace`.

    Example:
        >>> parse_overrides("grids=next,walk=trace,maps=grid+desc,player=true")
        {'grids': 'next', 'walk': 'trace', 'maps': ['grid', 'desc'], 'player': True}

    A field is given once: a second value would silently replace the first.

    Raises:
        LakeshiftError: a part that is not ``FIELD=VALUE``, a field given twice, or a bad field or value.
    """
    overrides: dict[str, Any] = {}
    given: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        name, equals, raw = part.partition("=")
        if not equals or not name:
            raise LakeshiftError(f"expected FIELD=VALUE,... (fields: {', '.join(FIELDS)}), got {part!r}")
        if name in given:
            raise LakeshiftError(f"{name}: given twice ({given[name]}, {part}): give each field once")
        given[name] = part
        value: Any = raw
        if name == "maps":
            value = raw.split("+")
        elif raw in ("true", "false"):
            value = raw == "true"
        problem = field_problem(name, value)
        if problem:
            raise LakeshiftError(f"{name}: {problem}")
        overrides[name] = value
    return overrides


def format_overrides(overrides: Mapping[str, Any]) -> str:
    """The command-line form of ``overrides`` (:func:`parse_overrides` reads it back)."""

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return "+".join(value) if isinstance(value, (list, tuple)) else str(value)

    return ",".join(f"{name}={text(value)}" for name, value in overrides.items())


def check_overrides(overrides: Any, where: str) -> str | None:
    """What is wrong with a config's ``cells:`` value (a mapping of fields to change), or None; the message
    starts with the field's path under ``where``. Combinations are checked against the model's own spec
    when it is changed (:meth:`CellSpec.replace`)."""
    if not isinstance(overrides, Mapping) or not overrides:
        return f"{where}: expected a mapping of cells fields ({', '.join(FIELDS)}), got {overrides!r}"
    for name, value in overrides.items():
        problem = field_problem(name, value)
        if problem:
            return f"{where}.{name}: {problem}"
    return None
