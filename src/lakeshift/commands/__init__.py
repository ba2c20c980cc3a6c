"""The CLI's subcommands: each module adds its own with ``register(subparsers)`` (:mod:`lakeshift.cli`).

Their numbers are checked while the command line is parsed, by the rules of
:data:`lakeshift.config.NUMBER_RULES` (``type=number_type(rule)``), the same rules that check a config.
"""
