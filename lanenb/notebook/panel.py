"""``TrainPanel``: the launch form, for users who would rather click than type flags.

Every control maps to a ``TrainSpec`` field; after each change the panel runs
``lanenb.contract.validate`` (the same checks the magic and the CLI hit) and disables Launch with
every problem listed. Bounds come from the backend (``Backend.capacity``: this machine's GPUs
or cores, the cluster's allocatable ``nvidia.com/gpu``, an AzureML compute cluster's nodes x its
VM's GPUs), datasets from ``Backend.datasets`` (folders under the data roots, PVCs in the namespace),
every default from ``TrainSpec`` (whose trainer settings default as ``TrainConfig``), so the form
starts where ``%lanetrain`` and ``lanenb train`` start.
"""

from __future__ import annotations

import html
import os
import shlex
import threading
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from lanenb.backends.local.discovery import summarize_dataset
from lanenb.charts import vocabulary
from lanenb.contract.backends import descriptors
from lanenb.contract.spec import BACKBONES, ENGINES
from lanenb.errors import UserError
from lanenb.jobs import Job, TrainSpec, available_backends, get_backend, submit, validate
from lanenb.notebook.view import JobView
from lanenb_trainer.config import global_batch

_ERROR = vocabulary.colour("error")
_OK = vocabulary.colour("ok")

__all__ = ["TrainPanel"]

PVC_MOUNT = "/mnt/data"  # where the chosen PVC is mounted in every rank


def _wide() -> widgets.Layout:
    """A new wide layout. Never share one between controls: a ``Layout`` is one model, so hiding
    one control that holds it (``layout.display``) hides every other."""
    return widgets.Layout(width="460px")


def _spec_defaults() -> dict[str, Any]:
    """``TrainSpec``'s field defaults (``dataset`` has none): the one place the form's defaults
    come from, so the panel, the magic and the CLI cannot drift apart."""
    return TrainSpec.field_defaults()


def _dataset_label(dataset: str, local: bool) -> str:
    """How the dataset picker names ``dataset``: a local folder as its path (relative to the
    current folder when below it) with its layout and frames per split; anything else (a PVC,
    a data reference) as it is, since only the cluster could look inside."""
    if not local:
        return dataset
    shown = os.path.relpath(dataset) if dataset.startswith(os.getcwd() + os.sep) else dataset
    summary = summarize_dataset(dataset)
    return f"{shown} — {summary}" if summary else shown


class TrainPanel(widgets.VBox):
    """Pick dataset, backend, ranks, GPUs, batch size, epochs, engine and backbone; Launch / Stop.

    The form is checked with the same ``validate`` as ``%lanetrain`` and ``lanenb train`` after
    every change, so Launch is only enabled for a spec that ``submit`` would accept; the launched
    job is shown below the form in a ``JobView`` and is in ``panel.job``.

    The dataset picker (``panel.found``) lists what the backend finds, each local folder with its
    layout and frames per split; picking one fills the dataset box (``panel.dataset``), which also
    takes any other folder and is what the job gets.

    Args:
        backend: initial backend (``local``, ``kubernetes``, ``azureml``).
        dataset: initial dataset path (local), PVC name (Kubernetes) or data reference (AzureML);
            None: the first dataset the backend finds.
        namespace: Kubernetes namespace for PVCs and jobs.
        **defaults: other initial ``TrainSpec`` fields (``processes``, ``batch_size``, ...; those
            not given start at ``TrainSpec``'s defaults, processes and GPUs clamped to the backend);
            backend option sections (``backend_options=``, or a section as its own keyword) also
            reach the backend's capacity question (e.g. ``azureml={"compute": "gpu-cluster"}``:
            the cluster whose nodes bound the form). Each backend with flags gets its own
            section of the form (one text box per flag that takes a value), from its descriptor.

    Raises:
        traitlets.TraitError: ``backend`` is not one of ``available_backends()``.
    """

    def __init__(self, backend: str = "local", dataset: str | None = None, namespace: str = "default",
                 **defaults: Any) -> None:
        self.job: Job | None = None
        self.view: JobView | None = None
        self.problems: list[Any] = []
        self._local = True  # the backend runs jobs on this machine (set by _on_backend)
        self._volumes = False  # the backend's datasets are PVCs the form mounts (set by _on_backend)
        self._lock = threading.Lock()
        self._syncing = False  # the picker's options are being replaced: its changes are not picks
        style = {"description_width": "110px"}
        initial = _spec_defaults()

        def pick(name: str) -> Any:
            return defaults.pop(name, initial[name])

        self.backend = widgets.Dropdown(options=available_backends(), value=backend, description="backend",
                                        style=style)
        self.found = widgets.Dropdown(options=[], value=None, description="found", style=style, layout=_wide())
        self.dataset = widgets.Combobox(value=dataset or "", options=[], placeholder="dataset folder",
                                        description="dataset", ensure_option=False, style=style, layout=_wide())
        self.subpath = widgets.Text(value="", placeholder="folder inside the PVC, e.g. tusimple",
                                    description="path in PVC", style=style, layout=_wide())
        self.namespace = widgets.Text(value=namespace, description="namespace", style=style)
        self.image = widgets.Text(value=pick("image") or "", placeholder="registry/lanenb-trainer:tag",
                                  description="image", style=style, layout=_wide())
        # max = the value for now: _on_backend lowers it to the backend's capacity, which clamps
        processes, gpus = int(pick("processes")), int(pick("gpus"))
        self.processes = widgets.IntSlider(value=processes, min=1, max=max(1, processes), description="processes",
                                           style=style)
        self.gpus = widgets.IntSlider(value=gpus, min=0, max=max(0, gpus), description="GPUs/process", style=style)
        self.batch_size = widgets.IntText(value=int(pick("batch_size")), description="batch/rank", style=style)
        self.global_batch = widgets.Label()
        self.epochs = widgets.IntText(value=int(pick("epochs")), description="epochs", style=style)
        self.engine = widgets.Dropdown(options=ENGINES, value=pick("engine"), description="engine", style=style)
        self.backbone = widgets.Dropdown(options=BACKBONES, value=pick("backbone"), description="backbone",
                                         style=style)
        self.extra = widgets.Text(value=" ".join(pick("extra_args")), description="trainer flags",
                                  placeholder="--img-height 128 --img-width 320", style=style, layout=_wide())
        self._defaults = TrainSpec.fold_sections(defaults)
        self.sections = self._option_sections(style)
        self.launch = widgets.Button(description="Launch", button_style="primary", icon="play")
        self.stop = widgets.Button(description="Stop", button_style="", icon="stop", disabled=True)
        self.message = widgets.HTML()
        self.output = widgets.Output()
        self.launch.on_click(self._on_launch)
        self.stop.on_click(self._on_stop)
        self._k8s_row = widgets.VBox([self.subpath, self.namespace, self.image])
        super().__init__(children=[
            widgets.HTML("<b>Train SCNN</b>"),
            self.backend, self.found, self.dataset, self._k8s_row, *self.sections.values(),
            widgets.HBox([self.processes, self.gpus]), widgets.HBox([self.batch_size, self.global_batch]),
            self.epochs, widgets.HBox([self.engine, self.backbone]), self.extra,
            widgets.HBox([self.launch, self.stop]), self.message, self.output,
        ])
        self.backend.observe(self._on_backend, names="value")
        self.found.observe(self._on_found, names="value")
        self.dataset.observe(self._on_dataset, names="value")
        for control in (self.dataset, self.subpath, self.namespace, self.image, self.processes, self.gpus,
                        self.batch_size, self.epochs, self.engine, self.backbone, self.extra,
                        *(c for box in self.sections.values() for c in box.children)):
            control.observe(lambda _change: self.check(), names="value")
        self._on_backend()

    def _option_sections(self, style: dict[str, str]) -> dict[str, widgets.VBox]:
        """Backend name -> its section: a text box per value flag of its descriptor (the option's
        name as label, the flag's help as placeholder); ``self.section_options`` keeps which
        ``(section, option)`` each box fills."""
        given = self._defaults.get("backend_options") or {}
        out: dict[str, widgets.VBox] = {}
        self.section_options: dict[str, list[tuple[widgets.Text, str, str]]] = {}
        for d in descriptors():
            boxes = []
            for flags, kw in d.flags:
                if kw.get("action") in ("store_true", "store_false"):
                    continue  # a switch: its flag, not a text box
                option = d.flag_dest(kw, flags).partition(".")[2]
                value = (given.get(d.options_key) or {}).get(option) if isinstance(
                    given.get(d.options_key), dict) else None
                box = widgets.Text(value="" if value is None else str(value), description=option,
                                   placeholder=str(kw.get("help", ""))[:60], style=style)
                self.section_options.setdefault(d.name, []).append((box, d.options_key, option))
                boxes.append(box)
            if boxes:
                out[d.name] = widgets.VBox([widgets.HTML(f"<i>{html.escape(d.name)} options</i>"), *boxes])
        return out

    # ------------------------------------------------------------------ form -> spec
    def _on_backend(self, _change: Any = None) -> None:
        """Re-read what the chosen backend offers: bounds and datasets."""
        name = self.backend.value
        note = ""
        try:
            backend = get_backend(name)
            self._local = backend.runs_here
            self._volumes = backend.datasets_are_volumes
            options = self.spec_fields().get("backend_options") or {}
            probe = None if self._local else TrainSpec(dataset="/", backend=name, namespace=self.namespace.value
                                                            or "default", backend_options=options)
            cap = backend.capacity(probe)
            found = list(backend.datasets(probe))
        except Exception as exc:  # an unreachable cluster: say so, keep the form usable
            cap = {"processes": 64, "gpus": 0, "gpus_per_process": 0}
            found = []
            note = f"cannot ask the {name} backend for its capacity and datasets: {exc}"
        self.capacity = cap
        self._offer(found)
        self._k8s_row.layout.display = "none" if self._local else ""
        for owner, box in self.sections.items():
            box.layout.display = "" if owner == name else "none"
        self.processes.max = max(1, cap["processes"])
        self.gpus.max = cap["gpus_per_process"]
        self.gpus.disabled = cap["gpus_per_process"] == 0
        self.dataset.placeholder = ("dataset folder" if self._local else "PVC name" if self._volumes
                                    else "dataset (a data reference or a folder)")
        self.subpath.layout.display = "" if self._volumes else "none"
        self.namespace.layout.display = "" if self._volumes else "none"
        self.check(note)

    def _offer(self, found: list[str]) -> None:
        """Show the backend's datasets in the picker. A dataset box that is empty or holds the
        previous backend's offer (not a path the user typed) moves to the first one found, so
        ``TrainPanel()`` can launch without a keystroke when there is a dataset."""
        before = set(self.dataset.options)
        current = self.dataset.value.strip()
        self._syncing = True
        try:
            self.found.options = [(_dataset_label(d, self._local), d) for d in found]
            self.dataset.options = tuple(found)
            if (not current or current in before) and current not in found:
                self.dataset.value = found[0] if found else ""
            self.found.value = self._offered(self.dataset.value)
        finally:
            self._syncing = False
        self.found.layout.display = "" if found else "none"  # nothing to pick: the box alone

    def _offered(self, value: str) -> str | None:
        """The picker's entry for what the box holds (a local path in any spelling), else None."""
        value = value.strip()
        offered = self.dataset.options
        if value in offered or not value:
            return value or None
        if self._local:
            resolved = str(Path(value).expanduser().resolve())
            if resolved in offered:
                return resolved
        return None

    def _on_found(self, change: Any) -> None:
        """A pick fills the dataset box (the box is what the job gets)."""
        if not self._syncing and change["new"] is not None:
            self.dataset.value = change["new"]

    def _on_dataset(self, change: Any) -> None:
        """The picker follows the box: its entry when the box holds one, blank for another folder.
        Quietly: following a typed ``data/synth`` must not rewrite the box to the absolute path."""
        if not self._syncing:
            self._syncing = True
            try:
                self.found.value = self._offered(change["new"])
            finally:
                self._syncing = False

    def spec_fields(self) -> dict[str, Any]:
        """The ``TrainSpec`` fields the form describes now (unchecked), e.g. to copy into code.

        Returns:
            A dict for ``TrainSpec.from_dict``: the controls' values over the ``**defaults``;
            on Kubernetes the chosen PVC becomes a volume mounted at ``/mnt/data``.
        """
        fields: dict[str, Any] = dict(self._defaults)
        fields.update(backend=self.backend.value, processes=self.processes.value, gpus=self.gpus.value,
                      batch_size=self.batch_size.value, epochs=self.epochs.value, engine=self.engine.value,
                      backbone=self.backbone.value)
        try:
            extra = shlex.split(self.extra.value)
        except ValueError as exc:
            extra = [self.extra.value]
            fields["_extra_error"] = str(exc)
        if extra:
            fields["extra_args"] = extra
        controls = self.section_options.get(self.backend.value)
        if controls:
            sections = {k: dict(v) if isinstance(v, dict) else v
                        for k, v in (fields.get("backend_options") or {}).items()}
            for control, key, option in controls:
                if control.value.strip():
                    sections.setdefault(key, {})[option] = control.value.strip()
            if sections:
                fields["backend_options"] = sections
        dataset = self.dataset.value.strip()
        if self._local:
            fields["dataset"] = dataset
        elif not self._volumes:
            fields["image"] = self.image.value.strip() or None
            fields["dataset"] = dataset
        else:
            fields["namespace"] = self.namespace.value.strip()
            fields["image"] = self.image.value.strip() or None
            if dataset:
                fields["volumes"] = [f"{dataset}:{PVC_MOUNT}"]
                sub = self.subpath.value.strip().strip("/")
                fields["dataset"] = f"{PVC_MOUNT}/{sub}" if sub else PVC_MOUNT
            else:
                fields["dataset"] = ""
        return fields

    def check(self, note: str = "") -> list[Any]:
        """Validate the form; Launch is enabled only when nothing is wrong.

        Args:
            note: a line shown above the problems (e.g. why the backend's capacity is unknown).

        Returns:
            The problems (``lanenb.contract.validate.Problem``), empty when the spec can launch.
        """
        fields = self.spec_fields()
        extra_error = fields.pop("_extra_error", None)
        problems = validate(fields)
        sub = self.subpath.value.strip()
        if not self._local and (sub.startswith("/") or ".." in sub.split("/")):
            from lanenb.contract.validate import Problem

            problems.insert(0, Problem("dataset", sub, f"path in PVC {sub!r}: must be a folder inside the PVC "
                                                       f"(relative, no '..')"))
        if extra_error:
            from lanenb.contract.validate import Problem

            problems.insert(0, Problem("extra_args", self.extra.value,
                                       f"trainer flags {self.extra.value!r}: {extra_error}"))
        self.problems = problems
        self.global_batch.value = (f"global batch {global_batch(self.batch_size.value, self.processes.value)}"
                                   if isinstance(self.batch_size.value, int) else "")
        running = self.job is not None and not self.job.status().state.finished
        self.launch.disabled = bool(problems) or running
        lines = [html.escape(str(p)) for p in problems]
        if note:
            lines.insert(0, html.escape(note))
        self.message.value = (f"<div style='color:{_ERROR}'>" + "<br>".join(lines) + "</div>") if lines else (
            f"<span style='color:{_OK}'>ready to launch</span>")
        return problems

    # ------------------------------------------------------------------ buttons
    def _on_launch(self, _button: Any = None) -> Job | None:
        if self.check():
            return None
        fields = self.spec_fields()
        fields.pop("_extra_error", None)
        self.launch.disabled = True
        try:
            job = submit(TrainSpec.from_dict(fields))
        except UserError as exc:
            self.message.value = f"<div style='color:{_ERROR}'>{html.escape(str(exc))}</div>"
            self.launch.disabled = False
            return None
        self.job = job
        self.stop.disabled = False
        self.stop.button_style = "danger"
        self.message.value = f"launched <b>{html.escape(job.name)}</b>"
        self.view = JobView(job, start=False)
        self.view.stop_button.layout.display = "none"  # the panel's Stop does the same
        self.output.outputs = ()
        self.output.append_display_data(self.view)
        self.view.start()
        threading.Thread(target=self._re_enable_when_done, args=(job,), daemon=True).start()
        return job

    def _re_enable_when_done(self, job: Job) -> None:
        try:
            job.wait()
        except Exception:
            pass
        if self.job is job:
            self.stop.disabled = True
            self.stop.button_style = ""  # nothing left to stop: grey, not a red alarm
            self.check()

    def _on_stop(self, _button: Any = None) -> None:
        job = self.job
        if job is None:
            return
        self.stop.disabled = True
        self.message.value = f"stopping <b>{html.escape(job.name)}</b>..."

        def cancel() -> None:  # waits for the ranks: not on the kernel's thread
            try:
                status = job.cancel()
                self.message.value = f"<b>{html.escape(job.name)}</b>: {html.escape(str(status))}"
            except Exception as exc:
                self.message.value = f"<div style='color:{_ERROR}'>stop failed: {html.escape(str(exc))}</div>"
                self.stop.disabled = False

        threading.Thread(target=cancel, daemon=True).start()
