"""The README's front page is real: its Python example runs as written and prints what the page shows, its
sample map and trace are what the package writes, and its set-up commands are the manual's."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from lakeshift import FrozenLakeMap, completion, render

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: A fenced block: its language and its text.
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def fenced_blocks(path: Path) -> list[tuple[str, str]]:
    """Every fenced code block of a Markdown page, in order, as ``(language, text)``."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def python_examples(path: Path) -> list[tuple[str, str | None]]:
    """Each ``python`` block with the ``text`` block that follows it (what it prints), or ``None``."""
    blocks = fenced_blocks(path)
    examples = []
    for i, (language, text) in enumerate(blocks):
        if language == "python":
            after = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
            examples.append((text, after[1] if after[0] == "text" else None))
    return examples


def test_the_python_example_runs_and_prints_what_the_readme_shows():
    examples = python_examples(README)
    assert len(examples) == 1
    code, shown = examples[0]
    assert len(code.strip().splitlines()) <= 10
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    assert shown is not None
    assert stdout.getvalue() == shown


def test_the_sample_map_and_trace_are_what_the_package_writes():
    figure_3 = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
    samples = [block for language, block in fenced_blocks(README) if language == "text"]
    assert render(figure_3, "grid") + "\n" in samples
    assert completion(figure_3, figure_3.optimal_path(), "grid+desc") + "\n" in samples


def test_the_setup_commands_are_the_manuals():
    def bash_blocks(path: Path) -> list[str]:
        return [block for language, block in fenced_blocks(path) if language == "bash"]

    setup = bash_blocks(README)[0]
    assert 'pip install -c constraints.txt -e ".[train]" && lakeshift demo' in setup
    assert 'pip install -e ".[train,dev,reasoning-gym,inspect]" && python -m pytest' in setup
    assert setup in bash_blocks(REPO / "docs" / "index.md")


def test_the_constraints_pin_versions_the_package_accepts():
    """``constraints.txt`` (the demo's install) pins one version of each library it names, inside the range
    pyproject.toml gives that library, and pins every library of the ``train`` extra."""
    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")  # (Python 3.11 and later)

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["train"]
    ranges = {Requirement(r).name: Requirement(r).specifier for r in extra}
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line.split("#")[0].strip():
            req = Requirement(line.split("  #")[0])
            (spec,) = req.specifier
            assert spec.operator == "==", line
            pins[req.name] = spec.version
    assert set(ranges) <= set(pins), set(ranges) - set(pins)
    for name, spec in ranges.items():
        assert spec.contains(pins[name]), (name, pins[name], str(spec))
