"""check_nvlink_connections (in DeepEP's deep_ep.utils.envs)."""

from __future__ import annotations

from typing import Any


def check_nvlink_connections(group: Any) -> None:
    """DeepEP checks that the GPUs of `group` are connected by NVLink; the ranks of a host share
    its memory, so there is nothing to check."""
