"""``TrainSpec``: one description of a training job that every backend understands.

It is validated at construction so a typo fails in the notebook cell that made it, with a
message naming the field and the bad value, instead of minutes later inside a pod. This module
holds the fields and the order they are checked in; how a raw value becomes a field's value is
``fields.py`` (the coercers), RUN:AI variables in ``env`` are ``runai_env.py``, and the parts
are ``volumes.py`` (``VolumeMount``). What only one backend reads lives in ``backend_options``,
checked by that backend's descriptor (``lanenb.contract.backends``): this module names no backend.
"""

from __future__ import annotations

import dataclasses
import functools
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lanenb.contract.backends import BackendError, available_backends, get_descriptor, option_sections
from lanenb.contract.descriptor import Capabilities
from lanenb.contract.fields import (
    check_choice,
    check_rfc1123_label,
    check_rfc1123_subdomain,
    coerce_bool,
    coerce_env,
    coerce_int,
    coerce_labels,
    coerce_opt_str,
    coerce_quantity,
    reject_unknown,
)
from lanenb.contract.runai_env import RUNAI_ENV_FIELDS, runai_fields, runai_value
from lanenb.contract.volumes import VolumeMount
from lanenb.errors import SpecError
from lanenb.kube.rules import parse_secret_ref
from lanenb_trainer.config import (  # one list for CLI, spec and trainer
    BACKBONES,
    ENGINES,
    TrainConfig,
    global_batch,
    setting_choices,
    setting_minimum,
)
from lanenb_trainer.flags import to_flags

__all__ = ["SpecError", "VolumeMount", "TrainSpec", "TRAINER_FIELDS", "generate_job_name", "ENGINES", "BACKBONES",
           "PULL_POLICIES"]

PULL_POLICIES = ("Always", "IfNotPresent", "Never")


def generate_job_name() -> str:
    """``lane-<date>-<time>-<4 hex>``: sortable by start, unique enough for one user's jobs."""
    return f"lane-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


# The trainer's defaults: a job field that is a trainer setting takes its default from here, so
# the two never drift (max_steps None and val_batch_size None mean "the trainer's").
_TRAINER = TrainConfig()


# the fields RUN:AI variables stand for (runai_env.py; the worker pair stands for num_workers): each
# takes its variable's value unless given explicitly (``TrainSpec._given``), whatever the value given
_RUNAI_FIELDS = (*RUNAI_ENV_FIELDS.values(), "num_workers")


@dataclass
class TrainSpec:
    """Everything needed to run one training job, on any backend (``submit(spec)``).

    Strings are accepted where YAML or a form gives them (``batch_size="4"``, ``use_val="false"``)
    and coerced; every field is checked when the spec is made.

    Args:
        dataset: TuSimple-layout dataset root, as the ranks see it (under a ``volumes`` mount
            on Kubernetes). Required.
        processes: MPI ranks (``runai --processes``).
        gpus: GPUs per process. The ranks get ``--device cuda`` for 1 or more (a run whose
            ranks see no GPU fails at start instead of training on the CPU). 0 on Kubernetes
            means ``--device cpu`` (a GPU the pod did not request belongs to another job);
            locally and on AzureML 0 leaves the choice to the trainer (``auto``: a GPU per rank
            where torch sees one, as any PyTorch script on that machine; ``--device cpu`` in
            the trainer flags forces the CPU). The backend's ``Capabilities.gpus_optional`` says which.
        batch_size: per rank; the global batch is ``processes x batch_size``.
        epochs: passes over the training split.
        engine: ``auto`` (Horovod when importable), ``horovod`` or ``ddp``.
        backbone: a backbone of the model registry: small, vgg16, resnet18, resnet34.
        image: the trainer's container image (Kubernetes; AzureML without ``azureml.environment``).
        image_pull_policy: Always, IfNotPresent or Never.
        volumes: PVCs to mount in every rank, ``"name:/mount[:ro]"`` (``runai --pvc``).
        env: variables for every rank, a dict or ``KEY=VALUE`` strings (``runai -e``);
            ``KEY=secret:NAME/KEY`` reads a Kubernetes Secret; RUN:AI variables
            (``BATCH_SIZE`` ...) set their fields.
        large_shm: a large ``/dev/shm`` for loader workers (Kubernetes).
        cpu, memory: per-rank requests as Kubernetes quantities (``"4"``, ``"16Gi"``).
        enable_snapshot: snapshot after a successful run (on Kubernetes the PVC ``pvc_name``;
            locally the run directory and dataset).
        pvc_name: the PVC to snapshot.
        name: the job name, an RFC 1123 label (default ``lane-<time>-<random>``).
        backend: where it runs: ``local``, ``kubernetes``, ``azureml`` or an installed plug-in
            (``available_backends()``).
        namespace: Kubernetes namespace (None: the kubeconfig context's, or the pod's).
        run_dir: where rank 0 writes (None: the backend's default).
        extra_args: more trainer flags, one argv item each (``["--lr", "0.02"]``); they come
            last and win.
        max_steps: stop after this many global steps (None or 0: no limit).
        num_workers: DataLoader workers per rank (0: load in the rank's process).
        use_val: hold out a validation split and evaluate each epoch.
        val_batch_size: validation batch (None: the trainer's default).
        max_restarts: local backend: start the ranks again, up to this many times, after a
            preemption (a SIGTERM to a rank: every rank checkpoints and exits 75) or a rank
            killed by a signal; each start continues from the run's last checkpoint (the ranks
            get ``--run-id <name>``). Never after an error. On Kubernetes the MPIJob's
            ``k8s.backoff_limit`` does this.
        labels: ``{key: value}`` the job carries wherever its backend keeps labels: on the
            MPIJob and its pods (``kubectl get mpijobs -l KEY=VALUE``), as AzureML job tags,
            in the registry row. Keys and values follow Kubernetes' label rules (a sweep labels
            its trials ``lanenb.io/sweep`` and ``lanenb.io/trial``).
        backend_options: each backend's own options, by its descriptor's section: ``{"k8s":
            {...}}`` (:class:`KubernetesOptions`), ``{"azureml": {"compute": ...}}``
            (:class:`AzureMLOptions`), ``{"<section>": {...}}`` for a plug-in. Each section is checked
            by its backend's options class; the chosen backend's section is always there.
            A section may also be given as its own keyword (``TrainSpec(..., k8s={...})``) and
            read as an attribute (``spec.k8s``), as before the descriptors.

    Raises:
        SpecError: the first bad field (``check(first=False)`` or ``validate`` lists all),
            naming the field and the value.
    """

    dataset: str
    processes: int = 2
    gpus: int = 0
    # the trainer's settings default as the trainer does: one default each, in TrainConfig
    batch_size: int = _TRAINER.batch_size
    epochs: int = _TRAINER.epochs
    engine: str = _TRAINER.engine
    backbone: str = _TRAINER.backbone
    image: str | None = None
    image_pull_policy: str = "IfNotPresent"
    volumes: list[VolumeMount] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    large_shm: bool = False
    cpu: str | None = None
    memory: str | None = None
    enable_snapshot: bool = _TRAINER.enable_snapshot
    pvc_name: str | None = None
    name: str | None = None
    backend: str = "local"
    namespace: str | None = None  # Kubernetes: None = the kubeconfig context's (or the pod's) namespace
    run_dir: str | None = None
    extra_args: list[str] = field(default_factory=list)
    max_steps: int | None = None
    num_workers: int = 0
    use_val: bool = _TRAINER.use_val
    val_batch_size: int | None = None
    max_restarts: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    backend_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.check(first=True)

    def __getattr__(self, name: str) -> Any:
        """``spec.<section>`` (``spec.k8s``): a backend's options, its defaults when not given."""
        opts = self.__dict__.get("backend_options")
        if opts is None or name.startswith("__"):
            raise AttributeError(name)
        if name in opts:
            return opts[name]
        descriptor = option_sections().get(name)
        if descriptor is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return descriptor.make_options(None)

    def options(self, section: str) -> Any:
        """The options in ``section`` (a backend's descriptor section): what was given, or the
        options class's defaults."""
        return getattr(self, section)

    @staticmethod
    def field_defaults() -> dict[str, Any]:
        """Each field's default as a value (``dataset`` has none): what forms and ``--help`` show."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(TrainSpec):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
        return out

    @staticmethod
    def fold_sections(data: Mapping[str, Any]) -> dict[str, Any]:
        """``data`` with backend option sections given at the top level (``k8s=``, a registry
        row written before ``backend_options``) moved into ``backend_options``."""
        out = dict(data)
        names = {f.name for f in dataclasses.fields(TrainSpec)}
        loose = {k: out.pop(k) for k in list(out) if k not in names and k in option_sections()}
        if loose:
            given = out.get("backend_options")
            out["backend_options"] = {**(dict(given) if isinstance(given, Mapping) else {}), **loose}
        return out

    @property
    def global_batch(self) -> int:
        """Images per optimizer step over all ranks: ``processes x batch_size``."""
        return global_batch(self.batch_size, self.processes)

    def check(self, first: bool = False) -> list[SpecError]:
        """Coerce and check every field; raise the first problem (``first``) or return them all.

        Each check covers one field (or one cross-field rule) so a form can show every problem
        at once (``lanenb.contract.validate``) while the constructor still fails on the first.
        """
        errors: list[SpecError] = []
        for check in self._checks():
            try:
                check()
            except SpecError as exc:
                if first:
                    raise
                errors.append(exc)
        return errors

    # ----------------------------------------------------------------- the checks
    def _checks(self) -> list[Callable[[], Any]]:
        """Every check, in the order problems are reported. ``coerce(name, fn, *args)`` stores
        ``fn(name, value, *args)``; the ``_check_*`` methods are the rules that need more."""
        coerce = self._coerce
        return [
            self._check_dataset, coerce("env", coerce_env), self._apply_runai_env,
            coerce("processes", coerce_int, 1), coerce("gpus", coerce_int, 0),
            *self._trainer_setting_checks(), self._max_steps_zero_is_none,
            coerce("max_restarts", coerce_int, 0),
            self._check_image, coerce("image_pull_policy", check_choice, PULL_POLICIES),
            self._check_volumes, coerce("large_shm", coerce_bool),
            coerce("cpu", coerce_quantity), coerce("memory", coerce_quantity),
            coerce("enable_snapshot", coerce_bool),
            self._check_snapshot, self._check_name, self._check_backend,
            self._check_secret_refs, self._check_namespace, self._check_run_dir, self._check_extra_args,
            coerce("use_val", coerce_bool), coerce("labels", coerce_labels), self._check_backend_options,
        ]

    def _trainer_setting_checks(self) -> list[Callable[[], None]]:
        """The job's trainer settings checked by the bound or choices their ``TrainConfig`` field
        declares (``setting``): one rule each, written once, in the trainer. A field whose job
        default is None (``max_steps``, ``val_batch_size``: the trainer's own) may stay None."""
        checks = []
        defaults = self.field_defaults()
        for field_name, setting in TRAINER_FIELDS.items():
            minimum, choices = setting_minimum(setting), setting_choices(setting)
            if minimum is not None:
                checks.append(self._coerce(field_name, coerce_int, minimum, optional=defaults[field_name] is None))
            elif choices is not None:
                checks.append(self._coerce(field_name, check_choice, choices))
        return checks

    def _coerce(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], None]:
        return lambda: setattr(self, name, fn(name, getattr(self, name), *args, **kwargs))

    def _check_dataset(self) -> None:
        if hasattr(self.dataset, "__fspath__"):
            self.dataset = str(self.dataset)
        if not isinstance(self.dataset, str) or not self.dataset.strip():
            raise SpecError("dataset", self.dataset, "must be a non-empty path to a TuSimple-layout directory")

    def _max_steps_zero_is_none(self) -> None:
        self.max_steps = self.max_steps or None  # 0 is the trainer's "no limit", as None

    def _check_image(self) -> None:
        self.image = coerce_opt_str("image", self.image)
        if self.image is not None and any(c.isspace() for c in self.image):
            raise SpecError("image", self.image, "must not contain whitespace")

    def _check_volumes(self) -> None:
        if isinstance(self.volumes, (str, VolumeMount)):
            self.volumes = [self.volumes]
        if not isinstance(self.volumes, (list, tuple)):
            raise SpecError("volumes", self.volumes, "must be a list of 'name:/mount[:ro]' strings")
        self.volumes = [VolumeMount.parse(v) for v in self.volumes]
        paths = [v.mount_path for v in self.volumes]
        dup = sorted({p for p in paths if paths.count(p) > 1})
        if dup:
            raise SpecError("volumes", dup[0], "two volumes are mounted at the same path")

    def _apply_runai_env(self) -> None:
        """The one RUN:AI rule: a variable in env (``-e BATCH_SIZE=33``) sets a field that was
        not given; a field given explicitly that disagrees with it is a conflict naming both,
        whether or not the given value equals the default (``batch_size=8`` beside
        ``BATCH_SIZE=33``). The variables reach the ranks too, where the explicit flags win
        (``trainer_args``), so both always agree."""
        given = runai_fields(self.env) if isinstance(self.env, dict) else {}
        explicit = self.__dict__.get("_given", frozenset(_RUNAI_FIELDS))
        for name in _RUNAI_FIELDS:
            if name not in given:
                continue
            var, raw = given[name]
            value = runai_value(name, var, raw)
            if name not in explicit:
                setattr(self, name, value)
                continue
            current = getattr(self, name)
            try:
                same = (runai_value(name, name, current) if current is not None else None) == value
            except SpecError:
                same = False  # a bad value: the conflict names it (the field's own check would too)
            if not same:
                raise SpecError(name, current, f"conflicts with the environment variable {var}={raw!r} in env: "
                                "set one of them (or both to the same value)")

    def _check_snapshot(self) -> None:
        if self.pvc_name is not None:
            check_rfc1123_subdomain("pvc_name", self.pvc_name)
        if self.enable_snapshot is True and self.pvc_name is None and self._capability("snapshot_needs_pvc"):
            raise SpecError("pvc_name", None, "is required when enable_snapshot is true (the PVC to snapshot)")

    def _check_name(self) -> None:
        if self.name is None:
            self.name = generate_job_name()
        check_rfc1123_label("name", self.name)

    def _check_backend(self) -> None:
        check_choice("backend", self.backend, available_backends())

    def _check_secret_refs(self) -> None:
        if not isinstance(self.env, dict):
            return
        for key, value in self.env.items():
            try:
                ref = parse_secret_ref(value)
            except ValueError as exc:
                raise SpecError("env", f"{key}={value}", str(exc)) from None
            if ref and not self._capability("secret_refs"):
                raise SpecError("env", f"{key}={value}", "secret:NAME/KEY reads a Kubernetes Secret: it needs "
                                "backend='kubernetes' (locally, export the variable in the shell instead)")

    def _check_namespace(self) -> None:
        if self.namespace is not None:
            check_rfc1123_label("namespace", self.namespace)

    def _check_run_dir(self) -> None:
        if hasattr(self.run_dir, "__fspath__"):
            self.run_dir = str(self.run_dir)
        self.run_dir = coerce_opt_str("run_dir", self.run_dir)

    def _check_extra_args(self) -> None:
        if isinstance(self.extra_args, str):
            raise SpecError("extra_args", self.extra_args,
                            "must be a list of strings (one argv item each), not one string")
        if not isinstance(self.extra_args, (list, tuple)) or not all(isinstance(a, str) for a in self.extra_args):
            raise SpecError("extra_args", self.extra_args, "must be a list of strings")
        self.extra_args = list(self.extra_args)

    def _descriptor(self) -> Any:
        """The chosen backend's descriptor, or None for a name ``_check_backend`` refuses."""
        try:
            return get_descriptor(self.backend)
        except BackendError:
            return None

    def _capability(self, name: str) -> Any:
        descriptor = self._descriptor()
        return getattr(descriptor.capabilities if descriptor else Capabilities(), name)

    def _check_backend_options(self) -> None:
        """Each given section through its options class; the chosen backend's section always
        (its defaults when not given), then the backend's own spec check. A section of a
        backend that is not installed here is kept as given (a registry row from another machine)."""
        if not isinstance(self.backend_options, Mapping):
            raise SpecError("backend_options", self.backend_options,
                            "must be a dict of backend option sections, e.g. {'k8s': {...}}")
        sections = option_sections()
        options = dict(self.backend_options)
        descriptor = self._descriptor()
        if descriptor is not None and descriptor.options is not None:
            options.setdefault(descriptor.options_key, None)
        for key, value in options.items():
            if key in sections:
                options[key] = sections[key].make_options(value)
        self.backend_options = options
        if descriptor is not None:
            descriptor.check_spec(self)

    # ----------------------------------------------------------------- trainer flags
    def _trainer_device(self) -> str | None:
        """``--device`` for the ranks (None: the trainer's ``auto``)."""
        if self.gpus:
            return "cuda"
        return None if self._capability("gpus_optional") else "cpu"

    def trainer_args(self, run_dir: str | None = None) -> list[str]:
        """The ``python -m lanenb_trainer`` flags (without the interpreter/module part).

        Every value is explicit, so RUN:AI-style env vars on the ranks cannot silently
        override what the spec says; ``extra_args`` come last and win. ``--run-id`` is the job
        name: a launcher that starts this job again continues from its checkpoint.
        """
        return to_flags(dict(
            data=self.dataset,
            run_dir=run_dir or self.run_dir,
            epochs=self.epochs,
            batch_size=self.batch_size,
            engine=self.engine,
            backbone=self.backbone,
            device=self._trainer_device(),
            use_workers=self.num_workers > 0,
            num_workers=self.num_workers or None,
            use_val=self.use_val,
            val_batch_size=self.val_batch_size,
            max_steps=self.max_steps,
            # locally the supervisor snapshots run dir + dataset; the ranks only hear of a PVC
            enable_snapshot=(self.enable_snapshot and self.pvc_name is not None) or None,
            pvc_name=self.pvc_name if self.enable_snapshot else None,
            run_id=self.name,
        )) + list(self.extra_args)

    # ----------------------------------------------------------------- JSON round-trip
    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["volumes"] = [str(v) for v in self.volumes]
        data["env"] = dict(self.env)
        data["extra_args"] = list(self.extra_args)
        data["backend_options"] = {k: v.to_dict() if hasattr(v, "to_dict") else v
                                   for k, v in self.backend_options.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainSpec:
        if not isinstance(data, Mapping):
            raise SpecError("spec", data, "must be a dict of TrainSpec fields")
        data = cls.fold_sections(data)
        reject_unknown(cls, data, "spec", "unknown field(s); known fields")
        if "dataset" not in data:
            raise SpecError("dataset", None, "is required")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> TrainSpec:
        return dataclasses.replace(self, **changes)


_init_fields = TrainSpec.__init__


@functools.wraps(_init_fields)
def _init_with_sections(self: TrainSpec, *args: Any, **kwargs: Any) -> None:
    """``TrainSpec(..., k8s={...})``: a backend's section as its own keyword, as before
    ``backend_options`` (notebooks and YAML bodies written then keep working). Records which
    fields were given (``_given``): the RUN:AI rule tells a given default from one left out."""
    names = [f.name for f in dataclasses.fields(TrainSpec)]
    self.__dict__["_given"] = frozenset(names[:len(args)]) | frozenset(kwargs)
    _init_fields(self, *args, **TrainSpec.fold_sections(kwargs))


TrainSpec.__init__ = _init_with_sections  # type: ignore[method-assign]

# TrainSpec field -> the TrainConfig field it sets on every rank (``trainer_args``): the job's
# trainer settings, read from the two dataclasses (a field of the same name in both), never listed
_SETTINGS = {t.name for t in dataclasses.fields(TrainConfig)}
TRAINER_FIELDS: dict[str, str] = {"dataset": "data",
                                  **{f.name: f.name for f in dataclasses.fields(TrainSpec) if f.name in _SETTINGS}}
