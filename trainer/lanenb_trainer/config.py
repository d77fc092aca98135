"""Training configuration: CLI flags with the RUN:AI guide's environment variables as defaults.

Users of the RUN:AI guide pass ``-e BATCH_SIZE=33 -e USE_VAL="false" ...`` to their jobs; the
same variables keep working here, and a flag on the command line wins over the variable.
Everything is validated in :func:`parse_config` so a bad value fails before any rank starts
work (the local launcher calls it too, before ``mpirun``), with a message naming the value.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import UserError
from .flags import NEGATABLE, flag_name, to_flags
from .model_registry import imagenet_models, list_models
from .runai import RUNAI_ENV, bool_word, runai_variable

# The one list of each (engines/, models/ and the notebook side import these names). The
# backbones are the model registry's (lanenb_trainer.model_registry), named without torch.
ENGINES = ("auto", "horovod", "ddp")
DEVICES = ("auto", "cpu", "cuda")
AMP_DTYPES = ("float16", "bfloat16")
BACKBONES = list_models()
IMAGENET_BACKBONES = imagenet_models()  # with a torchvision ImageNet layout
# how the LR follows a resize that changes the global batch (training/resize.py): the sweep's
# rules (linear, sqrt: lanenb.sweeps.scaling_rule) and keep (the same effective rate)
RESIZE_LR_RULES = ("linear", "sqrt", "keep")


class ConfigError(UserError, ValueError):
    """A configuration value is invalid; the message names the flag or variable and the value."""


def setting(default: Any, help: str, *, minimum: int | None = None,
            choices: Sequence[str] | Callable[[], Sequence[str]] | None = None) -> Any:
    """A ``TrainConfig`` field with what every face needs of it, declared once: its default, its
    ``--help`` line, and its integer bound (``minimum``) or its ``choices`` (a callable when the
    list is a registry's, read when asked). The flag is the field's name (``flags.flag_name``),
    a switch with a ``--no-`` form is in ``flags.NEGATABLE``, a RUN:AI variable is in
    ``runai.RUNAI_ENV``: argparse (:func:`add_train_arguments`), the environment
    (:func:`config_from_args`), the checks (:meth:`TrainConfig.validate`) and ``to_argv`` read
    them from here, so a new setting is one field."""
    return field(default=default, metadata={"help": help, "minimum": minimum, "choices": choices})


def setting_choices(name: str) -> list[str] | None:
    """The allowed values of setting ``name`` (None: any value of its type)."""
    choices = _META[name]["choices"]
    return None if choices is None else list(choices() if callable(choices) else choices)


def setting_minimum(name: str) -> int | None:
    """The least integer setting ``name`` takes (None: not an integer with a bound)."""
    minimum: int | None = _META[name]["minimum"]
    return minimum


@dataclass
class TrainConfig:
    """What one rank trains: every ``python -m lanenb_trainer`` flag as a field (``--batch-size``
    is ``batch_size``). Build it with :func:`parse_config` (flags > RUN:AI variables > these
    defaults, validated), or directly and call :meth:`validate`; :meth:`to_argv` gives the flags
    back, every value explicit.

    Args:
        data: TuSimple-layout dataset root (``clips/`` + label JSON files); required.
        run_dir: where rank 0 writes checkpoints, predictions and metrics; required.
        epochs: passes over the training split.
        batch_size: per rank; the global batch is ranks x this (:func:`global_batch`).
            RUN:AI ``BATCH_SIZE``.
        engine: ``auto`` (Horovod when importable, else DDP), ``horovod`` or ``ddp``.
        backbone: a name of the model registry (:data:`BACKBONES`).
        lr: per-rank learning rate, scaled linearly by the world size.
        momentum, weight_decay: SGD's.
        warmup_steps: linear LR warm-up steps, then poly decay.
        poly_power: the poly decay's power.
        img_height, img_width: network input, multiples of 8 and >= 32.
        num_workers: DataLoader workers when ``use_workers`` (RUN:AI ``NUM_WORKERS``).
        use_workers: RUN:AI ``USE_WORKERS``; off means the loader runs in the rank's process.
        use_val: evaluate a validation split each epoch (RUN:AI ``USE_VAL``).
        val_batch_size: the evaluation batch (RUN:AI ``VAL_BATCH_SIZE``).
        val_fraction: share of the train labels held out for validation.
        augment: random affine + colour jitter on training frames.
        max_steps: stop after this many global steps (0: no limit).
        resume: continue exactly from ``run_dir/checkpoints/last.pt``.
        run_id: the run this launch belongs to (launchers pass the job's name). A ``last.pt``
            written under the same id is continued without ``--resume``: a launcher starting
            the run again after a preemption or a killed rank must not start over in its run
            dir. None: only ``--resume`` continues.
        resize_lr_rule: resuming a checkpoint written by another number of ranks (or batch
            size): None keeps its global batch by gradient accumulation (refused when it cannot
            be kept exactly); ``linear``, ``sqrt`` or ``keep`` train at the new global batch
            with the effective LR moved by that rule (training/resize.py).
        seed: fixes the init, the split and the data order.
        weights: a local weights file for the whole model (nothing is downloaded).
        backbone_weights: a local torchvision ImageNet file for the backbone.
        log_every: a ``step`` event every N steps; system_interval: seconds between
            ``system`` events.
        timing_every: a ``timing`` event (where each step's time went: data wait, copy,
            compute, gradient exchange, optimizer) from every rank every N steps; 0 turns
            the measurement off.
        device: ``auto`` (a GPU per rank when torch sees one, else the CPU), ``cpu``, or
            ``cuda`` (a GPU per rank, shared round-robin when ranks outnumber GPUs; the run
            fails at start, naming the reason, when torch sees no GPU). The notebook side
            passes ``cuda`` for ``gpus >= 1`` and ``cpu`` for ``gpus=0``.
        amp: mixed precision on a GPU, in ``amp_dtype``.
        amp_dtype: ``float16`` (with a loss scaler) or ``bfloat16`` (no scaler needed; also
            turns on CPU autocast, which has no float16 path).
        channels_last: NHWC memory format for the model and the batches (tensor cores and
            cuDNN's fastest convolutions want it). None (the default): on for a GPU rank, off on
            a CPU; measured on an H200, VGG16-SCNN 288x800 trains 1.4x faster with it in fp16
            (294 vs 208 images/s), 1.5x in bf16 and 1.25x in fp32 (docs/GPU.md).
        deterministic: deterministic GPU algorithms (``torch.use_deterministic_algorithms``,
            no cuDNN autotuning), so a resumed GPU run ends on the same weights as an
            uninterrupted one; slower. Off, cuDNN autotunes each convolution shape once.
        tensorboard: TensorBoard event files under ``run_dir/tensorboard/`` (rank 0's training,
            validation and test scalars; each rank's system and timing scalars); ``--no-tensorboard``
            writes none.
        enable_snapshot, pvc_name: snapshot PVC ``pvc_name`` after a successful run (RUN:AI
            ``ENABLE_SNAPSHOT``, ``PVC_NAME``).
        collective_timeout: seconds before a hung collective fails the run.

    Raises:
        ConfigError: from :meth:`validate`, naming the flag (and variable) and the value.
    """

    data: str = setting("", "TuSimple-layout dataset root (clips/ + label JSON files)")
    run_dir: str = setting("", "output directory written by rank 0")
    # one pass (as Keras' fit): a real run names its epochs; the job's default too
    epochs: int = setting(1, "epochs", minimum=1)
    batch_size: int = setting(8, "per-rank batch size", minimum=1)
    engine: str = setting("auto", "the gradient exchange: horovod when importable, else ddp", choices=ENGINES)
    backbone: str = setting("small", "the model's backbone", choices=list_models)
    lr: float = setting(0.01, "per-rank learning rate, scaled by world size")
    momentum: float = setting(0.9, "SGD momentum")
    weight_decay: float = setting(1e-4, "SGD weight decay")
    warmup_steps: int = setting(50, "linear LR warm-up steps (at most a fifth of the run)", minimum=0)
    poly_power: float = setting(0.9, "poly LR decay power")
    img_height: int = setting(288, "network input height, multiple of 8")
    img_width: int = setting(800, "network input width, multiple of 8")
    num_workers: int = setting(2, "loader workers when --use-workers", minimum=0)
    use_workers: bool = setting(False, "DataLoader worker processes (off: the rank's own process loads)")
    use_val: bool = setting(True, "evaluate a validation split each epoch")
    val_batch_size: int = setting(8, "the evaluation batch", minimum=1)
    val_fraction: float = setting(0.1, "share of train labels held out for validation")
    augment: bool = setting(True, "random affine + colour jitter on training frames")
    max_steps: int = setting(0, "stop after this many global steps (0 = no limit)", minimum=0)
    resume: bool = setting(False, "continue from RUN_DIR/checkpoints/last.pt")
    run_id: str | None = setting(None, "the run this launch belongs to (the job name): a checkpoint of the "
                                       "same run in RUN_DIR is continued without --resume (a launcher's restart)")
    resize_lr_rule: str | None = setting(None, "resuming on another number of ranks or batch size, train at the "
                                               "new global batch with the LR moved by this rule (default: keep "
                                               "the checkpoint's global batch by gradient accumulation)",
                                         choices=RESIZE_LR_RULES)
    seed: int = setting(0, "fixes the init, the split and the data order")
    weights: str | None = setting(None, "local weights file for the model (nothing is downloaded)")
    backbone_weights: str | None = setting(None, "local torchvision ImageNet weights for the backbone "
                                                 "(vgg16_bn / resnet18 / resnet34 .pth; nothing is downloaded)")
    log_every: int = setting(10, "emit a step event every N steps", minimum=1)
    system_interval: float = setting(2.0, "seconds between system events")
    timing_every: int = setting(10, "every rank emits a timing event (where each step's time goes: data, copy, "
                                    "compute, gradient exchange, optimizer) every N steps; 0 = off", minimum=0)
    device: str = setting("auto", "where each rank computes (auto: a GPU per rank when torch sees one)",
                          choices=DEVICES)
    amp: bool = setting(True, "mixed precision (float16: GPU only; bfloat16: GPU and CPU)")
    amp_dtype: str = setting("float16", "the mixed-precision type with --amp (bfloat16 also on CPUs)",
                             choices=AMP_DTYPES)
    channels_last: bool | None = setting(None, "NHWC memory format (default: on for GPU ranks)")
    deterministic: bool = setting(False, "deterministic GPU algorithms: a resumed run ends bit-identical (slower)")
    tensorboard: bool = setting(True, "TensorBoard event files under RUN_DIR/tensorboard/")
    enable_snapshot: bool = setting(False, "snapshot PVC --pvc-name after a successful run")
    pvc_name: str | None = setting(None, "PVC to snapshot at the end")
    collective_timeout: float = setting(600.0, "seconds before a hung collective fails the run")

    @property
    def loader_workers(self) -> int:
        """DataLoader worker processes: NUM_WORKERS only counts when USE_WORKERS is on."""
        return self.num_workers if self.use_workers else 0

    @property
    def image_size(self) -> tuple[int, int]:
        return (self.img_height, self.img_width)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_argv(self) -> list[str]:
        """Flags that reproduce this config (every value explicit, so rank env vars cannot change it)."""
        return to_flags(self.to_dict())

    def validate(self) -> TrainConfig:
        _validate(self)
        return self


_META = {f.name: f.metadata for f in fields(TrainConfig)}


def global_batch(batch_size: int, processes: int) -> int:
    """Images per optimizer step: data parallel, so each of ``processes`` ranks takes its own
    ``batch_size`` and the all-reduced step sees them all. The one formula the trainer, the
    notebook views and the launch form share."""
    return batch_size * processes


def parse_bool(value: str, name: str) -> bool:
    """A RUN:AI true/false word (``lanenb_trainer.runai``); ``ConfigError`` names ``name``."""
    parsed = bool_word(value)
    if parsed is None:
        raise ConfigError(f'{name}={value!r} is not a boolean: use "true" or "false"')
    return parsed


def _env_value(env: Mapping[str, str], var: str, field_type: type) -> Any:
    raw = env[var]
    if field_type is bool:
        return parse_bool(raw, f"environment variable {var}")
    if field_type is int:
        try:
            return int(raw.strip())
        except ValueError:
            raise ConfigError(f"environment variable {var}={raw!r} is not an integer") from None
    return raw


def add_train_arguments(parser: argparse.ArgumentParser, exclude: Iterable[str] = (),
                        title: str = "training") -> argparse.ArgumentParser:
    """Trainer flags, shared by ``python -m lanenb_trainer`` and ``lanenb train``.

    Defaults are ``None`` so :func:`config_from_args` can tell "not given" (use the env var,
    then the built-in default) from an explicit value.
    """
    skip = set(exclude)
    group = parser.add_argument_group(title)
    for f in fields(TrainConfig):
        if f.name in skip:
            continue
        flag, meta, env = flag_name(f.name), f.metadata, runai_variable(f.name)
        choices = setting_choices(f.name)
        words = [f"env {env}"] if env else []
        if f.default is not None and f.default != "" and not isinstance(f.default, bool):
            words.append(f"default {f.default:g}" if isinstance(f.default, float) else f"default {f.default}")
        text = (f"{'|'.join(choices)}: " if choices else "") + meta["help"]
        text += f" ({', '.join(words)})" if words else ""
        if f.name in NEGATABLE:
            group.add_argument(flag, dest=f.name, action="store_true", default=None,
                               help=f"{flag} / --no-{flag[2:]}: {text}")
            group.add_argument("--no-" + flag[2:], dest=f.name, action="store_false", default=None,
                               help=argparse.SUPPRESS)
        elif isinstance(f.default, bool):  # a switch that exists only in its positive form (--resume)
            group.add_argument(flag, dest=f.name, action="store_true", default=None, help=text)
        else:
            kind = type(f.default) if isinstance(f.default, (int, float)) else str  # numbers default to one
            group.add_argument(flag, dest=f.name, type=kind, default=None, help=text)
    return parser


def config_from_args(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> TrainConfig:
    """Resolve flags > RUN:AI env vars > defaults, then validate."""
    env = os.environ if env is None else env
    cfg = TrainConfig()
    types = {f.name: f.type for f in fields(TrainConfig)}
    for var, name in RUNAI_ENV.items():
        if var in env and env[var].strip() != "":
            ftype = {"bool": bool, "int": int}.get(str(types[name]), str)
            setattr(cfg, name, _env_value(env, var, ftype))
    for f in fields(TrainConfig):
        value = getattr(ns, f.name, None)
        if value is not None:
            setattr(cfg, f.name, value)
    return cfg.validate()


class _Parser(argparse.ArgumentParser):
    """Errors raise ``ConfigError`` instead of exiting: a notebook kernel or a launch form that
    validates trainer flags must get a message, not a ``SystemExit``."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m lanenb_trainer",
        description="Train SCNN lane detection on one MPI rank (run under mpirun / an MPIJob).",
    )
    return add_train_arguments(parser)


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> TrainConfig:
    return config_from_args(build_parser().parse_args(argv), env)


def _validate(c: TrainConfig) -> None:
    if not c.data:
        raise ConfigError("--data is required: the TuSimple-layout dataset root")
    data = Path(c.data)
    if not data.is_dir():
        raise ConfigError(f"--data {c.data!r}: no such directory")
    if not c.run_dir:
        raise ConfigError("--run-dir is required: where rank 0 writes checkpoints, predictions and metrics")
    if Path(c.run_dir).exists() and not Path(c.run_dir).is_dir():
        raise ConfigError(f"--run-dir {c.run_dir!r} exists and is not a directory")
    for f in fields(TrainConfig):  # the bounds and choices each setting declares
        value = getattr(c, f.name)
        choices = setting_choices(f.name)
        if choices is not None and value is not None and value not in choices:
            raise ConfigError(f"{flag_name(f.name)} {value!r} is not one of {', '.join(choices)}")
        minimum = setting_minimum(f.name)
        if minimum is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
            env = runai_variable(f.name)
            src = f" (or env {env})" if env else ""
            raise ConfigError(f"{flag_name(f.name)}{src} must be an integer >= {minimum}, got {value!r}")
    for name in ("img_height", "img_width"):
        value = getattr(c, name)
        if value < 32 or value % 8:
            raise ConfigError(f"--{name.replace('_', '-')} must be a multiple of 8 and >= 32 "
                              f"(SCNN works at stride 8), got {value}")
    if not c.lr > 0:
        raise ConfigError(f"--lr must be > 0, got {c.lr}")
    if not 0 <= c.momentum < 1:
        raise ConfigError(f"--momentum must be in [0, 1), got {c.momentum}")
    if c.weight_decay < 0:
        raise ConfigError(f"--weight-decay must be >= 0, got {c.weight_decay}")
    if c.poly_power < 0:
        raise ConfigError(f"--poly-power must be >= 0, got {c.poly_power}")
    if not 0 <= c.val_fraction < 1:
        raise ConfigError(f"--val-fraction must be in [0, 1), got {c.val_fraction}")
    if c.use_val and c.val_fraction == 0:
        raise ConfigError("--use-val (or env USE_VAL=true) needs --val-fraction > 0")
    if c.system_interval <= 0:
        raise ConfigError(f"--system-interval must be > 0 seconds, got {c.system_interval}")
    if c.collective_timeout <= 0:
        raise ConfigError(f"--collective-timeout must be > 0 seconds, got {c.collective_timeout}")
    if c.weights and not Path(c.weights).is_file():
        raise ConfigError(f"--weights {c.weights!r}: no such file")
    if c.backbone_weights and not Path(c.backbone_weights).is_file():
        raise ConfigError(f"--backbone-weights {c.backbone_weights!r}: no such file")
    if c.backbone_weights and c.backbone not in imagenet_models():
        raise ConfigError(f"--backbone-weights needs an ImageNet backbone ({', '.join(imagenet_models())}), "
                          f"not --backbone {c.backbone!r}")
    if c.enable_snapshot and not c.pvc_name:
        raise ConfigError("--enable-snapshot (or env ENABLE_SNAPSHOT=true) needs --pvc-name (or env PVC_NAME)")
    if c.run_id is not None and (not c.run_id.strip() or len(c.run_id) > 253):
        raise ConfigError(f"--run-id {c.run_id!r}: must be a non-empty name of at most 253 characters")
    if c.resume and not (Path(c.run_dir) / "checkpoints" / "last.pt").is_file():
        raise ConfigError(f"--resume: no checkpoint at {Path(c.run_dir) / 'checkpoints' / 'last.pt'}")
