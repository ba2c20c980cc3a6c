"""The one exception type users see: a clear message, no traceback (the CLI prints it and exits 2)."""


class LakeshiftError(Exception):
    """Bad input or an impossible request, described for the user (name the file, line and field)."""
