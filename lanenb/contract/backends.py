"""Backend registry (papermill style): backends are looked up by name and imported lazily,
so using the local backend never imports the ``kubernetes`` client.

Each backend is a ``BackendDescriptor`` (``lanenb.contract.descriptor``): its factory as a
``"module:attribute"`` string, its options class, flags, capabilities and spec check. This is
the one place in the generic layers that names the built-in backends; ``TrainSpec``, the flags,
the launch panel and ``--help`` read the descriptors. Third-party backends register through the
``lanenb.backends`` entry point (an entry point naming a ``BackendDescriptor``, or a callable
returning one), loaded on the first lookup.

The registry knows names and descriptors, not the interface (``lanenb.contract.backend``), so
``TrainSpec`` can check a backend name here while the interface refers to ``TrainSpec``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lanenb.contract.azureml_options import DATA_KINDS
from lanenb.contract.descriptor import BackendDescriptor, Capabilities
from lanenb.errors import SpecError
from lanenb.plugins import Registry
from lanenb_trainer.errors import UserError

if TYPE_CHECKING:
    from lanenb.contract.backend import Backend
    from lanenb.contract.spec import TrainSpec

__all__ = ["BackendError", "register_backend", "register_descriptor", "get_backend", "get_descriptor",
           "available_backends", "descriptors", "load_entry_points", "ENTRY_POINT_GROUP"]

log = logging.getLogger(__name__)
Factory = Callable[..., "Backend"]
ENTRY_POINT_GROUP = "lanenb.backends"


class BackendError(UserError, ValueError):
    """Unknown or unloadable backend."""


def _check_local(spec: TrainSpec) -> None:
    if isinstance(spec.gpus, int) and spec.gpus and shutil.which("nvidia-smi") is None:
        raise SpecError("gpus", spec.gpus, "no NVIDIA GPU found on this machine (nvidia-smi missing); "
                        "use gpus=0 locally or backend='kubernetes'")


_LOCAL_FLAGS: tuple[Any, ...] = (
    (("--oversubscribe",), dict(action="store_true", default=None,
                                help="allow more ranks than this machine's cores (or GPUs); they share them")),
)
_K8S_FLAGS: tuple[Any, ...] = (
    (("--project", "-p"), dict(dest="runai_project", metavar="PROJECT",
                               help="RUN:AI project: namespace runai-PROJECT and the runai scheduler")),
    (("--context",), dict(metavar="CTX", help="kubeconfig context")),
    (("--openshift",), dict(action="store_true", default=None,
                            help="pods for OpenShift's restricted SCC / Pod Security restricted: non-root UID, "
                                 "sshd on port 2222 (default: when the cluster serves security.openshift.io)")),
    (("--no-openshift",), dict(dest="openshift", action="store_false", default=None,
                               help="root pods (sshd on port 22) even on OpenShift")),
    (("--no-network-policy",), dict(dest="network_policy", action="store_false", default=None,
                                    help="no NetworkPolicy that lets only the job's own pods reach its pods "
                                         "(where the cluster's own policies isolate jobs)")),
)
# the workspace from these, else AZURE_SUBSCRIPTION_ID / AZURE_RESOURCE_GROUP /
# AZUREML_WORKSPACE_NAME, else config.json
_AZUREML_FLAGS: tuple[Any, ...] = (
    (("--compute",), dict(metavar="NAME", help="AzureML compute cluster to run on")),
    (("--subscription",), dict(dest="subscription_id", metavar="ID", help="Azure subscription id")),
    (("--resource-group",), dict(metavar="RG", help="AzureML workspace's group")),
    (("--workspace",), dict(metavar="NAME", help="AzureML workspace")),
    (("--azure-config",), dict(dest="config", metavar="PATH", help="AzureML workspace config.json")),
    (("--azureml-environment",), dict(dest="environment", metavar="NAME:VERSION",
                                      help="registered AzureML environment (default: build trainer/Dockerfile)")),
    (("--instance-count", "--nodes"), dict(dest="instance_count", type=int, metavar="N",
                                           help="AzureML nodes; --processes are split evenly over them")),
    (("--shm-size",), dict(metavar="SIZE", help="AzureML /dev/shm size, e.g. 16g")),
    (("--data-kind",), dict(choices=DATA_KINDS,
                            help="AzureML: how --data reaches the job (auto: from its spelling; asset "
                                 "azureml:NAME:VERSION, uri azureml://..., local: a folder here, uploaded)")),
    (("--experiment",), dict(metavar="NAME", help="AzureML experiment (default lanenb)")),
)

# name -> descriptor; the factories are "module:attribute" strings resolved on first use (the one
# generic registry, shared with lanenb.snapshots)
_BUILTIN = (
    BackendDescriptor("local", "lanenb.backends.local:LocalBackend", summary="MPI ranks on this machine",
                      check=_check_local, options="lanenb.contract.local_options:LocalOptions",
                      flags=_LOCAL_FLAGS,
                      capabilities=Capabilities(runs_here=True, snapshot_needs_pvc=False, suspend_resume=True)),
    BackendDescriptor("kubernetes", "lanenb.backends.kubernetes:KubernetesBackend",
                      summary="a Kubeflow MPIJob on a Kubernetes cluster",
                      options="lanenb.contract.k8s_options:KubernetesOptions", section="k8s", flags=_K8S_FLAGS,
                      capabilities=Capabilities(volumes=True, snapshot_store="kubernetes", suspend_resume=True,
                                                secret_refs=True, gpus_optional=False)),
    # the SDK (azure-ai-ml) is imported on first use of the backend, never by the descriptor
    BackendDescriptor("azureml", "lanenb.backends.azureml:AzureMLBackend",
                      summary="an Azure Machine Learning command job",
                      options="lanenb.contract.azureml_options:AzureMLOptions", flags=_AZUREML_FLAGS,
                      check="lanenb.contract.azureml_options:check_spec"),
    BackendDescriptor("kubernetes-fetch", "lanenb.backends.fetch:KubernetesFetchBackend",  # dataset fetch Jobs
                      trains=False),
)
_DESCRIPTORS: dict[str, BackendDescriptor] = {d.name: d for d in _BUILTIN}
_BUILTIN_NAMES = frozenset(_DESCRIPTORS)
_BACKENDS: Registry[Backend] = Registry("backend", {d.name: d.factory for d in _BUILTIN}, error=BackendError)
_REGISTRY: dict[str, Factory | str] = _BACKENDS.entries
_entry_points_loaded = False


def register_descriptor(descriptor: BackendDescriptor) -> None:
    """Make ``descriptor.name`` usable everywhere: ``TrainSpec(backend=...)``, its flags in
    ``%lanetrain``/``lanenb train``, its section in the launch panel. A later registration of
    the same name replaces the earlier one.

    Raises:
        BackendError: not a ``BackendDescriptor``, or a bad name or factory.
    """
    if not isinstance(descriptor, BackendDescriptor):
        raise BackendError(f"a backend must be registered as a BackendDescriptor, got {descriptor!r}")
    _BACKENDS.register(descriptor.name, descriptor.factory)
    _DESCRIPTORS[descriptor.name] = descriptor


def register_backend(name: str, factory: Factory | str, *, trains: bool = True) -> None:
    """Make ``name`` usable in ``TrainSpec(backend=name)`` with no options or flags of its own;
    ``factory`` may be a "module:attribute" string to defer the import. ``trains=False``: a
    backend that runs other jobs (its own spec type, see ``Backend.spec_from_dict``), left out of
    ``available_backends``. ``register_descriptor`` registers one with options and flags."""
    _BACKENDS.register(name, factory)
    _DESCRIPTORS[name] = BackendDescriptor(name, factory, trains=trains)


def load_entry_points(force: bool = False) -> list[str]:
    """Register the backends that installed packages declare in the ``lanenb.backends`` entry
    point group (each names a ``BackendDescriptor`` or a callable returning one). Done once, on
    the first lookup; ``force`` scans again (after installing a package in a running kernel).

    Returns:
        The names registered by this call. A broken entry point is logged and skipped, so one
        bad plug-in does not take the built-in backends down.
    """
    global _entry_points_loaded
    if _entry_points_loaded and not force:
        return []
    _entry_points_loaded = True
    names = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            found = ep.load()
            descriptor = found() if callable(found) and not isinstance(found, BackendDescriptor) else found
            if descriptor.name in _BUILTIN_NAMES and not descriptor.replaces_builtin:
                log.warning("lanenb.backends entry point %r (%s) names the built-in backend %r: ignored (set "
                            "replaces_builtin=True in its BackendDescriptor to replace it)", ep.name, ep.value,
                            descriptor.name)
                continue
            register_descriptor(descriptor)
        except Exception as exc:  # a third party's bug: say which, keep the rest usable
            log.warning("lanenb.backends entry point %r (%s) could not be loaded: %s", ep.name, ep.value, exc)
            continue
        names.append(descriptor.name)
    return names


def descriptors() -> list[BackendDescriptor]:
    """Every backend a ``TrainSpec`` can name, in ``available_backends`` order."""
    load_entry_points()
    return [_DESCRIPTORS[n] for n in available_backends()]


def get_descriptor(name: str) -> BackendDescriptor:
    """The descriptor of backend ``name``.

    Raises:
        BackendError: no such backend; the message lists the available ones.
    """
    load_entry_points()
    try:
        return _DESCRIPTORS[name]
    except (KeyError, TypeError):
        raise BackendError(f"unknown backend {name!r}; available backends: "
                           f"{', '.join(_BACKENDS.names())}") from None


def option_sections() -> dict[str, BackendDescriptor]:
    """``TrainSpec.backend_options`` key -> the descriptor whose options live there."""
    load_entry_points()
    return {d.options_key: d for d in _DESCRIPTORS.values() if d.options is not None}


def available_backends() -> list[str]:
    """The backends a ``TrainSpec`` can name (the launch form's choices)."""
    load_entry_points()
    return [n for n in _BACKENDS.names() if _DESCRIPTORS.get(n) is None or _DESCRIPTORS[n].trains]


def backends_help() -> str:
    """``--backend``'s help: every backend with its one line."""
    return "; ".join(f"{d.name}: {d.summary}" if d.summary else d.name for d in descriptors()) + \
        " (default local)"


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """One argparse group per backend with flags (``<name> options``), dests ``<section>.<option>``."""
    for d in descriptors():
        if not d.flags:
            continue
        group = parser.add_argument_group(f"{d.name} options (--backend {d.name})")
        for flags, kw in d.flags:
            kw = dict(kw, dest=d.flag_dest(kw, flags))
            kw.setdefault("default", None)
            group.add_argument(*flags, **kw)


def _resolve(name: str) -> Factory:
    load_entry_points()
    return _BACKENDS.resolve(name)


def get_backend(name: str, **opts: Any) -> Backend:
    backend = _resolve(name)(**opts)
    if not getattr(backend, "name", ""):
        backend.name = name
    return backend
