"""The error root (see ``lanenb_trainer.errors``): ``except lanenb.errors.UserError`` catches every
mistake a person can make through a magic, widget, CLI or the Job API. ``SpecError`` is the
one "this field has this bad value" error of every layer (spec fields, cursors, form values)."""

from __future__ import annotations

from typing import Any

from lanenb_trainer.errors import LanenbError, UserError

__all__ = ["LanenbError", "UserError", "SpecError"]


class SpecError(UserError, ValueError):
    """A field has a bad value; the message names the field and the value (``field``, ``value``
    keep them for forms)."""

    def __init__(self, field_name: str, value: Any, problem: str) -> None:
        self.field = field_name
        self.value = value
        super().__init__(f"{field_name}={value!r}: {problem}")
