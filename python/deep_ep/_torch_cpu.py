"""The CPU device calls of torch 2.1 that DeepEP-style programs use, for older torch (Debian's
1.13): torch.set_default_device, torch.cpu.set_device, torch.cpu.synchronize, torch.cpu.Event.
Each is added only where torch lacks it; ADDED names what this torch was given."""

from __future__ import annotations

import time
from typing import List, Optional, Union

import torch

ADDED: List[str] = []


class _Event:
    """A CPU event: record() notes the wall clock (CPU work is complete when it returns)."""

    def __init__(self, enable_timing: bool = False, **_: object) -> None:
        self.enable_timing = enable_timing
        self._t: Optional[float] = None

    def record(self, stream: object = None) -> None:
        self._t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def wait(self, stream: object = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: "_Event") -> float:
        """Milliseconds from this event to `end` (as torch.cuda.Event.elapsed_time)."""
        if self._t is None or end._t is None:
            raise RuntimeError("elapsed_time: both events must have been recorded")
        return (end._t - self._t) * 1e3


def _set_default_device(device: Union[str, int, "torch.device"]) -> None:
    if torch.device(device).type != "cpu":
        raise RuntimeError(f"torch.set_default_device({device!r}): this torch ({torch.__version__}) "
                           "has CPU tensors only by default; deep_ep's stand-in accepts 'cpu'")


def _set_device(device: object) -> None:
    pass  # one CPU device


def _synchronize(device: object = None) -> None:
    pass  # CPU operations complete before they return


def install() -> None:
    cpu = torch.cpu
    if not hasattr(torch, "set_default_device"):
        torch.set_default_device = _set_default_device  # type: ignore[attr-defined]
        ADDED.append("torch.set_default_device")
    for name, value in (("set_device", _set_device), ("synchronize", _synchronize),
                        ("Event", _Event)):
        if not hasattr(cpu, name):
            setattr(cpu, name, value)
            ADDED.append(f"torch.cpu.{name}")
