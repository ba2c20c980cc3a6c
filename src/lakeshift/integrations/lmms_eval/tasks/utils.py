"""The FrozenLake tasks' functions: lakeshift.integrations.lmms_eval (lakeshift's scorer)."""

from lakeshift.integrations.lmms_eval import task_functions

globals().update(task_functions())
