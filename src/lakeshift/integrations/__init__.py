"""Entry points from evaluation harnesses: each submodule adapts lakeshift's maps, prompts and scorer to one
harness (reasoning-gym, lmms-eval, inspect_ai) and is installed with its extra (``lakeshift[reasoning-gym]``,
``lakeshift[lmms-eval]``, ``lakeshift[inspect]``). This package imports none of them: a submodule imports its
harness when it is imported itself. Every verdict comes from :mod:`lakeshift.scoring`.
"""
