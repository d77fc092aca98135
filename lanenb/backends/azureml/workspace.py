"""Which AzureML workspace a job goes to, and the SDK client for it.

The workspace comes from the spec's ``azureml`` options, then the environment
(``AZURE_SUBSCRIPTION_ID``, ``AZURE_RESOURCE_GROUP``, ``AZUREML_WORKSPACE_NAME``), then a
``config.json`` (the studio's "Download config file"), each part on its own, so a notebook can
keep the subscription in the environment and name the workspace per job. Credentials are never
part of it: ``ml_client`` signs in with ``DefaultAzureCredential`` (``az login``, a managed
identity, ``AZURE_CLIENT_ID``/... variables) and nothing of the token is kept.

The SDK (``azure-ai-ml``, ~6 s to import) is imported here on first use only, so the other
backends and ``--dry-run`` of any other backend never load it.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lanenb.backends.azureml.options import AzureMLOptions
from lanenb.errors import SpecError, UserError

if TYPE_CHECKING:
    from azure.ai.ml import MLClient

__all__ = ["AzureMLError", "AzureMLSdkMissingError", "WorkspaceRef", "resolve_workspace", "find_config",
           "ml_client", "require_sdk", "ENV_VARS"]

INSTALL_HINT = "pip install 'lanenb[azureml]' (azure-ai-ml and azure-identity)"
# option -> environment variable (the names the Azure CLI and the AzureML samples use)
ENV_VARS = {"subscription_id": "AZURE_SUBSCRIPTION_ID", "resource_group": "AZURE_RESOURCE_GROUP",
            "workspace": "AZUREML_WORKSPACE_NAME"}
# option -> config.json key (the file the studio downloads)
_CONFIG_KEYS = {"subscription_id": "subscription_id", "resource_group": "resource_group",
                "workspace": "workspace_name"}


class AzureMLError(UserError, RuntimeError):
    """AzureML refused or could not be reached; the message says what was asked and why."""


class AzureMLSdkMissingError(AzureMLError):
    """``azure-ai-ml`` is not installed."""


def require_sdk() -> None:
    """Raise a clear error (with the install command) when the SDK is missing.

    Raises:
        AzureMLSdkMissingError: ``azure.ai.ml`` or ``azure.identity`` cannot be imported.
    """
    # Building any job makes the SDK log "This is an experimental class" once for each of six
    # schema classes it marks so (AutoDeleteSettingSchema, ...), none of which lanenb uses: six
    # lines in every notebook's first %lanetrain cell. Only that logger is quietened.
    logging.getLogger("azure.ai.ml._utils._experimental").setLevel(logging.ERROR)
    try:
        for module in ("azure.ai.ml", "azure.identity"):
            importlib.import_module(module)
    except ImportError as exc:
        raise AzureMLSdkMissingError(f"the azureml backend needs the AzureML SDK: {INSTALL_HINT} "
                                     f"({exc})") from exc


@dataclass(frozen=True)
class WorkspaceRef:
    """One workspace: what ``MLClient`` needs, and where each part was found."""

    subscription_id: str
    resource_group: str
    workspace: str
    found_in: str = ""  # "options", "environment", the config.json path, or a mix

    def to_dict(self) -> dict[str, str]:
        return {"subscription_id": self.subscription_id, "resource_group": self.resource_group,
                "workspace": self.workspace}

    def __str__(self) -> str:
        return f"{self.workspace} (resource group {self.resource_group}, subscription {self.subscription_id})"


def find_config(start: str | os.PathLike[str] | None = None) -> Path | None:
    """``config.json`` or ``.azureml/config.json`` in ``start`` (default: the current folder) or
    a parent, the places ``MLClient.from_config`` looks; None when there is none."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        for candidate in (folder / "config.json", folder / ".azureml" / "config.json"):
            if candidate.is_file():
                return candidate
    return None


def _read_config(path: Path, explicit: bool) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise SpecError("azureml.config", str(path), f"cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SpecError("azureml.config", str(path), f"is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError("azureml.config", str(path), "must hold a JSON object with subscription_id, "
                        "resource_group and workspace_name")
    if explicit or "workspace_name" in data:  # a config.json of another tool is not ours to read
        return {opt: str(data[key]) for opt, key in _CONFIG_KEYS.items() if data.get(key)}
    return {}


def resolve_workspace(options: AzureMLOptions, *, env: Mapping[str, str] | None = None,
                      cwd: str | os.PathLike[str] | None = None) -> WorkspaceRef:
    """The workspace of ``options``: each part from the options, else the environment, else
    ``config.json`` (``options.config``, or one found from ``cwd`` upwards).

    Raises:
        SpecError: a part is missing everywhere (the message lists the three places), the
            config file is unreadable, or a value found has a bad spelling (named with where
            it came from).
    """
    env = os.environ if env is None else env
    found: dict[str, str] = {}
    where: dict[str, str] = {}
    for opt in ENV_VARS:
        value = getattr(options, opt)
        if value:
            found[opt], where[opt] = value, "options"
        elif env.get(ENV_VARS[opt]):
            found[opt], where[opt] = env[ENV_VARS[opt]], ENV_VARS[opt]
    explicit = options.config is not None
    if explicit and not Path(options.config).expanduser().is_file():  # type: ignore[arg-type]
        raise SpecError("azureml.config", options.config, "no such file (a workspace config.json)")
    if len(found) < len(ENV_VARS):
        path = Path(options.config).expanduser() if explicit else find_config(cwd)  # type: ignore[arg-type]
        if path is not None:
            for opt, value in _read_config(path, explicit).items():
                if opt not in found:
                    found[opt], where[opt] = value, str(path)
    missing = [opt for opt in ENV_VARS if opt not in found]
    if missing:
        opt = missing[0]
        raise SpecError(f"azureml.{opt}", None,
                        f"no AzureML workspace {opt.replace('_', ' ')}: give --{_flag(opt)} (azureml.{opt}), "
                        f"set {ENV_VARS[opt]}, or put a config.json from the studio in this folder "
                        f"(--azure-config PATH)")
    try:  # the same spelling rules as options given directly, naming where the bad value came from
        AzureMLOptions(subscription_id=found["subscription_id"], resource_group=found["resource_group"],
                       workspace=found["workspace"])
    except SpecError as exc:
        source = where.get(exc.field.removeprefix("azureml."), "")
        raise SpecError(exc.field if source == "options" else f"{exc.field} (from {source})", exc.value,
                        str(exc).split(": ", 1)[-1]) from None
    return WorkspaceRef(found["subscription_id"], found["resource_group"], found["workspace"],
                        ", ".join(sorted(set(where.values()))))


def _flag(option: str) -> str:
    return {"subscription_id": "subscription", "resource_group": "resource-group", "workspace": "workspace"}[option]


def ml_client(ref: WorkspaceRef, credential: Any = None, **client_kwargs: Any) -> MLClient:
    """The SDK's ``MLClient`` for ``ref``; ``credential`` defaults to ``DefaultAzureCredential``
    (nothing is stored: the SDK asks it for a token per request). ``client_kwargs`` go to every
    azure-core pipeline of the client (e.g. ``transport=`` in tests, ``retry_total=``).

    Raises:
        AzureMLSdkMissingError: the SDK is not installed.
    """
    require_sdk()
    from azure.ai.ml import MLClient

    if credential is None:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential()
    return MLClient(credential, ref.subscription_id, ref.resource_group, ref.workspace, **client_kwargs)
