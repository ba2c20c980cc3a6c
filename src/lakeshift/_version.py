"""The package version (its own module so that submodules can import it without a cycle)."""

__version__ = "0.1.0"
