"""Widgets that stay visible where no widget frontend runs (papermill, nbconvert, GitHub).

A widget's display is a mimebundle; JupyterLab renders its richest entry (the live widget
view), a headless renderer the richest one it understands. ``StaticFallback`` adds a PNG and
plain text to the bundle, so the saved notebook shows the charts and the last log lines
instead of an empty widget placeholder. ``show`` displays under a display id so the final
state can replace the first one (``update_display``) when the job ends.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

__all__ = ["StaticFallback"]


class StaticFallback:
    """Mixin for ``ipywidgets`` containers: subclasses implement ``static_png`` / ``static_text``."""

    _display_id: str | None = None

    def static_png(self) -> bytes | None:  # pragma: no cover - overridden
        return None

    def static_text(self) -> str:  # pragma: no cover - overridden
        return ""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})  # type: ignore[misc]
        png = self.static_png()
        if png:
            bundle["image/png"] = base64.b64encode(png).decode("ascii")
        bundle["text/plain"] = self.static_text()
        return bundle

    def show(self) -> StaticFallback:
        """Display in the current cell; later ``refresh_display`` calls replace this output."""
        from IPython.display import display

        self._display_id = uuid.uuid4().hex
        display(self, display_id=self._display_id)
        return self

    def refresh_display(self) -> None:
        """Re-publish the bundle (new PNG and text) under the same display id."""
        if self._display_id is None:
            return
        from IPython.display import update_display

        update_display(self, display_id=self._display_id)
