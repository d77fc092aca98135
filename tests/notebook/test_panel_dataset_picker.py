"""``TrainPanel()`` with no arguments: it offers the datasets it finds (path, layout, frames per
split), starts on the first one with Launch enabled, keeps every control visible that the backend
uses, takes a typed path, and starts every setting at ``TrainSpec``'s default (issue 42, item 1)."""

from __future__ import annotations

import dataclasses
import html
import shutil
from pathlib import Path

import ipywidgets as widgets
import pytest

from lanenb.jobs import TrainSpec


@pytest.fixture
def roots(tmp_path, monkeypatch) -> Path:
    """The only data root, so the tests know every dataset the panel can find."""
    root = tmp_path / "roots"
    root.mkdir()
    monkeypatch.setenv("LANENB_DATA_ROOTS", str(root))
    return root


def synth(folder: Path, frames: int = 20) -> Path:
    from lanenb_trainer.data.synth import synthesize

    synthesize(folder, frames, seed=0, width=320, height=180, test_fraction=0.25, progress=False)
    return folder.resolve()


def shown(panel: widgets.Widget, control: widgets.Widget) -> bool:
    """Whether ``control`` is in the panel with neither it nor a box around it hidden."""
    def path_to(box: widgets.Widget) -> list[widgets.Widget] | None:
        if box is control:
            return [box]
        for child in getattr(box, "children", ()):
            found = path_to(child)
            if found is not None:
                return [box, *found]
        return None

    chain = path_to(panel)
    return chain is not None and all(w.layout.display != "none" for w in chain)


def test_panel_without_arguments_starts_on_the_dataset_it_finds_and_can_launch(roots):
    from lanenb.notebook import TrainPanel

    data = synth(roots / "synth")
    panel = TrainPanel()
    assert shown(panel, panel.dataset) and shown(panel, panel.found)
    assert panel.dataset.value == str(data) and panel.found.value == str(data)
    assert panel.problems == [] and not panel.launch.disabled, panel.problems
    assert panel.spec_fields()["dataset"] == str(data)


def test_picker_names_each_dataset_s_layout_and_frames_per_split_as_the_trainer_splits_it(roots):
    from lanenb.notebook import TrainPanel
    from lanenb_trainer.data.splits import load_split

    held_out = synth(roots / "held-out")  # no val_label.json: validation is held out of training
    with_val = synth(roots / "with-val")
    shutil.copy(with_val / "test_label.json", with_val / "val_label.json")
    panel = TrainPanel()
    labels = dict((value, label) for label, value in panel.found.options)
    assert set(labels) == {str(held_out), str(with_val)}
    for root in (held_out, with_val):
        train, val, test = (len(load_split(root, split)) for split in ("train", "val", "test"))
        assert labels[str(root)] == f"{root} — tusimple, {train} train / {val} val / {test} test"
    assert "13 train / 2 val / 5 test" in labels[str(held_out)]


def test_hiding_the_pvc_rows_locally_leaves_dataset_image_free_controls_visible(roots):
    from lanenb.notebook import TrainPanel

    synth(roots / "synth")
    panel = TrainPanel()
    assert not shown(panel, panel.subpath) and not shown(panel, panel.image)
    for control in (panel.dataset, panel.extra, panel.processes, panel.batch_size, panel.epochs, panel.found):
        assert shown(panel, control), control.description
    layouts = [c.layout for c in (panel.found, panel.dataset, panel.subpath, panel.image, panel.extra)]
    assert len({id(layout) for layout in layouts}) == len(layouts)


def test_a_path_typed_into_the_box_is_what_the_job_gets(roots, tmp_path):
    from lanenb.notebook import TrainPanel

    found = synth(roots / "synth")
    elsewhere = synth(tmp_path / "elsewhere" / "mine", frames=8)  # outside the data roots
    panel = TrainPanel()
    panel.dataset.value = str(elsewhere)
    assert panel.found.value is None  # the picker does not pretend it picked this one
    assert panel.spec_fields()["dataset"] == str(elsewhere) and not panel.launch.disabled, panel.problems
    panel.found.value = str(found)  # a pick fills the box
    assert panel.dataset.value == str(found) and panel.spec_fields()["dataset"] == str(found)


def test_a_dataset_below_the_current_folder_is_named_relative_and_found_in_any_spelling(roots, monkeypatch):
    from lanenb.notebook import TrainPanel

    found = synth(roots / "synth")
    monkeypatch.chdir(roots)
    panel = TrainPanel(dataset="synth")  # the user's spelling is kept: it is what the job gets
    assert panel.found.options[0][0].startswith("synth — tusimple, ")
    assert panel.found.value == str(found) and panel.dataset.value == "synth"
    panel.dataset.value = "./synth/"
    assert panel.found.value == str(found) and panel.spec_fields()["dataset"] == "./synth/"


def test_no_dataset_found_leaves_the_box_alone_visible_and_says_why(roots):
    from lanenb.notebook import TrainPanel

    panel = TrainPanel()
    assert shown(panel, panel.dataset) and not shown(panel, panel.found)
    assert panel.launch.disabled and "dataset='': must be a non-empty path" in html.unescape(panel.message.value)


def test_panel_defaults_are_trainspec_s(roots, monkeypatch):
    from lanenb.notebook import TrainPanel

    synth(roots / "synth")
    defaults = TrainSpec.field_defaults()
    panel = TrainPanel()
    assert (panel.batch_size.value, panel.epochs.value, panel.engine.value, panel.backbone.value, panel.gpus.value) \
        == (defaults["batch_size"], defaults["epochs"], defaults["engine"], defaults["backbone"], defaults["gpus"])
    assert panel.processes.value == min(defaults["processes"], panel.capacity["processes"])

    # change the one source of truth: the panel follows (the spec it builds passes them explicitly)
    changed = {"processes": 1, "batch_size": 3, "epochs": 5, "engine": "ddp", "backbone": "resnet18"}
    for f in dataclasses.fields(TrainSpec):
        if f.name in changed:
            monkeypatch.setattr(f, "default", changed[f.name])
    panel = TrainPanel()
    assert {name: getattr(panel, name).value for name in changed} == changed
    assert panel.spec_fields()["batch_size"] == 3 and not panel.launch.disabled, panel.problems

    monkeypatch.setattr(next(f for f in dataclasses.fields(TrainSpec) if f.name == "processes"), "default", 10_000)
    panel = TrainPanel()
    assert panel.processes.value == panel.processes.max == panel.capacity["processes"]


def test_kubernetes_picker_lists_pvc_names_alone(roots, cluster, kubeconfig, monkeypatch):
    from kubernetes import client as k8s_client

    from lanenb.contract.backends import get_backend
    from lanenb.notebook import TrainPanel

    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    synth(roots / "synth")  # a local dataset: not offered on the cluster
    api = get_backend("kubernetes").clients().api
    for name in ("lanes-b", "lanes-a"):
        k8s_client.CoreV1Api(api).create_namespaced_persistent_volume_claim("default", {
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    panel = TrainPanel()
    panel.backend.value = "kubernetes"  # the local pick was the panel's, not typed: it moves to a PVC
    assert panel.found.options == (("lanes-a", "lanes-a"), ("lanes-b", "lanes-b"))
    assert panel.dataset.value == "lanes-a" and shown(panel, panel.dataset) and shown(panel, panel.subpath)
    assert panel.spec_fields()["volumes"] == ["lanes-a:/mnt/data"]
