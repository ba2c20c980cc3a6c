"""``--id-source``: the paper's own ``id-train`` and ``id-test`` maps, read from the Mirage folder
``vsp_spatial_planning`` (``train_direct.jsonl`` and ``test_direct.jsonl``) instead of generated, in file
order.

Mirage's ``map_id`` is unique only per size (train ids repeat across sizes, test ids are ``0..99`` per size),
so our ids are ``"<n>x<n>-<map_id>"`` (``"5x5-1454"``, ``"3x3-31"``) and the original is kept in
``official_id``; should a ``(size, map_id)`` pair repeat, later copies get ``"-2"``, ``"-3"``... appended
(none do in the published files). The official training answer is kept as ``optimal_path`` when it is a
successful plan of BFS-optimal length (all 1000 are); otherwise the solver's path is used and the split report
counts it. Imported maps are never redrawn: the report counts test maps identical to a training map (the
published id-test has 8).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lakeshift.data.maps import record_from_map
from lakeshift.env import MOVES, FrozenLakeMap, MapError
from lakeshift.errors import LakeshiftError
from lakeshift.io import file_sha256, read_jsonl

#: The splits ``--id-source`` imports; a suite that uses it must have both.
ID_SPLITS: tuple[str, ...] = ("id-train", "id-test")
_BOXED = re.compile(r"\\boxed\{([^}]*)\}")


def import_official(source: str | Path, which: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Reads Mirage's ``train_direct.jsonl`` (``which="id-train"``) or ``test_direct.jsonl`` (``"id-test"``).

    Returns:
        The map records (file order) and a report (file, sha256, answers kept/replaced, renamed ids).

    Raises:
        LakeshiftError: a missing folder or file, or a malformed line (file, line and field named).
    """
    folder = Path(source)
    if not folder.is_dir():
        raise LakeshiftError(f"--id-source {folder}: no such folder")
    path = folder / ("train_direct.jsonl" if which == "id-train" else "test_direct.jsonl")
    required = ("map_id", "map_desc", *(("text_output",) if which == "id-train" else ()))
    records: list[dict[str, Any]] = []
    taken: Counter[str] = Counter()
    kept = replaced = renamed = 0
    for lineno, obj in read_jsonl(path, required=required):
        where = f"{path}, line {lineno}"
        try:
            m = FrozenLakeMap.from_map_desc(obj["map_desc"])
        except (MapError, TypeError) as err:
            raise LakeshiftError(f"{where}: field 'map_desc': {err}") from None
        if not m.solvable:
            raise LakeshiftError(f"{where}: field 'map_desc': the goal is unreachable")
        official = str(obj["map_id"])
        base = f"{m.size}x{m.size}-{official}"
        taken[base] += 1
        rid = base if taken[base] == 1 else f"{base}-{taken[base]}"
        renamed += taken[base] > 1
        path_moves = None
        if which == "id-train":
            found = _BOXED.findall(str(obj["text_output"]))
            if not found:
                raise LakeshiftError(f"{where}: field 'text_output' has no \\boxed{{...}} answer")
            moves = [w.strip().upper() for w in found[-1].split(",") if w.strip()]
            if all(mv in MOVES for mv in moves):
                roll = m.simulate(moves)
                if roll.success and len(moves) == m.optimal_length:
                    path_moves = moves
            kept += path_moves is not None
            replaced += path_moves is None
        rec = record_from_map(m, rid, which, path_moves)
        rec["official_id"] = official
        records.append(rec)
    report = {
        "file": str(path),
        "sha256": file_sha256(path),
        "maps": len(records),
        "renamed_duplicate_ids": renamed,
    }
    if which == "id-train":
        report.update(official_answers_kept=kept, official_answers_replaced=replaced)
    return records, report


def import_id_splits(id_source: str | Path, names: Sequence[str]) -> dict[str, tuple[list[dict], dict]]:
    """``--id-source``: the official id-train / id-test maps of the suite whose splits are ``names``, with
    each file's import report.

    Raises:
        LakeshiftError: the suite lacks one of :data:`ID_SPLITS`, or a file is missing or malformed.
    """
    missing = [n for n in ID_SPLITS if n not in names]
    if missing:
        raise LakeshiftError(
            f"--id-source needs splits {', '.join(ID_SPLITS)} in the suite; missing {missing}"
        )
    return {name: import_official(id_source, name) for name in ID_SPLITS}
