"""``python -m lakeshift``: the ``lakeshift`` command (how a study starts its concurrent trainings)."""

from lakeshift.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
