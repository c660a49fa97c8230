"""Symmetric CPU tensors (imports torch; the rest of shmoe works without it). Every shmoe call
that takes an array also takes a CPU tensor, zero-copy."""

from __future__ import annotations

from typing import Any, List

import numpy as np
import torch as _torch

from ._arrays import from_numpy, numpy_dtype, torch_dtype_name
from .core import symmetric_numpy

__all__ = ["zeros", "empty"]


def _torch_dtype_name(call: str, dtype: Any) -> str:
    if not isinstance(dtype, _torch.dtype):
        raise TypeError(f"{call}: dtype must be a torch.dtype, not {dtype!r}")
    name = torch_dtype_name(dtype)
    if name is None:
        raise TypeError(f"{call}: dtype {dtype} is not one shmoe carries")
    return name


def _make(call: str, shape: Any, dtype: Any, zero: bool) -> _torch.Tensor:
    names: List[str] = []  # the dtype's name, once converted (collectively, with the shape)

    def convert() -> np.dtype:
        names.append(_torch_dtype_name(call, dtype))
        return numpy_dtype(names[0])

    return from_numpy(symmetric_numpy(call, shape, convert, zero), True, names[0])


def zeros(shape: Any, dtype: Any = _torch.float32) -> _torch.Tensor:
    """A tensor of zeros on the symmetric heap (collective, as shmoe.zeros); bfloat16 too."""
    return _make("shmoe.torch.zeros", shape, dtype, True)


def empty(shape: Any, dtype: Any = _torch.float32) -> _torch.Tensor:
    """As zeros, without setting the elements."""
    return _make("shmoe.torch.empty", shape, dtype, False)
