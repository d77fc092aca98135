"""Run analysis: the one reducer every view folds a job's updates into (``runstate.RunState``,
with ``series`` and ``event_text``), run comparison (``compare``) and scaling reports
(``scaling``). Reads the job API; draws nothing itself (charts are ``lanenb.charts``)."""

from lanenb.analysis.runstate import RunState, tail_state

__all__ = ["RunState", "tail_state"]
