"""lanenb: notebook-first distributed lane-detection training."""

__version__ = "0.1.0"
