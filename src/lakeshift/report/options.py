"""The options of ``lakeshift report``, declared once (:mod:`lakeshift.options`): its command line (beside
the scoring options it shares with ``lakeshift score``), the keys of a study's ``report:`` section
(``study=True``) and the command line of a study's report stage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift.options import option
from lakeshift.report.references import KNOWN as KNOWN_REFERENCES


def _reference_problem(value: Any, path: str) -> str | None:
    """A config's ``reference`` that is not the name of a published reference."""
    if value in KNOWN_REFERENCES:
        return None
    return f"{path}: unknown reference {value!r} (known: {', '.join(KNOWN_REFERENCES)})"


@dataclass
class ReportOptions:
    """Everything ``lakeshift report`` accepts besides the scoring options."""

    runs_dir: Path = option(positional=True, parse=Path, metavar="RUNS_DIR")
    out: Path = option(required=True, parse=Path, help="output folder")
    data: Path | None = option(parse=Path, help="suite folder with <split>/maps.jsonl")
    train_maps: Path | None = option(
        parse=Path, help="training maps.jsonl for the Figure 4 histogram", study=True
    )
    examples: int = option(
        600, rule="nonnegative_int", help="examples embedded in report.html (default 600)", study=True
    )
    baselines: bool = option(
        True,
        kind="toggle",
        help="add the oracle/greedy/random rows (default; --no-baselines: none)",
        study=True,
    )
    images: bool = option(True, kind="toggle", help="embed map images in report.html (default)")
    reference: str | None = option(
        metavar="NAME",
        help="add published results as labelled rows of Tables 1, 3, 5 and dashed curves (known: paper, "
        "the paper's Qwen2.5-VL-7B numbers); with it RUNS_DIR may hold no predictions",
        check=_reference_problem,
        study=True,
    )
