"""The ``Example:`` sections in the docstrings of the environment, the formats and the scoring run as written
and print what they show (doctest), and the entry points a user calls first keep one."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import pytest

import lakeshift
from lakeshift import formats, scoring

#: The core packages whose docstrings are checked: every module in them; and the cells model's pure rules.
MODULES = (
    "lakeshift.env",
    "lakeshift.traces.wave",
    "lakeshift.models.cells.spec",
    "lakeshift.models.cells.positions",
    "lakeshift.models.cells.local",
    "lakeshift.models.cells.drafts",
    *(
        name
        for package in (formats, scoring)
        for name in (
            package.__name__,
            *(info.name for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}.")),
        )
    ),
)
#: Making a map, drawing it, reading a drawn map back, reading an answer, judging it.
ENTRY_POINTS: tuple[Callable[..., Any], ...] = (
    lakeshift.FrozenLakeMap,
    lakeshift.FrozenLakeMap.simulate,
    lakeshift.render,
    lakeshift.parse,
    lakeshift.extract,
    lakeshift.score_output,
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_print_what_they_show(name: str):
    module = importlib.import_module(name)
    result = doctest.testmod(module, verbose=False, report=True)
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples in {name} failed (output above)"
    )


@pytest.mark.parametrize("entry_point", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_entry_points_have_an_example(entry_point: Callable[..., Any]):
    tests = doctest.DocTestFinder(recurse=False).find(entry_point, entry_point.__qualname__)
    assert sum(len(test.examples) for test in tests) >= 2
