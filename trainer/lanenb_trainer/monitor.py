"""Per-rank ``system`` events every few seconds: what the RUN:AI dashboard showed, in the stream.

CPU and resident memory come from psutil on every rank; GPU utilisation, memory and
temperature come from NVML (``nvidia-ml-py``) when the rank runs on a GPU. A daemon thread
so a crashed rank never waits for it.

Besides every ``interval``, each rank reads once shortly after it starts and once when it stops:
a run shorter than the interval (a 2 s smoke run) used to record no ``system`` event from any
rank, and its CPU and memory charts stayed empty.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import psutil

FIRST_SAMPLE_S = 0.5  # the first reading, soon after the start (psutil's CPU share needs a span to measure)


class SystemMonitor:
    def __init__(self, emit: Callable[..., None], rank: int, *, interval: float = 2.0,
                 gpu_index: int | None = None) -> None:
        self._emit = emit
        self.rank = rank
        self.interval = interval
        self.gpu_index = gpu_index
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc = psutil.Process()
        self._nvml = None
        self._gpu = None

    def _init_nvml(self) -> None:
        if self.gpu_index is None:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._gpu = _nvml_handle(pynvml, self.gpu_index)
            self._nvml = pynvml
        except Exception:
            self._nvml = None

    def sample(self) -> dict[str, Any]:
        """One reading (also used directly by tests)."""
        with self._proc.oneshot():
            fields: dict[str, Any] = {
                "cpu_percent": self._proc.cpu_percent(None),
                "rss_mb": round(self._proc.memory_info().rss / 2**20, 1),
                "threads": self._proc.num_threads(),
            }
        fields["host_cpu_percent"] = psutil.cpu_percent(None)
        if self._nvml is not None:
            nv = self._nvml
            try:
                util = nv.nvmlDeviceGetUtilizationRates(self._gpu)
                mem = nv.nvmlDeviceGetMemoryInfo(self._gpu)
                fields.update(
                    gpu_util=util.gpu,
                    gpu_mem_mb=round(mem.used / 2**20, 1),
                    gpu_mem_total_mb=round(mem.total / 2**20, 1),
                    gpu_temp_c=nv.nvmlDeviceGetTemperature(self._gpu, nv.NVML_TEMPERATURE_GPU),
                )
            except Exception:
                pass
        return fields

    def _run(self) -> None:
        self._init_nvml()
        self._proc.cpu_percent(None)  # prime: the first reading is always 0
        psutil.cpu_percent(None)
        if not self._stop.wait(min(self.interval, FIRST_SAMPLE_S)):
            self._reading()
            while not self._stop.wait(self.interval):
                self._reading()
        self._reading()  # at the stop: the run's last reading, whatever its length

    def _reading(self) -> None:
        try:
            self._emit("system", self.rank, **self.sample())
        except Exception:  # a closed stream at teardown, a vanished GPU: never the rank's problem
            pass

    def start(self) -> SystemMonitor:
        self._thread = threading.Thread(target=self._run, name="lanenb-system-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 1)
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass


def nvml_device(index: int, visible: str | None) -> int | str:
    """NVML's name for torch's ``cuda:index``: a physical index, or a ``GPU-``/``MIG-`` UUID.

    Why: torch numbers only the GPUs ``CUDA_VISIBLE_DEVICES`` lets it see, NVML numbers every
    GPU of the machine; with ``CUDA_VISIBLE_DEVICES=2,3`` torch's ``cuda:0`` is NVML's 2, and a
    rank that read NVML's 0 would chart another job's GPU.
    """
    if visible is None:
        return index
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        return index
    entry = entries[index]
    return int(entry) if entry.isdigit() else entry


def _nvml_handle(nv: Any, index: int) -> Any:
    """The NVML handle of torch's ``cuda:index``: by the UUID torch reports, else by
    :func:`nvml_device`."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(index).uuid)
        return nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
    except Exception:
        pass
    target = nvml_device(index, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if isinstance(target, str):
        return nv.nvmlDeviceGetHandleByUUID(target)
    return nv.nvmlDeviceGetHandleByIndex(target)
