"""EventOverlap, the event handle and check_nvlink_connections (DeepEP's deep_ep.utils names). On
the CPU every operation has completed when it returns, so events are complete at once."""

from __future__ import annotations

from typing import Any, Optional


class EventHandle:
    """A captured point of the (CPU) stream; complete as soon as it exists."""

    def current_stream_wait(self) -> None:
        pass


class EventOverlap:
    """An event with the tensors it keeps alive; usable in a `with` block (DeepEP's shape)."""

    def __init__(self, event: Optional[EventHandle] = None,
                 extra_tensors: Optional[tuple] = None) -> None:
        self.event = event
        self.extra_tensors = extra_tensors

    def current_stream_wait(self) -> None:
        if self.event is not None:
            self.event.current_stream_wait()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.current_stream_wait()


def check_nvlink_connections(group: Any) -> None:
    """DeepEP checks that the GPUs of `group` are connected by NVLink; the ranks of a deep_ep
    group share one host's memory, so there is nothing to check."""
