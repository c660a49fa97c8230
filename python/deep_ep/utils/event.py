"""EventHandle and EventOverlap, DeepEP V2's API (V1's is a subset). On the CPU every operation has
completed when it returns, so an event is complete as soon as it exists and waiting on it only
runs what DeepEP runs after a wait: the hook registered with register_hook_after_wait."""

from __future__ import annotations

from typing import Any, Callable, Optional


class EventHandle:
    """A captured point of the (CPU) stream; complete as soon as it exists."""

    def current_stream_wait(self) -> None:
        pass


class EventOverlap:
    """An event with the tensors it keeps alive; usable in a `with` block, or as
    `with overlap(release_handle=True):` to drop the event at the block's end."""

    def __init__(self, event: Optional[EventHandle] = None,
                 extra_tensors: Optional[tuple] = None) -> None:
        self.event = event
        self.extra_tensors = extra_tensors
        self.hook_after_wait: Optional[Callable[[], Any]] = None
        self._release_handle_by_call = False

    def current_stream_wait(self, release_handle: bool = False) -> None:
        """Waits for the event (at once on the CPU), then runs and clears the registered hook;
        release_handle drops the event. Raises RuntimeError if the event was released."""
        if self.event is None:
            raise RuntimeError("EventOverlap.current_stream_wait: the event is None (never set, "
                               "or released by an earlier wait with release_handle=True)")
        self.event.current_stream_wait()
        hook, self.hook_after_wait = self.hook_after_wait, None
        if hook is not None:
            hook()
        if release_handle:
            self.event = None

    def register_hook_after_wait(self, hook_after_wait: Callable[[], Any]) -> None:
        """Runs `hook_after_wait` once, at the next current_stream_wait (or `with` block's end):
        the event is complete already, but DeepEP's callers order work after the wait."""
        if self.hook_after_wait is not None:
            raise RuntimeError("EventOverlap.register_hook_after_wait: a hook is already "
                               "registered and has not run yet (one per wait)")
        self.hook_after_wait = hook_after_wait

    def __call__(self, release_handle: bool = False) -> "EventOverlap":
        self._release_handle_by_call = release_handle
        return self

    def __enter__(self) -> "EventOverlap":
        return self

    def __exit__(self, *exc: Any) -> None:
        release, self._release_handle_by_call = self._release_handle_by_call, False
        if self.event is not None:
            self.current_stream_wait(release_handle=release)
