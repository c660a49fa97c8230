"""Argument checks shared by the normal and low-latency halves of deep_ep.Buffer: each names the
call, the argument, what was passed and what is allowed."""

from __future__ import annotations

import numbers
from typing import Any, Optional, Tuple

import torch


def bad(call: str, name: str, value: Any, want: str) -> ValueError:
    shape = list(value.shape) if isinstance(value, torch.Tensor) else None
    what = f"dtype {value.dtype}, shape {shape}" if shape is not None else repr(value)
    return ValueError(f"{call}: {name} ({what}) must be {want}")


def tensor(call: str, name: str, t: Any, dtype: torch.dtype, shape: Tuple[Optional[int], ...],
           ) -> torch.Tensor:
    """`t`, checked: a CPU tensor of `dtype` and `shape` (None: any length), made contiguous.
    (Every call of every operator checks several tensors, so the message is made only for a
    tensor that fails.)"""
    ok = isinstance(t, torch.Tensor) and t.dtype == dtype and t.device.type == "cpu" \
        and t.dim() == len(shape)
    if ok:
        for n, m in zip(shape, t.shape):
            if n is not None and n != m:
                ok = False
                break
    if not ok:
        dims = ", ".join("*" if n is None else str(n) for n in shape)
        raise bad(call, name, t, f"a CPU {dtype} tensor of shape [{dims}]")
    return t.contiguous()


def integer(call: str, name: str, v: Any, low: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
        raise ValueError(f"{call}: {name}={v!r} must be an int of at least {low}")
    return int(v)


def positive_int(call: str, name: str, v: Any) -> int:
    return integer(call, name, v, 1)


def check_range(call: str, name: str, idx: torch.Tensor, experts: int) -> None:
    """Every index of `idx` in 0..experts-1, or -1 for none."""
    if idx.numel() == 0:
        return
    low, high = torch.aminmax(idx)  # one pass; the position is looked for only when needed
    if int(low) < -1 or int(high) >= experts:
        bad_at = (idx < -1) | (idx >= experts)
        t, k = (int(v) for v in bad_at.nonzero()[0])
        raise ValueError(f"{call}: {name}[{t}][{k}]={int(idx[t, k])} is out of range "
                         f"(0..{experts - 1}, or -1 for none)")
