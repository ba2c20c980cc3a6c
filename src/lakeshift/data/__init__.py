"""Data: maps, splits and the files a study trains and tests on.

- :mod:`~lakeshift.data.generate` draws maps and whole splits from a
  :class:`~lakeshift.data.generate.SplitSpec` (each map its own seeded RNG);
- :mod:`~lakeshift.data.augment` adds optimal paths and the 8 symmetries to training splits;
- :mod:`~lakeshift.data.records` turns a map into SFT records (prompt and completion) in every input x CoT
  format;
- :mod:`~lakeshift.data.suites` builds a suite on disk (``DATA/<split>/maps.jsonl``, ``sft/``, ``images/``),
  reads it back and selects maps from it;
- :mod:`~lakeshift.data.stats` gives the statistics of a split (the paper's Tables 2 and 7);
- :mod:`~lakeshift.data.bounds` estimates the time and memory of a job before it starts.
"""
