"""The layers hold: the core (every module of lakeshift outside the layers above it: env, formats, traces,
scoring, data, config, io, options, errors) imports neither those layers (models, studies, commands, cli,
report, integrations) nor an ML library, not even inside a function, and its imports form no circle;
``import lakeshift`` loads none of them. Read from the source with ``ast``, so an import that only runs on
some path is caught too."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import lakeshift

ABOVE_THE_CORE = (
    "lakeshift.models",
    "lakeshift.studies",
    "lakeshift.commands",
    "lakeshift.cli",
    "lakeshift.report",
    "lakeshift.integrations",
    "lakeshift.__main__",
)
ML_LIBRARIES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "vllm")
PACKAGE = Path(lakeshift.__file__).parent


def _is_in(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__.py``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def core() -> list[str]:
    return [name for name in modules() if not _is_in(name, ABOVE_THE_CORE)]


def imports(module: str) -> Iterator[tuple[int, str]]:
    """``(line, name)`` of everything ``module`` imports, at any depth of its code: ``from a import b``
    gives ``a`` and ``a.b`` (``b`` may be a module); relative imports are made absolute."""
    path = modules()[module]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = package[: len(package) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            yield node.lineno, source
            for alias in node.names:
                yield node.lineno, f"{source}.{alias.name}"


def test_the_core_imports_no_layer_above_it_and_no_ml_library() -> None:
    assert {"lakeshift.env", "lakeshift.data.suites", "lakeshift.io", "lakeshift.scoring"} <= set(core())
    wrong: dict[str, str] = {}  # one line per import statement (its source, not each name it takes)
    for module in core():
        for line, name in imports(module):
            if _is_in(name, ABOVE_THE_CORE) or name.split(".")[0] in ML_LIBRARIES:
                wrong.setdefault(f"{modules()[module]}:{line}", name)
    assert not wrong, "the core imports a layer above it or an ML library:\n" + "\n".join(
        f"{where}: {name}" for where, name in wrong.items()
    )


def test_the_core_imports_form_no_circle() -> None:
    # An import of a parent package is no edge: Python runs it before the module anyway.
    graph = {
        module: {
            name
            for _, name in imports(module)
            if name in modules() and not _is_in(name, ABOVE_THE_CORE) and not module.startswith(name + ".")
            if name != module
        }
        for module in core()
    }
    circles = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            circles.append(" -> ".join([*path[path.index(module) :], module]))
            return
        if module in done:
            return
        for name in sorted(graph[module]):
            visit(name, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not circles, "import circles in the core:\n" + "\n".join(circles)


def test_importing_lakeshift_loads_no_layer_above_the_core_and_no_ml_library() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, lakeshift; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "lakeshift.data.suites" in loaded
    wrong = [m for m in loaded if _is_in(m, ABOVE_THE_CORE) or m.split(".")[0] in ML_LIBRARIES]
    assert not wrong, f"import lakeshift loads {wrong}"
