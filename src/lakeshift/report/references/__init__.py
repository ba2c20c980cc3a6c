"""Published results added to reports as labelled reference rows (``lakeshift report --reference NAME``).

Each reference is one JSON file in this package (``<name>.json``) holding the values exactly as printed, with
the citation. :func:`load` turns it into lookups keyed like the report's own cells, with the run key
``(label, input_format, cot_format)``; the label (``paper: Qwen2.5-VL-7B``) can never be confused with a
local run (:meth:`Reference.relabel` moves it aside when a local run has the same name).

No ML library is imported here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from lakeshift.errors import LakeshiftError

#: Names accepted by ``--reference`` (one ``<name>.json`` each).
KNOWN: tuple[str, ...] = ("paper",)

RunKey = tuple[str, str, str]


@dataclass(frozen=True)
class Reference:
    """One publication's numbers.

    Attributes:
        name: ``--reference`` name (``paper``).
        label: Model label of its rows (``paper: Qwen2.5-VL-7B``).
        citation: Where the numbers come from.
        acc_by_size: ``(input, cot, split, size) -> accuracy`` (Table 1).
        avg_by_split: ``(input, cot, split) -> Avg`` as printed (Table 1).
        embed_split: The split of the d_inf table (``embed10-test``).
        acc_by_dinf: ``(input, cot, d_inf) -> accuracy`` on ``embed_split`` (Table 3).
        avg_by_dinf_group: ``(input, cot, "ID" | "OOD") -> Avg`` as printed (Table 3).
        length_by_split: ``(input, cot, split) -> mean length of correct outputs`` (Table 5).
        length_unit: Unit of the lengths.
        sources: Which of the publication's tables each part comes from (``{"table1": "Table 1"}``).
    """

    name: str
    label: str
    citation: str
    acc_by_size: dict[tuple[str, str, str, int], float] = field(default_factory=dict)
    avg_by_split: dict[tuple[str, str, str], float] = field(default_factory=dict)
    embed_split: str = "embed10-test"
    acc_by_dinf: dict[tuple[str, str, int], float] = field(default_factory=dict)
    avg_by_dinf_group: dict[tuple[str, str, str], float] = field(default_factory=dict)
    length_by_split: dict[tuple[str, str, str], float] = field(default_factory=dict)
    length_unit: str = "tokens"
    sources: dict[str, str] = field(default_factory=dict)

    def key(self, inp: str, cot: str) -> RunKey:
        """The run key of the row for ``(inp, cot)``."""
        return (self.label, inp, cot)

    def is_key(self, key: RunKey) -> bool:
        return key[0] == self.label

    def formats(self, part: str) -> list[tuple[str, str]]:
        """``(input, cot)`` pairs of one part (``table1``, ``table3``, ``table5``), in the paper's order."""
        source = {
            "table1": self.avg_by_split,
            "table3": self.avg_by_dinf_group,
            "table5": self.length_by_split,
        }
        return list(dict.fromkeys((k[0], k[1]) for k in source[part]))

    def relabel(self, taken: set[str]) -> Reference:
        """The same reference with a label no local run uses (``... (published)``, then numbered)."""
        label, i = self.label, 2
        while label in taken:
            label = f"{self.label} (published)" if i == 2 else f"{self.label} (published {i})"
            i += 1
        return self if label == self.label else replace(self, label=label)


def load(name: str) -> Reference:
    """The reference called ``name``.

    Raises:
        LakeshiftError: unknown name (the message lists the known ones) or a malformed data file.
    """
    if name not in KNOWN:
        raise LakeshiftError(f"--reference {name!r}: unknown reference; known: {', '.join(KNOWN)}")
    where = f"lakeshift/report/references/{name}.json"
    try:
        raw = json.loads(resources.files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8"))
        return _parse(name, raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise LakeshiftError(f"{where}: malformed reference data ({exc})") from exc


def _parse(name: str, raw: dict[str, Any]) -> Reference:
    ref = Reference(name=name, label=str(raw["label"]), citation=str(raw["citation"]))
    t1 = raw["table1"]
    for row in t1["rows"]:
        for split, cols in t1["columns"].items():
            values = row[split]
            if len(values) != len(cols):
                raise ValueError(f"table1 {row['input']}/{row['cot']} {split}: {len(values)} values")
            for col, v in zip(cols, values, strict=True):
                if col == "Avg":
                    ref.avg_by_split[(row["input"], row["cot"], split)] = float(v)
                else:
                    ref.acc_by_size[(row["input"], row["cot"], split, int(col))] = float(v)
    t3 = raw["table3"]
    embed = str(t3["split"])
    for row in t3["rows"]:
        for group, cols in t3["columns"].items():
            values = row[group]
            if len(values) != len(cols):
                raise ValueError(f"table3 {row['input']}/{row['cot']} {group}: {len(values)} values")
            for col, v in zip(cols, values, strict=True):
                if col == "Avg":
                    ref.avg_by_dinf_group[(row["input"], row["cot"], group)] = float(v)
                else:
                    ref.acc_by_dinf[(row["input"], row["cot"], int(col))] = float(v)
    t5 = raw["table5"]
    for row in t5["rows"]:
        if len(row["lengths"]) != len(t5["columns"]):
            raise ValueError(f"table5 {row['input']}/{row['cot']}: {len(row['lengths'])} values")
        for split, v in zip(t5["columns"], row["lengths"], strict=True):
            ref.length_by_split[(row["input"], row["cot"], split)] = float(v)
    sources = {part: str(raw[part].get("source", part)) for part in ("table1", "table3", "table5")}
    return replace(ref, embed_split=embed, length_unit=str(t5.get("unit", "tokens")), sources=sources)
