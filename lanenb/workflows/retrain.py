""""Retrain from this snapshot" in one call: restore a dataset version into a NEW volume and
submit a job with the run record's settings pointed at it (the RUN:AI guide's reproduce step).

The run record is the job that made the snapshot (its ``job`` label; the registry keeps its
``TrainSpec``). A snapshot of a run directory stands for its run: the same job's dataset
snapshot is restored. The new spec is checked BEFORE anything is restored, so bad overrides
leave no half-made volume; the restore itself never overwrites (an existing target is refused).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lanenb.registry.jobs import JobRegistry
from lanenb.snapshots.base import Snapshot, SnapshotInputError, SnapshotNotFoundError, SnapshotStore

__all__ = ["dataset_snapshot_for", "backend_for_store", "retrain", "retrain_spec", "with_secrets"]


def dataset_snapshot_for(store: SnapshotStore, snap: Snapshot) -> Snapshot:
    """The dataset version to retrain on: ``snap`` itself, or for a run-dir snapshot the newest
    dataset snapshot its job used: the registry's link first (an unchanged dataset's snapshot
    is reused and keeps the label of the job that made it), then the snapshots' labels."""
    if snap.labels.get("role") != "run":
        return snap
    job = snap.labels.get("job")
    linked = [link["snapshot"] for link in (JobRegistry().snapshot_links(job) if job else [])
              if link["role"] == "dataset" and link["store"] == store.name]
    for snapshot_id in reversed(linked):
        try:
            return store.get(snapshot_id)
        except SnapshotNotFoundError:  # deleted from the store since: the labels may still know one
            continue
    found = store.list(labels={"job": job, "role": "dataset"}) if job else []
    if not found:
        raise SnapshotInputError(f"snapshot {snap.id} is the run directory of job {job!r} and that job has no dataset "
                                 "snapshot to retrain on: pick a dataset snapshot (role=dataset)")
    return found[-1]


def backend_for_store(store: str) -> Any:
    """The descriptor of the backend a restore from snapshot store ``store`` trains on: the one
    whose ranks snapshot there (``Capabilities.snapshot_store``), else the one that runs on this
    machine (a restored directory is only of use to it).

    Raises:
        SnapshotInputError: no backend trains on what that store restores.
    """
    from lanenb.contract.backends import descriptors

    found = descriptors()
    for rule in (lambda d: d.capabilities.snapshot_store == store, lambda d: d.capabilities.runs_here):
        chosen = next((d for d in found if rule(d)), None)
        if chosen is not None:
            return chosen
    raise SnapshotInputError(f"no backend trains on what the {store!r} snapshot store restores")


def retrain_spec(base: Any, snap: Snapshot, new_volume: str, backend: str, overrides: dict[str, Any]) -> Any:
    """The run record's spec pointed at the restored volume; ``run_dir`` and ``name`` start fresh
    unless given. Raises ``SpecError`` (a ``UserError``) on bad overrides."""
    from lanenb.contract.backends import get_descriptor
    from lanenb.contract.spec import TrainSpec, VolumeMount

    changes: dict[str, Any] = {"name": None, "run_dir": None}
    if get_descriptor(backend).capabilities.runs_here:  # a restored directory
        changes["dataset"] = str(Path(new_volume).expanduser().absolute())
    else:  # the new PVC takes the old one's place at the same mount path
        mounts = list(base.volumes) if base is not None else []
        if not any(m.name == snap.volume for m in mounts):
            raise SnapshotInputError(f"job {snap.labels.get('job')!r} does not mount PVC {snap.volume!r}: "
                                     "pass volumes=[...] and dataset=... to retrain")
        changes["volumes"] = [VolumeMount(new_volume, m.mount_path, m.read_only) if m.name == snap.volume else m
                              for m in mounts]
        if base.pvc_name == snap.volume:
            changes["pvc_name"] = new_volume
    changes.update(overrides)
    if base is None:
        return TrainSpec(**{"backend": backend, **changes})
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(TrainSpec)})
    if unknown:
        raise SnapshotInputError(f"unknown TrainSpec field(s) {', '.join(map(repr, unknown))} in retrain overrides")
    return base.replace(**changes)


def with_secrets(spec: Any, secrets: Mapping[str, str] | None, job: str | None = None) -> Any:
    """``spec`` with ``secrets`` (``{NAME: value}``) in its ``env``, checked to hold no
    ``<redacted>`` left: the registry keeps no secret value, so a recorded spec cannot run again
    until they are given back (submitting the text ``<redacted>`` as a token fails late and obscurely).

    Raises:
        SnapshotInputError: naming each field still redacted and how to pass it.
    """
    from lanenb.contract.redact import REDACTED, redacted_fields

    if secrets:
        spec = spec.replace(env={**spec.env, **{str(k): v for k, v in secrets.items()}})
    missing = redacted_fields(spec.to_dict())
    if missing:
        env = [m.split(".", 1)[1] for m in missing if m.startswith("env.")]
        other = [m for m in missing if not m.startswith("env.")]
        how = []
        if env:
            example = ", ".join(f"{n!r}: ..." for n in env)
            how.append(f"secrets={{{example}}} (a value, or a 'secret:SECRET/KEY' reference on Kubernetes)")
        if other:
            how.append(f"the field(s) {', '.join(other)} as overrides")
        raise SnapshotInputError(
            f"the run record of job {job!r} holds no secret values (they read {REDACTED}), so it cannot run again as "
            f"recorded: {', '.join(missing)}; pass them again: retrain(..., {' and '.join(how)})")
    return spec


def retrain(snapshot_id: str | Snapshot, new_volume: str, *, backend: str | SnapshotStore = "local",
            registry: Any = None, store_opts: dict[str, Any] | None = None,
            secrets: Mapping[str, str] | None = None, **overrides: Any) -> Any:
    """Restore a dataset snapshot into ``new_volume`` and start training on it with the settings
    of the run that made the snapshot.

    Args:
        snapshot_id: a dataset snapshot, or a run-dir snapshot (its job's dataset snapshot is used):
            a ``Snapshot`` or its id, unique prefix or name.
        new_volume: a NEW directory (local) or PVC name (Kubernetes); never overwritten.
        backend: the snapshot store, "local" or "kubernetes" (the job runs on the same kind).
        registry: the job registry (default: ``$LANENB_HOME``'s).
        store_opts: Kubernetes store options (``namespace``, ``kubeconfig``, ``context``).
        secrets: ``{NAME: value}`` for the run's secret ``env`` variables: the registry keeps
            none of their values, so a run that had any needs them again (or ``secret:`` refs).
        **overrides: ``TrainSpec`` fields to change (``epochs=3``, ``name="lane-v2"``...); without
            a run record (a snapshot made by hand) they must describe the whole job.

    Returns:
        The submitted ``Job``.

    Raises:
        SnapshotNotFoundError: no such snapshot.
        TargetExistsError: ``new_volume`` exists; nothing was restored or submitted.
        SnapshotInputError, SpecError: bad overrides, or secrets the run record lacks (checked
            before restoring anything).
    """
    from lanenb.jobs import get_job, submit
    from lanenb.registry.jobs import JobNotFoundError, JobRegistry
    from lanenb.snapshots import get_store

    store = get_store(backend, **(store_opts or {}))
    target = backend_for_store(store.name)
    kind = target.name
    snap = dataset_snapshot_for(store, store.get(snapshot_id))
    registry = registry or JobRegistry()
    base = None
    job_name = snap.labels.get("job")
    if job_name:
        try:
            base = get_job(job_name, registry=registry).spec
        except (JobNotFoundError, KeyError):
            base = None
    if base is None and "dataset" not in overrides and not target.capabilities.runs_here:
        raise SnapshotNotFoundError(f"no run record for snapshot {snap.id} (job {job_name!r} is not in the job "
                                    "registry): pass the training settings as overrides (dataset=..., volumes=...)")
    spec = with_secrets(retrain_spec(base, snap, new_volume, kind, overrides), secrets, job_name)
    restored = store.restore(snap.id, new_volume)
    if target.capabilities.runs_here:
        spec = spec.replace(dataset=restored)
    return submit(spec, registry=registry)
