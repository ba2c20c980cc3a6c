"""Data: maps, splits and the files a study trains and tests on.

- :mod:`~lakeshift.data.generate` draws maps and whole splits from a
  :class:`~lakeshift.data.generate.SplitSpec` (each map its own seeded RNG);
- :mod:`~lakeshift.data.augment` adds optimal paths and the 8 symmetries to training splits;
- :mod:`~lakeshift.data.records` turns a map into SFT records (prompt and completion) in every input x CoT
  format;
- :mod:`~lakeshift.data.maps` is the ``maps.jsonl`` record: its fields, the validator every reader uses, the
  selection of an evaluation subset;
- :mod:`~lakeshift.data.catalog` names the suites (``paper``, ``tiny``) and reads suite files;
- :mod:`~lakeshift.data.mirage` imports the paper's own ID maps (``--id-source``);
- :mod:`~lakeshift.data.suites` builds a suite on disk (``DATA/<split>/maps.jsonl``, ``sft/``, ``images/``),
  cached by config;
- :mod:`~lakeshift.data.stats` gives the statistics of a split (the paper's Tables 2 and 7);
- :mod:`~lakeshift.data.bounds` estimates the memory, disk and time of generating a suite before it starts.

The public names of these modules are importable from here (``from lakeshift.data import load_maps``).
"""

from lakeshift.data.catalog import SUITES, check_suite, load_suite, paper_suite, tiny_suite
from lakeshift.data.generate import Group, SplitSpec
from lakeshift.data.maps import (
    MAP_FIELDS,
    check_map_record,
    load_maps,
    map_from_record,
    record_from_map,
    select_maps,
)
from lakeshift.data.mirage import ID_SPLITS, import_official
from lakeshift.data.suites import SuiteResult, build_suite, sft_file_name

__all__ = [
    "ID_SPLITS",
    "MAP_FIELDS",
    "SUITES",
    "Group",
    "SplitSpec",
    "SuiteResult",
    "build_suite",
    "check_map_record",
    "check_suite",
    "import_official",
    "load_maps",
    "load_suite",
    "map_from_record",
    "paper_suite",
    "record_from_map",
    "select_maps",
    "sft_file_name",
    "tiny_suite",
]
