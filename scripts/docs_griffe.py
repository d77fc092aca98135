"""A Griffe extension of the docs site (mkdocs.yml, mkdocstrings ``extensions:``): defaults the
reader can use.

Griffe reads the sources and shows a default as written, so a dataclass field that takes its
default from another object (``batch_size: int = _TRAINER.batch_size``: one default, kept in
the trainer's ``TrainConfig``) showed a private name in the signature. A default written as an
expression that names a private object is shown as its value (``batch_size: int = 8``), read from
the class itself; only plain values (numbers, strings, booleans, None) are put in. Importing the
class imports no torch (the contract and the trainer's config are torch-free).

It runs before Griffe's own dataclasses extension (which builds ``__init__`` from the fields),
so the signature and the attribute show the same value.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from typing import Any

import griffe

PRIVATE_NAME = re.compile(r"(?:^|[^\w.])_[A-Za-z]\w*")  # `_TRAINER.x`, `f(_X)`; not `a._b` nor `x_y`


def literal(value: Any) -> str | None:
    """``value`` as source text, if it is a plain value; strings double-quoted as the sources write them."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    return None


def live_defaults(module: str, qualname: str) -> dict[str, Any]:
    """The class's defaults as Python has them: dataclass field defaults, else class attributes."""
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if dataclasses.is_dataclass(obj):
        return {f.name: f.default for f in dataclasses.fields(obj) if f.default is not dataclasses.MISSING}
    return {name: value for name, value in vars(obj).items() if not name.startswith("__")}


def show_values(cls: griffe.Class) -> None:
    named = {name: member for name, member in cls.members.items()
             if not member.is_alias and member.is_attribute and member.value is not None
             and PRIVATE_NAME.search(str(member.value))}
    if not named:
        return
    qualname = cls.path[len(cls.module.path) + 1:]
    try:
        defaults = live_defaults(cls.module.path, qualname)
    except Exception:  # a class the build cannot import keeps its defaults as written
        return
    for name, member in named.items():
        text = literal(defaults[name]) if name in defaults else None
        if text is not None:
            member.value = text


def walk(obj: griffe.Object) -> None:
    for member in list(obj.members.values()):
        if member.is_alias:
            continue
        if member.is_class:
            show_values(member)
        if member.is_module or member.is_class:
            walk(member)


class LiveDefaults(griffe.Extension):
    """Shows ``_PRIVATE.name`` defaults as their values (module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        walk(pkg)
