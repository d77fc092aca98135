"""The one headline figure of a run and which model it belongs to, for every face.

The rule (best.pt's test figure, else the last model's, else the latest validation; the other
test model beside it, each labelled "best.pt, epoch 6" / "last, epoch 9") is defined once in
``lanenb_trainer.evaluation.headline``: the trainer writes it into ``metrics.json`` and
``job.metrics`` (a layer below this one) fills it in for older files. Faces import it from here.
"""

from __future__ import annotations

from lanenb_trainer.evaluation.headline import (
    BEST,
    LAST,
    VAL,
    Figure,
    Headline,
    choose,
    figure,
    from_metrics,
)

__all__ = ["Figure", "Headline", "figure", "choose", "from_metrics", "BEST", "LAST", "VAL"]
