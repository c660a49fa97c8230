"""torch.cpu.Event with timing. DeepEP-style programs time with
`torch.cuda.Event(enable_timing=True)`, which is `torch.cpu.Event(enable_timing=True)` on a CPU;
torch 2.x's CPU event takes no arguments and has no elapsed_time (torch.Event('cpu', ...) says
"cpu backend doesn't support events"). Importing deep_ep gives torch.cpu.Event both, by a
subclass of torch's own that reads the wall clock at record(): CPU work is complete when it
returns. Where torch's CPU event can time already, nothing is changed."""

from __future__ import annotations

import time
from typing import Optional

import torch


class Event(torch.cpu.Event):  # type: ignore[misc,name-defined]
    """torch.cpu.Event that accepts enable_timing/blocking/interprocess and can time."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        super().__init__()
        self.enable_timing = enable_timing
        self._t: Optional[float] = None

    def record(self, stream: object = None) -> None:
        self._t = time.perf_counter()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to end_event, as torch.cuda.Event.elapsed_time."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("elapsed_time: both events need enable_timing=True")
        if self._t is None or end_event._t is None:
            raise RuntimeError("elapsed_time: both events must have been recorded")
        return (end_event._t - self._t) * 1e3


def install() -> None:
    if not hasattr(torch.cpu.Event, "elapsed_time"):
        torch.cpu.Event = Event  # type: ignore[misc,assignment]
