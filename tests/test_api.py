"""The Python API as a notebook uses it: ``score_output`` on whatever map a user holds, ``render`` in every
input format, one error base, an import that needs no POSIX-only module, and the manual's example."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme import python_examples

from lakeshift import (
    INPUT_FORMATS,
    FormatError,
    FrozenLakeMap,
    LakeshiftError,
    MapError,
    parse,
    render,
    score_output,
    scoring_map,
)
from lakeshift.data import record_from_map
from lakeshift.formats.image import render_rgb

REPO = Path(__file__).resolve().parents[1]
FIGURE_3 = ["FGF", "FHF", "FSH"]


@pytest.mark.parametrize("answer", [r"\boxed{LEFT, UP, UP, RIGHT}", r"\boxed{U}", r"\boxed{R}", "no box"])
def test_score_output_takes_a_map_a_record_or_a_scoring_map_alike(answer):
    lake = FrozenLakeMap.from_rows(FIGURE_3)
    record = record_from_map(lake, "figure-3", "mine")
    verdicts = {score_output(held, answer) for held in (lake, record, scoring_map(record))}
    assert len(verdicts) == 1


def test_score_output_of_a_bare_record_and_of_a_broken_one():
    assert score_output({"rows": FIGURE_3}, r"\boxed{LEFT, UP, UP, RIGHT}").optimal
    with pytest.raises(LakeshiftError, match="invalid map"):
        score_output({"rows": ["SG", "H"]}, r"\boxed{R}")


def test_render_draws_every_input_format():
    lake = FrozenLakeMap.from_rows(FIGURE_3)
    drawn = {fmt: render(lake, fmt) for fmt in INPUT_FORMATS}
    frame = drawn.pop("image")
    assert frame.mode == "RGB" and frame.size == (192, 192)
    assert frame.tobytes() == render_rgb(lake).tobytes()
    moved = render(lake, "image", player=(2, 0))
    assert moved.tobytes() == render_rgb(lake, player=(2, 0)).tobytes() != frame.tobytes()
    assert all(isinstance(text, str) and parse(text, fmt).player == (2, 1) for fmt, text in drawn.items())
    with pytest.raises(ValueError, match="table format only"):
        render(lake, "image", style="aligned")


def test_map_and_format_errors_are_lakeshift_errors_and_value_errors():
    with pytest.raises(LakeshiftError) as err:
        FrozenLakeMap.from_rows(["SG", "H"])
    assert isinstance(err.value, MapError) and isinstance(err.value, ValueError)
    with pytest.raises(LakeshiftError) as err:
        parse("Grid:\nP  G\nX", "grid")
    assert isinstance(err.value, FormatError) and isinstance(err.value, ValueError)
    from lakeshift.env import MapError as env_map_error
    from lakeshift.formats import FormatError as formats_format_error

    assert (env_map_error, formats_format_error) == (MapError, FormatError)


def test_import_lakeshift_works_where_fcntl_does_not_exist():
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import lakeshift, lakeshift.io, lakeshift.cli, lakeshift.data, lakeshift.scoring, lakeshift.report\n"
        "lake = lakeshift.FrozenLakeMap.from_rows(['FGF', 'FHF', 'FSH'])\n"
        "print(lakeshift.score_output(lake, r'\\boxed{LEFT, UP, UP, RIGHT}').verdict)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "success\n"


def test_the_manuals_notebook_example_runs_and_prints_what_the_page_shows():
    page = REPO / "docs" / "index.md"
    examples = python_examples(page)
    assert len(examples) == 1
    code, shown = examples[0]
    assert len(code.strip().splitlines()) <= 30
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(code, str(page), "exec"), {"__name__": "manual_example"})
    assert shown is not None
    assert stdout.getvalue() == shown
