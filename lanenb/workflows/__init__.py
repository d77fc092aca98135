"""Workflows that use two rooms at once, above both: retrain from a snapshot (snapshot stores
+ the job API). ``lanenb.retrain`` is the short form."""

from lanenb.workflows.retrain import retrain

__all__ = ["retrain"]
