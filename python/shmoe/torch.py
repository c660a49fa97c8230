"""Symmetric CPU tensors (imports torch; the rest of shmoe works without it). Every shmoe call
that takes an array also takes a CPU tensor, zero-copy."""

import torch as _torch

from ._arrays import from_numpy, numpy_dtype, torch_dtype_name
from .core import symmetric_numpy

__all__ = ["zeros", "empty"]


def _make(call, shape, dtype, zero):
    if not isinstance(dtype, _torch.dtype):
        raise TypeError(f"{call}: dtype must be a torch.dtype, not {dtype!r}")
    name = torch_dtype_name(dtype)
    if name is None:
        raise TypeError(f"{call}: dtype {dtype} is not one shmoe carries")
    return from_numpy(symmetric_numpy(call, shape, numpy_dtype(name), zero), True, name)


def zeros(shape, dtype=_torch.float32):
    """A tensor of zeros on the symmetric heap (collective, as shmoe.zeros); bfloat16 too."""
    return _make("shmoe.torch.zeros", shape, dtype, True)


def empty(shape, dtype=_torch.float32):
    """As zeros, without setting the elements."""
    return _make("shmoe.torch.empty", shape, dtype, False)
