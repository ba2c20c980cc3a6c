"""lakeshift: FrozenLake benchmark and toolkit for out-of-distribution generalization of CoT reasoning.

The public API is re-exported here; everything else is an implementation detail.
"""

from lakeshift.env import MOVES, RULES_VERSION, FrozenLakeMap, MapError, Rollout, Solution
from lakeshift.errors import LakeshiftError

__version__ = "0.1.0"

__all__ = [
    "MOVES",
    "RULES_VERSION",
    "FrozenLakeMap",
    "LakeshiftError",
    "MapError",
    "Rollout",
    "Solution",
    "__version__",
]
