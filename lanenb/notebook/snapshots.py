"""``SnapshotBrowser()``: the versions of datasets and runs in a notebook.

A table of snapshots (job, accuracy, date, size), a list to pick from, **Diff** for two picked
versions (once two are picked its label names them, older first: "Diff ab12cd34 → ef56ab78"),
**Restore** for one: it asks for a new directory / PVC name and restores only after **Confirm**
(never into an existing target); **Retrain** does the same, then submits a job with the settings
of the run that made the snapshot (``lanenb.retrain``; ``self.job``).
Errors show as a red line, not a traceback.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from lanenb.charts import vocabulary
from lanenb.commands.snapshots import registry_links, snapshot_job, versions_table
from lanenb.errors import UserError
from lanenb.snapshots import SnapshotError, SnapshotStore, get_store
from lanenb.snapshots.base import fmt_size

_ERROR = vocabulary.colour("error")
DIFF_LABEL = "Diff two picked versions"  # until two are picked; then "Diff <older> → <newer>"

__all__ = ["SnapshotBrowser"]


class SnapshotBrowser(widgets.VBox):
    """Browse, diff and restore snapshots.

    The buttons are the same operations as ``lanenb.snapshots`` and ``lanenb snapshots``, shown
    as a table to pick from; an operation that fails shows a red line instead of a traceback,
    so a typo in a name does not lose the panel.

    Args:
        backend: "local" (default) or "kubernetes", or a store object.
        volume: only the snapshots of this directory / PVC.
        labels: only snapshots with these labels (e.g. ``{"job": "lane-1"}``).
        **opts: store options (Kubernetes: ``namespace``, ``context``, ``kubeconfig``).

    Raises:
        StoreError: no store of that name.
    """

    def __init__(self, backend: str | SnapshotStore = "local", *, volume: str | None = None,
                 labels: dict[str, str] | None = None, **opts: Any) -> None:
        self.store = get_store(backend, **opts)
        self.volume, self.labels = volume, labels
        self.snapshots: list[Any] = []
        self.table = widgets.HTML()
        self.pick = widgets.SelectMultiple(options=[], rows=6, description="versions",
                                           layout=widgets.Layout(width="95%"))
        self.diff_button = widgets.Button(description=DIFF_LABEL, layout=widgets.Layout(width="auto"),
                                          tooltip="files added, removed and changed from the older picked "
                                                  "version to the newer")
        self.restore_button = widgets.Button(description="Restore", tooltip="restore one into a new volume")
        self.retrain_button = widgets.Button(description="Retrain",
                                             tooltip="restore one into a new volume and train on it again")
        self.job: Any = None  # the last job Retrain submitted
        self._retrain = False
        self.refresh_button = widgets.Button(description="Refresh")
        self.new_name = widgets.Text(placeholder="new directory or PVC name", description="restore to")
        self.confirm_button = widgets.Button(description="Confirm", button_style="warning")
        self.cancel_button = widgets.Button(description="Cancel")
        self.confirm_box = widgets.HBox([self.new_name, self.confirm_button, self.cancel_button],
                                        layout=widgets.Layout(display="none"))
        self.message = widgets.HTML()
        self.result = widgets.HTML()
        self.diff_button.on_click(lambda _: self.diff_selected())
        self.restore_button.on_click(lambda _: self.start_restore())
        self.retrain_button.on_click(lambda _: self.start_restore(retrain=True))
        self.confirm_button.on_click(lambda _: self.confirm_restore())
        self.cancel_button.on_click(lambda _: self._hide_confirm())
        self.refresh_button.on_click(lambda _: self.refresh())
        self.pick.observe(lambda _: self._label_diff(), names="value")
        buttons = widgets.HBox([self.diff_button, self.restore_button, self.retrain_button, self.refresh_button])
        super().__init__([self.table, self.pick, buttons, self.confirm_box, self.message, self.result])
        self.refresh()

    # ------------------------------------------------------------------ actions
    def _error(self, exc: Exception) -> None:
        text = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)  # KeyError's str() quotes
        self.message.value = f"<span style='color:{_ERROR}'>{html.escape(text)}</span>"

    def _info(self, text: str) -> None:
        self.message.value = f"<span>{html.escape(text)}</span>"

    def refresh(self) -> None:
        """Read the store again (after snapshots were made or deleted elsewhere)."""
        try:
            self.snapshots = self.store.list(self.volume, self.labels)
            links = registry_links()
        except (UserError, SnapshotError) as exc:
            self._error(exc)
            return
        self.table.value = versions_table(self.snapshots, links).html()
        self.pick.options = [((f"{s.id}  {s.name}  job={snapshot_job(s, links)}  acc={s.labels.get('accuracy', '-')}  "
                               f"{s.created_text}  {fmt_size(s.size)}"), s.id) for s in self.snapshots]

    def _picked_pair(self) -> tuple[str, str] | None:
        """The two picked ids, older first, or ``None`` unless exactly two are picked."""
        chosen = list(self.pick.value)
        if len(chosen) != 2:
            return None
        order = [s.id for s in self.snapshots]
        a, b = sorted(chosen, key=lambda i: order.index(i) if i in order else len(order))
        return a, b

    def _label_diff(self) -> None:
        pair = self._picked_pair()
        self.diff_button.description = f"Diff {pair[0]} → {pair[1]}" if pair else DIFF_LABEL

    def diff_selected(self) -> None:
        """Show the files that differ between the two picked versions (older -> newer)."""
        pair = self._picked_pair()
        if pair is None:
            self._error(ValueError(f"pick exactly two versions to diff (picked {len(self.pick.value)})"))
            return
        a, b = pair  # older -> newer
        try:
            diff = self.store.diff(a, b)
        except (UserError, SnapshotError) as exc:
            self._error(exc)
            return
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in diff.rows())
        self.result.value = (f"<b>{html.escape(diff.summary())}</b><table><tr><th></th><th>path</th>"
                             f"<th>before</th><th>after</th></tr>{rows}</table>")
        self._info("")

    def start_restore(self, retrain: bool = False) -> None:
        """Ask for the new volume's name for the picked version; nothing happens until Confirm.

        Args:
            retrain: after the restore, submit a job with the settings of the run that made the
                snapshot (``lanenb.retrain``).
        """
        chosen = list(self.pick.value)
        what = "retrain from" if retrain else "restore"
        if len(chosen) != 1:
            self._error(ValueError(f"pick exactly one version to {what} (picked {len(chosen)})"))
            return
        self._retrain = retrain
        self.new_name.description = "retrain on" if retrain else "restore to"
        self.confirm_box.layout.display = "flex"
        self._info(f"{what} {chosen[0]}: type a NEW name and press Confirm (existing targets are refused)")

    def _hide_confirm(self) -> None:
        self.confirm_box.layout.display = "none"

    def confirm_restore(self) -> str | None:
        """Restore (and with Retrain, submit) now: the Confirm button.

        Returns:
            The line shown as the result, or ``None`` when nothing was done (the reason is shown
            in red: nothing picked, no name, target exists ...).
        """
        chosen = list(self.pick.value)
        target = self.new_name.value.strip()
        if len(chosen) != 1 or not target:
            self._error(ValueError("pick one version and type a new name first"))
            return None
        try:
            if self._retrain:
                from lanenb.workflows.retrain import retrain

                self.job = retrain(chosen[0], target, backend=self.store)
                done = f"retraining from {chosen[0]} on {target}: job {self.job.name} submitted"
            else:
                done = f"restored {chosen[0]} into {self.store.restore(chosen[0], target)}"
        except (UserError, SnapshotError) as exc:
            self._error(exc)
            return None
        self._hide_confirm()
        self.new_name.value = ""
        self._info(done)
        return done
