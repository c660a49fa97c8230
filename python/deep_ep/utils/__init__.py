"""DeepEP's deep_ep.utils names: EventHandle, EventOverlap and check_nvlink_connections.

Holds no module named like DeepEP's test helpers (envs, math, refs, gate, testing), so that
scripts/deepep-tests.sh can lay those files into a copy of this package."""

from .event import EventHandle, EventOverlap
from .links import check_nvlink_connections

__all__ = ["EventHandle", "EventOverlap", "check_nvlink_connections"]
