"""docs/development.md's code layout names every module of the package: a module is named by its file's
stem; only the subpackages the layout describes as one piece (:data:`WHOLE`) may leave their modules
unnamed."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "lakeshift"
#: Subpackages the layout names as one piece: the cells architecture (``cells``) and lmms-eval's task files.
WHOLE = ("models/cells", "integrations/lmms_eval")
#: Files that are no module of their own: package markers, the entry point, the generated version.
NOT_MODULES = ("__init__", "__main__", "_version")


def layout_words() -> set[str]:
    """The names in the fenced block under "## Code layout"."""
    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    section = text.split("\n## Code layout\n", 1)[1]
    block = section.split("```", 2)[1]
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", block))


def test_the_code_layout_names_every_module() -> None:
    words = layout_words()
    unnamed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        part = path.relative_to(PACKAGE).as_posix()
        if path.stem in NOT_MODULES or any(part.startswith(f"{whole}/") for whole in WHOLE):
            continue
        if path.stem not in words:
            unnamed.append(part)
    assert unnamed == []
    # Every package, the subpackages named as one piece included.
    packages = {p.parent.name for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}
    assert packages - words == set()
