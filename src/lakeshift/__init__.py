"""lakeshift: FrozenLake benchmark and toolkit for out-of-distribution generalization of CoT reasoning.

The public API is re-exported here (all of it pure Python, no ML import); everything else is an
implementation detail. Training and prediction live in :mod:`lakeshift.models` (imports torch).
"""

from lakeshift._version import __version__
from lakeshift.data import build_suite, load_maps, map_from_record, select_maps
from lakeshift.data.generate import Group, SplitSpec, generate_map
from lakeshift.data.records import sft_record
from lakeshift.env import MOVES, RULES_VERSION, FrozenLakeMap, MapError, Rollout, Solution
from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS, BoardState, FormatError, parse, render
from lakeshift.formats.prompts import user_prompt
from lakeshift.scoring import (
    ScoredRecord,
    ScoringMap,
    TraceCheck,
    Verdict,
    extract,
    score_output,
    scoring_map,
)
from lakeshift.traces import COT_FORMATS, completion, parse_steps

__all__ = [
    "COT_FORMATS",
    "INPUT_FORMATS",
    "MOVES",
    "RULES_VERSION",
    "BoardState",
    "FormatError",
    "FrozenLakeMap",
    "Group",
    "LakeshiftError",
    "MapError",
    "Rollout",
    "ScoredRecord",
    "ScoringMap",
    "Solution",
    "SplitSpec",
    "TraceCheck",
    "Verdict",
    "__version__",
    "build_suite",
    "completion",
    "extract",
    "generate_map",
    "load_maps",
    "map_from_record",
    "parse",
    "parse_steps",
    "render",
    "score_output",
    "scoring_map",
    "select_maps",
    "sft_record",
    "user_prompt",
]
