"""Waiting on real processes and servers in tests: one helper instead of a copy per folder."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import psutil

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, *, what: str | None = None,
             interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    On timeout: raise ``AssertionError`` naming ``what`` when given, else return the last
    (falsy) value, so ``assert not wait_for(lambda: view.running, 1.0)`` reads naturally.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            break
        time.sleep(interval)
    if not value and what is not None:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
    return value


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead: it only waits to be reaped)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
