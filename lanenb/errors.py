"""Re-export of the error root (see ``lanenb_trainer.errors``): ``except lanenb.errors.UserError``
catches every mistake a person can make through a magic, widget, CLI or the Job API."""

from lanenb_trainer.errors import LanenbError, UserError

__all__ = ["LanenbError", "UserError"]
