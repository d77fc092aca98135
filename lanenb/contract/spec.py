"""``TrainSpec``: one description of a training job that every backend understands.

It is validated at construction so a typo fails in the notebook cell that made it, with a
message naming the field and the bad value, instead of minutes later inside a pod.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from lanenb_trainer.config import BACKBONES, ENGINES  # one list for CLI, spec and trainer
from lanenb_trainer.errors import UserError

from lanenb.errors import SpecError

__all__ = ["SpecError", "VolumeMount", "KubernetesOptions", "TrainSpec", "generate_job_name",
           "ENGINES", "BACKBONES", "PULL_POLICIES", "CLEAN_POD_POLICIES"]

PULL_POLICIES = ("Always", "IfNotPresent", "Never")
CLEAN_POD_POLICIES = ("Running", "All", "None")

# one name rule set for the spec and the Kubernetes backend (kube_rules.name_problem)
from lanenb.kube.rules import RFC1123_LABEL, RFC1123_SUBDOMAIN, name_problem, parse_secret_ref, toleration_problem  # noqa: E402,F401
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Kubernetes resource.Quantity: a decimal number, then a binary/decimal SI suffix or an exponent.
_QUANTITY = re.compile(r"^(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][-+]?\d+)?$")
_RESOURCE_NAME = re.compile(r"^rdma/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


# RUN:AI guide variable -> TrainSpec field (the trainer's ENV_DEFAULTS): `-e BATCH_SIZE=33`
# works as in `runai submit-mpi`. USE_WORKERS/NUM_WORKERS together stand for num_workers.
RUNAI_ENV_FIELDS = {"BATCH_SIZE": "batch_size", "VAL_BATCH_SIZE": "val_batch_size", "USE_VAL": "use_val",
                    "ENABLE_SNAPSHOT": "enable_snapshot", "PVC_NAME": "pvc_name"}


def runai_fields(env: Mapping[str, str]) -> dict[str, tuple[str, Any]]:
    """``TrainSpec`` fields that RUN:AI-guide variables in ``env`` stand for: field -> (variable, raw value)."""
    out: dict[str, tuple[str, Any]] = {name: (var, env[var]) for var, name in RUNAI_ENV_FIELDS.items()
                                       if var in env and str(env[var]).strip() != ""}
    if "USE_WORKERS" in env and str(env["USE_WORKERS"]).strip():
        use = str(env["USE_WORKERS"]).strip().lower() in ("true", "1", "yes", "on")
        out["num_workers"] = ("NUM_WORKERS" if use and "NUM_WORKERS" in env else "USE_WORKERS",
                              env.get("NUM_WORKERS", "2") if use else 0)
    return out


def runai_value(name: str, var: str, raw: Any) -> Any:
    """A RUN:AI variable's value coerced to its field's type (``SpecError`` names the variable)."""
    what = f"environment variable {var}"
    if name in ("use_val", "enable_snapshot"):
        return _bool(what, raw)
    if name == "pvc_name":
        return check_rfc1123_subdomain(what, raw)
    return _int(what, raw, 0 if name == "num_workers" else 1)


def generate_job_name() -> str:
    return f"lane-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


# --------------------------------------------------------------------------- helpers
def check_rfc1123_label(field_name: str, value: Any, max_len: int = 63) -> str:
    problem = name_problem(value, "label", max_len)
    if problem:
        raise SpecError(field_name, value, problem)
    return value


def check_rfc1123_subdomain(field_name: str, value: Any) -> str:
    problem = name_problem(value, "subdomain")
    if problem:
        raise SpecError(field_name, value, problem)
    return value


def _reject_unknown(cls: type, data: Mapping[str, Any], field_name: str, lead: str) -> None:
    """A typo in a restored or hand-written dict must fail loudly, not be dropped."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(field_name, unknown, f"{lead}: {', '.join(sorted(known))}")


def _int(field_name: str, value: Any, minimum: int, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, str) and re.fullmatch(r"[-+]?\d+", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field_name, value, "must be an integer")
    if value < minimum:
        raise SpecError(field_name, value, f"must be >= {minimum}")
    return value


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _bool(field_name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise SpecError(field_name, value, "must be true or false")


def _choice(field_name: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise SpecError(field_name, value, f"must be one of {', '.join(choices)}")
    return value


def _opt_str(field_name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field_name, value, "must be a non-empty string or None")
    return value


def _quantity(field_name: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not _QUANTITY.match(value.strip()):
        raise SpecError(field_name, value, "must be a Kubernetes quantity such as '4', '500m', '16Gi' or '2G'")
    if float(re.match(r"[\d.]+", value.strip()).group()) <= 0:  # type: ignore[union-attr]
        raise SpecError(field_name, value, "must be greater than zero")
    return value.strip()


def _env(field_name: str, value: Any) -> dict[str, str]:
    """Accept a mapping or ``-e K=V`` strings (a list, or a single string)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = [value]
    items: list[tuple[Any, Any]]
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = []
        for entry in value:
            if not isinstance(entry, str) or "=" not in entry:
                raise SpecError(field_name, entry, "must be KEY=VALUE")
            key, _, val = entry.partition("=")
            items.append((key, val))
    else:
        raise SpecError(field_name, value, "must be a dict or a list of KEY=VALUE strings")
    env: dict[str, str] = {}
    for key, val in items:
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise SpecError(field_name, key, "is not a valid environment variable name "
                            "(letters, digits and '_', not starting with a digit)")
        if isinstance(val, bool):
            val = "true" if val else "false"
        if not isinstance(val, (str, int, float)):
            raise SpecError(field_name, {key: val}, "values must be strings")
        env[key] = str(val)
    return env


# --------------------------------------------------------------------------- parts
@dataclass(frozen=True)
class VolumeMount:
    """A PVC mounted into every rank: ``name:/mount[:ro]``."""

    name: str
    mount_path: str
    read_only: bool = False

    def __post_init__(self) -> None:
        check_rfc1123_subdomain("volumes", self.name)
        if not isinstance(self.mount_path, str) or not self.mount_path.startswith("/"):
            raise SpecError("volumes", f"{self.name}:{self.mount_path}", "mount path must be absolute (start with '/')")
        if ":" in self.mount_path:
            raise SpecError("volumes", self.mount_path, "mount path must not contain ':'")

    @classmethod
    def parse(cls, value: "str | VolumeMount | Mapping[str, Any]") -> "VolumeMount":
        if isinstance(value, VolumeMount):
            return value
        if isinstance(value, Mapping):
            try:
                return cls(value["name"], value["mount_path"], _bool("volumes", value.get("read_only", False)))
            except KeyError as exc:
                raise SpecError("volumes", dict(value), f"missing key {exc.args[0]!r}") from None
        if not isinstance(value, str):
            raise SpecError("volumes", value, "must be 'name:/mount' or 'name:/mount:ro'")
        parts = value.split(":")
        if len(parts) == 3 and parts[2] in ("ro", "rw"):
            return cls(parts[0], parts[1], parts[2] == "ro")
        if len(parts) == 2:
            return cls(parts[0], parts[1], False)
        raise SpecError("volumes", value, "must be 'name:/mount' or 'name:/mount:ro'")

    def __str__(self) -> str:
        return f"{self.name}:{self.mount_path}" + (":ro" if self.read_only else "")


@dataclass
class KubernetesOptions:
    """Options only the Kubernetes backend reads; ignored by the local backend."""

    service_account: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    slots_per_worker: int = 1
    clean_pod_policy: str = "Running"
    backoff_limit: int = 0
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    runai_project: str | None = None
    nccl_env: dict[str, str] = field(default_factory=dict)
    rdma_resources: dict[str, int] = field(default_factory=dict)
    context: str | None = None

    def __post_init__(self) -> None:
        p = "k8s."
        if self.service_account is not None:
            check_rfc1123_subdomain(p + "service_account", self.service_account)
        if not isinstance(self.node_selector, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in self.node_selector.items()
        ):
            raise SpecError(p + "node_selector", self.node_selector, "must be a dict of string labels to string values")
        self.node_selector = dict(self.node_selector)
        if not isinstance(self.tolerations, (list, tuple)) or not all(isinstance(t, Mapping) for t in self.tolerations):
            raise SpecError(p + "tolerations", self.tolerations, "must be a list of toleration dicts")
        for tol in self.tolerations:
            problem = toleration_problem(tol)  # the apiserver's rules, before the pod is refused
            if problem:
                raise SpecError(p + "tolerations", dict(tol), problem)
        self.tolerations = [dict(t) for t in self.tolerations]
        self.slots_per_worker = _int(p + "slots_per_worker", self.slots_per_worker, 1)  # type: ignore[assignment]
        _choice(p + "clean_pod_policy", self.clean_pod_policy, CLEAN_POD_POLICIES)
        self.backoff_limit = _int(p + "backoff_limit", self.backoff_limit, 0)  # type: ignore[assignment]
        self.ttl_seconds_after_finished = _int(p + "ttl_seconds_after_finished", self.ttl_seconds_after_finished, 0, optional=True)
        self.active_deadline_seconds = _int(p + "active_deadline_seconds", self.active_deadline_seconds, 1, optional=True)
        if self.runai_project is not None:
            # the namespace becomes runai-<project>, which must stay a valid label
            check_rfc1123_label(p + "runai_project", self.runai_project, max_len=63 - len("runai-"))
        self.nccl_env = _env(p + "nccl_env", self.nccl_env)
        for key in self.nccl_env:
            if not key.startswith("NCCL_"):
                raise SpecError(p + "nccl_env", key, "only NCCL_* variables pass through here; use env for others")
        if not isinstance(self.rdma_resources, Mapping):
            raise SpecError(p + "rdma_resources", self.rdma_resources, "must be a dict like {'rdma/shared_ib': 1}")
        rdma: dict[str, int] = {}
        for key, count in self.rdma_resources.items():
            if not isinstance(key, str) or not _RESOURCE_NAME.match(key):
                raise SpecError(p + "rdma_resources", key, "resource names must look like 'rdma/shared_ib'")
            rdma[key] = _int(p + f"rdma_resources[{key}]", count, 1)  # type: ignore[assignment]
        self.rdma_resources = rdma
        self.context = _opt_str(p + "context", self.context)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: "Mapping[str, Any] | KubernetesOptions | None") -> "KubernetesOptions":
        if data is None:
            return cls()
        if isinstance(data, KubernetesOptions):
            return data
        if not isinstance(data, Mapping):
            raise SpecError("k8s", data, "must be a KubernetesOptions or a dict of its fields")
        _reject_unknown(cls, data, "k8s", "unknown option(s); known")
        return cls(**data)


# --------------------------------------------------------------------------- the spec
@dataclass
class TrainSpec:
    """Everything needed to run one training job, on any backend."""

    dataset: str
    processes: int = 2
    gpus: int = 0
    batch_size: int = 8
    epochs: int = 1
    engine: str = "auto"
    backbone: str = "small"
    image: str | None = None
    image_pull_policy: str = "IfNotPresent"
    volumes: list[VolumeMount] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    large_shm: bool = False
    cpu: str | None = None
    memory: str | None = None
    enable_snapshot: bool = False
    pvc_name: str | None = None
    name: str | None = None
    backend: str = "local"
    namespace: str | None = None  # Kubernetes: None = the kubeconfig context's (or the pod's) namespace
    run_dir: str | None = None
    extra_args: list[str] = field(default_factory=list)
    max_steps: int | None = None
    num_workers: int = 0
    use_val: bool = True
    val_batch_size: int | None = None
    k8s: KubernetesOptions = field(default_factory=KubernetesOptions)

    def __post_init__(self) -> None:
        self.check(first=True)

    def check(self, first: bool = False) -> list[SpecError]:
        """Coerce and check every field; raise the first problem (``first``) or return them all.

        Each step checks one field (or one cross-field rule) so a form can show every problem
        at once (``lanenb.contract.validate``) while the constructor still fails on the first.
        """
        errors: list[SpecError] = []
        for step in self._steps():
            try:
                step()
            except SpecError as exc:
                if first:
                    raise
                errors.append(exc)
        return errors

    def _steps(self) -> list[Any]:
        def dataset() -> None:
            if hasattr(self.dataset, "__fspath__"):
                self.dataset = str(self.dataset)
            if not isinstance(self.dataset, str) or not self.dataset.strip():
                raise SpecError("dataset", self.dataset, "must be a non-empty path to a TuSimple-layout directory")

        def ints() -> list[Any]:
            def one(name: str, minimum: int, optional: bool = False) -> Any:
                return lambda: setattr(self, name, _int(name, getattr(self, name), minimum, optional=optional))
            return [one("processes", 1), one("gpus", 0), one("batch_size", 1), one("epochs", 1),
                    one("max_steps", 0, True), lambda: setattr(self, "max_steps", self.max_steps or None), one("num_workers", 0), one("val_batch_size", 1, True)]

        def image() -> None:
            self.image = _opt_str("image", self.image)
            if self.image is not None and any(c.isspace() for c in self.image):
                raise SpecError("image", self.image, "must not contain whitespace")

        def volumes() -> None:
            if isinstance(self.volumes, (str, VolumeMount)):
                self.volumes = [self.volumes]  # type: ignore[list-item]
            if not isinstance(self.volumes, (list, tuple)):
                raise SpecError("volumes", self.volumes, "must be a list of 'name:/mount[:ro]' strings")
            self.volumes = [VolumeMount.parse(v) for v in self.volumes]
            paths = [v.mount_path for v in self.volumes]
            dup = sorted({p for p in paths if paths.count(p) > 1})
            if dup:
                raise SpecError("volumes", dup[0], "two volumes are mounted at the same path")

        def setter(name: str, coerce: Any) -> Any:
            return lambda: setattr(self, name, coerce(name, getattr(self, name)))

        def runai_env() -> None:
            # RUN:AI-guide variables in env (-e BATCH_SIZE=33) are honoured, never silently
            # overridden by the explicit trainer flags: a field still at its default takes the
            # variable's value; a field set to something else is a conflict.
            if not isinstance(self.env, dict):
                return
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            for name, (var, raw) in runai_fields(self.env).items():
                value = runai_value(name, var, raw)
                current = getattr(self, name)
                if name == "use_val":
                    current = _bool("use_val", current)
                if current == value:
                    continue
                if current == defaults[name]:
                    setattr(self, name, value)
                    continue
                raise SpecError(name, current, f"conflicts with the environment variable {var}={raw!r} in env: "
                                f"set one of them (or both to the same value)")

        def secret_refs() -> None:
            if not isinstance(self.env, dict):
                return
            for key, value in self.env.items():
                try:
                    ref = parse_secret_ref(value)
                except ValueError as exc:
                    raise SpecError("env", f"{key}={value}", str(exc)) from None
                if ref and self.backend != "kubernetes":
                    raise SpecError("env", f"{key}={value}", "secret:NAME/KEY reads a Kubernetes Secret: it needs "
                                    "backend='kubernetes' (locally, export the variable in the shell instead)")

        def snapshot() -> None:
            if self.pvc_name is not None:
                check_rfc1123_subdomain("pvc_name", self.pvc_name)
            if self.enable_snapshot is True and self.pvc_name is None and self.backend != "local":
                raise SpecError("pvc_name", None, "is required when enable_snapshot is true (the PVC to snapshot)")

        def name() -> None:
            if self.name is None:
                self.name = generate_job_name()
            check_rfc1123_label("name", self.name)

        def backend() -> None:
            from lanenb.contract.backends import available_backends

            _choice("backend", self.backend, available_backends())

        def run_dir() -> None:
            if hasattr(self.run_dir, "__fspath__"):
                self.run_dir = str(self.run_dir)
            self.run_dir = _opt_str("run_dir", self.run_dir)

        def extra_args() -> None:
            if isinstance(self.extra_args, str):
                raise SpecError("extra_args", self.extra_args, "must be a list of strings (one argv item each), not one string")
            if not isinstance(self.extra_args, (list, tuple)) or not all(isinstance(a, str) for a in self.extra_args):
                raise SpecError("extra_args", self.extra_args, "must be a list of strings")
            self.extra_args = list(self.extra_args)

        def k8s() -> None:
            self.k8s = KubernetesOptions.from_dict(self.k8s)  # type: ignore[arg-type]

        def local_gpus() -> None:
            if self.backend == "local" and isinstance(self.gpus, int) and self.gpus:
                import shutil

                if shutil.which("nvidia-smi") is None:
                    raise SpecError("gpus", self.gpus, "no NVIDIA GPU found on this machine (nvidia-smi missing); "
                                    "use gpus=0 locally or backend='kubernetes'")

        return [
            dataset, *ints(),
            lambda: _choice("engine", self.engine, ENGINES),
            lambda: _choice("backbone", self.backbone, BACKBONES),
            image,
            lambda: _choice("image_pull_policy", self.image_pull_policy, PULL_POLICIES),
            volumes, setter("env", _env), setter("large_shm", _bool), setter("cpu", _quantity),
            setter("memory", _quantity), setter("enable_snapshot", _bool), runai_env, snapshot, name, backend,
            secret_refs,
            lambda: self.namespace is None or check_rfc1123_label("namespace", self.namespace), run_dir, extra_args,
            setter("use_val", _bool), k8s, local_gpus,
        ]

    # ----------------------------------------------------------------- trainer flags
    def trainer_args(self, run_dir: str | None = None) -> list[str]:
        """The ``python -m lanenb_trainer`` flags (without the interpreter/module part).

        Every value is explicit, so RUN:AI-style env vars on the ranks cannot silently
        override what the spec says; ``extra_args`` come last and win.
        """
        from lanenb.launch.mpirun import trainer_argv

        return trainer_argv(
            data=self.dataset,
            run_dir=run_dir or self.run_dir,
            epochs=self.epochs,
            batch_size=self.batch_size,
            engine=self.engine,
            backbone=self.backbone,
            use_workers=self.num_workers > 0,
            num_workers=self.num_workers or None,
            use_val=self.use_val,
            val_batch_size=self.val_batch_size,
            max_steps=self.max_steps,
            # locally the supervisor snapshots run dir + dataset; the ranks only hear of a PVC
            enable_snapshot=(self.enable_snapshot and self.pvc_name is not None) or None,
            pvc_name=self.pvc_name if self.enable_snapshot else None,
        ) + list(self.extra_args)

    # ----------------------------------------------------------------- JSON round-trip
    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["volumes"] = [str(v) for v in self.volumes]
        data["env"] = dict(self.env)
        data["extra_args"] = list(self.extra_args)
        data["k8s"] = self.k8s.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainSpec":
        if not isinstance(data, Mapping):
            raise SpecError("spec", data, "must be a dict of TrainSpec fields")
        _reject_unknown(cls, data, "spec", "unknown field(s); known fields")
        if "dataset" not in data:
            raise SpecError("dataset", None, "is required")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> "TrainSpec":
        return dataclasses.replace(self, **changes)
