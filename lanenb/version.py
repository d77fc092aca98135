"""``__version__``: the installed distribution's version (pyproject.toml is the one source)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lanenb")
except PackageNotFoundError:  # a checkout on sys.path that pip never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
