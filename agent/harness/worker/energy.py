"""The GPU's energy counter, as the timing loop reads it: NVML's total energy (millijoules since the driver loaded;
Volta and newer), through the `nvidia-ml-py` bindings (module `pynvml`).

Opened before any candidate code is imported, like everything else the timing loop calls (agent.harness.worker.trusted):
the counter keeps the function and the device handle it was given, and the worker's integrity snapshot watches the
`pynvml` module, so a candidate that rebinds anything there is reported.

Where there is no counter (no NVML library or driver, an older GPU, a GPU NVML cannot match to the CUDA device)
`open_counter` returns the reason in words instead: every figure then says "energy: not measured: <reason>".

The counter advances in steps (tens of ms apart): a figure read over a window of a few steps is mostly step. So
`tick()` waits for the counter to change: a window then starts (or ends) on a fresh reading, and two ticks give the
step, from which the timing loop sizes its windows (agent.harness.worker.timing.Bench.energy).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# How long tick() waits for the counter to move before saying it does not.
TICK_WAIT_S = 1.0


class EnergyCounter:
    """One GPU's energy counter, in mJ; `read` and `clock` are references taken when it was opened."""

    def __init__(self, read: Callable[[], int], clock: Callable[[], float] = time.perf_counter,
                 label: str = "") -> None:
        self._read, self._clock, self.label = read, clock, label

    def read(self) -> int:
        return int(self._read())

    def tick(self, wait_s: float = TICK_WAIT_S) -> tuple[int, float] | None:
        """(value, host time) at the counter's next step, or None where it does not move within `wait_s`."""
        first = self.read()
        give_up = self._clock() + wait_s
        while True:
            now, value = self._clock(), self.read()
            if value != first:
                return value, now
            if now > give_up:
                return None



def open_counter(device: int = 0) -> EnergyCounter | str:
    """The energy counter of CUDA device `device` (this process's numbering), or why there is none."""
    try:
        import pynvml
    except ImportError:
        return "NVML's Python bindings are not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no NVML here
        return f"NVML is not available ({_words(e)})"
    try:
        handle, label = _handle(pynvml, device)
    except Exception as e:
        return f"NVML cannot find the CUDA device ({_words(e)})"
    read = pynvml.nvmlDeviceGetTotalEnergyConsumption
    try:
        read(handle)
    except Exception as e:
        if isinstance(e, pynvml.NVMLError_NotSupported):
            return f"{label} has no energy counter (NVML: not supported; Volta and newer GPUs have one)"
        return f"NVML cannot read {label}'s energy counter ({_words(e)})"
    return EnergyCounter(lambda: read(handle), time.perf_counter, label)


def _handle(pynvml: Any, device: int) -> tuple[Any, str]:
    """NVML numbers every GPU of the host and ignores CUDA_VISIBLE_DEVICES: find CUDA's device by its UUID."""
    import torch

    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = str(uuid)
        for name in ([text] if text.startswith(("GPU-", "MIG-")) else ["GPU-" + text, "MIG-" + text]):
            try:
                return pynvml.nvmlDeviceGetHandleByUUID(name), props.name
            except pynvml.NVMLError:
                continue
    if pynvml.nvmlDeviceGetCount() == 1:  # one GPU on the host: it is this one
        return pynvml.nvmlDeviceGetHandleByIndex(0), props.name
    raise LookupError(f"no NVML device has the UUID of {props.name} ({uuid})")


def _words(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:200]
