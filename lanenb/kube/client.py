"""Connecting to the cluster: kubeconfig contexts or in-cluster config, and retries.

Every API call goes through ``call`` so a busy or restarting apiserver (429, 5xx, dropped
connections, timeouts) is retried with backoff, and an unreachable one becomes one clear
error naming the server and the context instead of a urllib3 traceback. Every call has a
request timeout (``Clients.timeout``), so a black-holed connection cannot hang a notebook.

The namespace a job goes to when its spec names none is the one ``kubectl`` would use: the
kubeconfig context's ``namespace`` (every ``KUBECONFIG`` entry merged, as kubectl does), or in
a pod the service account's namespace, else ``default``.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from lanenb_trainer.errors import UserError

__all__ = [
    "KubernetesError", "KubernetesConfigError", "KubernetesUnreachableError", "KubernetesAPIError",
    "OperatorNotInstalledError", "RetryPolicy", "Clients", "ClientCache", "load_clients", "RETRYABLE_STATUS",
    "MPIJOB_GROUP", "MPIJOB_VERSION", "MPIJOB_PLURAL", "INSTALL_HINT", "DEFAULT_TIMEOUT", "SERVICE_ACCOUNT_NAMESPACE",
    "kubeconfig_paths",
]

MPIJOB_GROUP, MPIJOB_VERSION, MPIJOB_PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for every call that does not stream
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
INSTALL_HINT = (
    "a cluster admin can install the Kubeflow MPI Operator v0.8.2 with "
    "`kubectl apply --server-side -k deploy/mpi-operator` (see deploy/README.md in the lanenb repository)"
)

T = TypeVar("T")


class KubernetesError(UserError, RuntimeError):
    """Anything the Kubernetes backend cannot do, explained for the person at the notebook."""


class KubernetesConfigError(KubernetesError):
    """No usable kubeconfig / context / in-cluster credentials."""


class KubernetesUnreachableError(KubernetesError):
    """The API server did not answer (DNS, refused connection, VPN down, timeouts)."""


class OperatorNotInstalledError(KubernetesError):
    """The cluster does not serve kubeflow.org/v2beta1 mpijobs."""


class KubernetesAPIError(KubernetesError):
    """The API server refused a request; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int | None = None, body: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; ``attempts`` counts the first try."""

    attempts: int = 5
    base_delay: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after), self.max_delay)
        return min(self.max_delay, self.base_delay * (2 ** attempt)) * (0.5 + random.random() / 2)


def _is_transport_error(exc: BaseException) -> bool:
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError, OSError))


@dataclass
class Clients:
    """The API objects for one cluster/context, plus where they point (for messages)."""

    api: k8s.ApiClient
    host: str
    context: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    namespace: str = "default"  # where jobs go when the spec names no namespace
    kubeconfig: str | None = None  # the KUBECONFIG-style path list these clients were loaded from
    timeout: tuple[float, float] = DEFAULT_TIMEOUT

    @property
    def batch(self) -> k8s.BatchV1Api:
        return k8s.BatchV1Api(self.api)

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    @property
    def networking(self) -> k8s.NetworkingV1Api:
        return k8s.NetworkingV1Api(self.api)

    def where(self) -> str:
        return f"{self.host}" + (f" (context {self.context!r})" if self.context else "")

    def raw(self, fn: Callable[..., Any], *args: Any, what: str = "the request",
            **kwargs: Any) -> urllib3.BaseHTTPResponse:
        """``call`` with ``_preload_content=False``: the HTTP response itself, unparsed.

        For log streams, and for objects read as plain JSON dicts (the form lanenb reads
        everywhere) instead of the client's model classes; typed as what it is, since the
        client's annotations name the model class whatever ``_preload_content`` says.
        """
        return self.call(fn, *args, what=what, _preload_content=False, **kwargs)

    def delete_mpijob(self, namespace: str, name: str, uid: str | None = None) -> None:
        """Delete an MPIJob, its pods first (Foreground). With ``uid`` the delete carries it as a
        precondition, so the API server itself refuses (409) to delete another MPIJob that took
        the name after ours was gone. ``ApiException`` 404 / 409 reach the caller, which knows
        what "gone" means to it; 401/403 and retries as :meth:`call`."""
        options = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid)) if uid else None
        self.call(self.custom.delete_namespaced_custom_object, MPIJOB_GROUP, MPIJOB_VERSION, namespace,
                  MPIJOB_PLURAL, name, propagation_policy="Foreground", body=options,
                  what=f"deleting MPIJob {namespace}/{name}")

    def call(self, fn: Callable[..., T], *args: Any, what: str = "the request", **kwargs: Any) -> T:
        """Run one API call with retries on 429/5xx/transport errors; map the rest to our errors.
        Calls without their own ``_request_timeout`` get ``self.timeout``."""
        kwargs.setdefault("_request_timeout", self.timeout)
        last: BaseException | None = None
        for attempt in range(self.retry.attempts):
            try:
                return fn(*args, **kwargs)
            except ApiException as exc:
                if exc.status in RETRYABLE_STATUS and attempt + 1 < self.retry.attempts:
                    last = exc
                    headers = exc.headers or {}
                    time.sleep(self.retry.delay(attempt, headers.get("Retry-After")))
                    continue
                if exc.status == 401:
                    raise KubernetesAPIError(
                        f"the API server at {self.where()} rejected our credentials for {what} (401): "
                        "refresh the kubeconfig (expired token or certificate?)", 401, exc.body) from exc
                if exc.status == 403:
                    raise KubernetesAPIError(
                        f"not allowed: {what} on {self.where()} was refused (403 Forbidden). A cluster admin can "
                        "grant it with deploy/rbac-submitter.yaml in your namespace", 403, exc.body) from exc
                raise
            except Exception as exc:  # urllib3 / socket errors
                if not _is_transport_error(exc):
                    raise
                last = exc
                if attempt + 1 < self.retry.attempts:
                    time.sleep(self.retry.delay(attempt))
                    continue
        if isinstance(last, ApiException):
            raise last
        raise KubernetesUnreachableError(
            f"cannot reach the Kubernetes API server at {self.where()} for {what} after "
            f"{self.retry.attempts} attempts: {_short(last)}. Check that the cluster is up, your VPN/network, "
            "and `kubectl config current-context` (or pass context=...)."
        ) from last


def _short(exc: BaseException | None) -> str:
    if exc is None:
        return "no answer"
    reason = getattr(exc, "reason", None)
    return f"{type(exc).__name__}: {reason or exc}"


def kubeconfig_paths(kubeconfig: str | os.PathLike[str] | None = None) -> list[str]:
    """The kubeconfig files kubectl would read: ``kubeconfig`` (itself a ``KUBECONFIG``-style
    list), else every ``KUBECONFIG`` entry, else ``~/.kube/config``; user-expanded, in order."""
    raw = os.fspath(kubeconfig) if kubeconfig is not None else os.environ.get("KUBECONFIG") or "~/.kube/config"
    return [os.path.expanduser(p) for p in str(raw).split(os.pathsep) if p.strip()]


def _service_account_namespace() -> str:
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as fh:
            return fh.read().strip() or "default"
    except OSError:
        return "default"


def load_clients(
    context: str | None = None,
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    in_cluster: bool | None = None,
    retry: RetryPolicy | None = None,
    timeout: tuple[float, float] | None = None,
) -> Clients:
    """Build clients from a kubeconfig context, or from the pod's service account.

    ``in_cluster=None`` means: use the service account when running inside a pod
    (KUBERNETES_SERVICE_HOST set) and no kubeconfig/context was asked for explicitly.
    ``timeout`` is the (connect, read) limit of every non-streaming call.
    """
    retry = retry or RetryPolicy()
    timeout = timeout or DEFAULT_TIMEOUT
    if in_cluster is None:
        in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and kubeconfig is None and context is None \
            and not os.environ.get("KUBECONFIG") and not os.path.exists(os.path.expanduser("~/.kube/config"))
    if in_cluster:
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise KubernetesConfigError(f"in-cluster Kubernetes config is not usable: {exc}") from exc
        return Clients(k8s.ApiClient(configuration), configuration.host, None, retry,
                       namespace=_service_account_namespace(), timeout=timeout)

    paths = kubeconfig_paths(kubeconfig)
    if not any(os.path.exists(p) for p in paths):
        raise KubernetesConfigError(
            f"no kubeconfig at {os.pathsep.join(paths)}: set KUBECONFIG, pass kubeconfig=..., or copy the cluster's "
            "config (e.g. `az aks get-credentials ...`) to ~/.kube/config"
        )
    joined = os.pathsep.join(paths)  # the client merges every entry, as kubectl does
    try:
        contexts, active = k8s_config.list_kube_config_contexts(config_file=joined)
    except ConfigException as exc:
        raise KubernetesConfigError(f"kubeconfig {joined} is not usable: {exc}") from exc
    names = [c["name"] for c in contexts or []]
    if context is not None and context not in names:
        raise KubernetesConfigError(
            f"context {context!r} is not in kubeconfig {joined}; available contexts: {', '.join(names) or 'none'}"
        )
    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config(config_file=joined, context=context, client_configuration=configuration)
    except ConfigException as exc:
        raise KubernetesConfigError(f"kubeconfig {joined}, context {context or active.get('name')!r}: {exc}") from exc
    # A few quick urllib3 retries for a flapping connection; our own loop does the backoff.
    configuration.retries = urllib3.Retry(total=1, connect=1, read=0, backoff_factor=0.05)
    chosen = context or (active or {}).get("name")
    entry = next((c for c in contexts or [] if c["name"] == chosen), None) or active or {}
    namespace = ((entry.get("context") or {}).get("namespace")) or "default"
    return Clients(k8s.ApiClient(configuration), configuration.host, chosen, retry, namespace=namespace,
                   kubeconfig=joined, timeout=timeout)


class ClientCache:
    """Clients per (context, kubeconfig), loaded on first use: what every Kubernetes backend keeps.

    The defaults are the backend's own ``context``/``kubeconfig``, then kubectl's. A job's handle
    names the context and kubeconfig it was sent with, so ``get_job`` in a new kernel reaches the
    same cluster; loaded clients are also filed under the context they resolved to.
    """

    def __init__(self, context: str | None = None, kubeconfig: str | os.PathLike[str] | None = None, *,
                 in_cluster: bool | None = None, retry: RetryPolicy | None = None,
                 timeout: tuple[float, float] | None = None, clients: Clients | None = None) -> None:
        self.context = context
        self.kubeconfig = os.fspath(kubeconfig) if kubeconfig is not None else None
        self._in_cluster, self._retry, self._timeout = in_cluster, retry, timeout
        self._cache: dict[tuple[str | None, str | None], Clients] = {}
        if clients is not None:  # injected (tests, notebooks that already hold one)
            self._cache[(context, self.kubeconfig)] = clients

    def get(self, context: str | None = None, kubeconfig: str | None = None) -> Clients:
        context = context or self.context
        kubeconfig = kubeconfig or self.kubeconfig
        key = (context, kubeconfig)
        if key not in self._cache:
            if self._cache and context is None and kubeconfig is None:
                return next(iter(self._cache.values()))
            loaded = load_clients(context, kubeconfig, in_cluster=self._in_cluster, retry=self._retry,
                                  timeout=self._timeout)
            self._cache[key] = loaded
            self._cache.setdefault((loaded.context, kubeconfig), loaded)  # handles name the resolved context
            self._cache.setdefault((loaded.context, loaded.kubeconfig), loaded)
        return self._cache[key]
