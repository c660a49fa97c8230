"""What the binding needs to know about an array argument (a numpy.ndarray, or a CPU
torch.Tensor where torch is in use), and how results are made in the caller's kind of array.
The binding takes numpy arrays (buffer protocol); a tensor is handed over as a numpy view of its
memory (bfloat16 as uint16 bit patterns), zero-copy.

torch is never imported here: a tensor can only come from a program that imported torch
already, so sys.modules tells whether one may be given."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Optional, Tuple

import numpy as np

# Element types by name. For numpy they are dtype.name; bfloat16 is torch's (numpy has none: its
# bit patterns travel as uint16).
_TORCH_NAMES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
    "float64", "complex64", "complex128",
)


def numpy_dtype(name: str) -> np.dtype:
    """numpy's dtype for an element type name (bfloat16: its bit patterns)."""
    return np.dtype(np.uint16) if name == "bfloat16" else np.dtype(name)


def loaded_torch() -> Optional[ModuleType]:
    """The torch module if this program imported it, else None."""
    return sys.modules.get("torch")


def torch_dtype_name(dtype: Any) -> Optional[str]:
    torch = loaded_torch()
    for name in _TORCH_NAMES:
        if getattr(torch, name, None) == dtype:
            return name
    return None


def is_tensor(obj: Any) -> bool:
    torch = loaded_torch()
    return torch is not None and isinstance(obj, torch.Tensor)


class ArrayArg:
    """An argument's memory: the numpy view the binding takes, its size and element type."""

    __slots__ = ("obj", "buffer", "nbytes", "size", "shape", "dtype", "itemsize", "tensor")
    obj: Any
    buffer: np.ndarray
    nbytes: int
    size: int
    shape: Tuple[int, ...]
    dtype: str
    itemsize: int
    tensor: bool

    @property
    def address(self) -> int:
        """Where the memory is (for messages only: the binding takes `buffer`)."""
        return int(self.buffer.__array_interface__["data"][0])

    def __repr__(self) -> str:
        return f"{self.dtype}{list(self.shape)} at {self.address:#x}"


def describe(obj: Any, call: str, param: str, *, writable: bool = False) -> ArrayArg:
    """The ArrayArg of `obj`, or TypeError/ValueError naming `param` of `call`."""
    a = ArrayArg()
    a.obj = obj
    if isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            raise ValueError(
                f"{call}: {param} must be C-contiguous (its strides are {obj.strides})")
        if writable and not obj.flags.writeable:
            raise ValueError(f"{call}: {param} is read-only, but the call writes it")
        a.tensor = False
        a.buffer = obj
        a.dtype = obj.dtype.name
    elif is_tensor(obj):
        if obj.device.type != "cpu":
            raise ValueError(f"{call}: {param} is on device {obj.device}; shmoe takes CPU tensors")
        if not obj.is_contiguous():
            raise ValueError(f"{call}: {param} must be contiguous (its strides are {obj.stride()})")
        name = torch_dtype_name(obj.dtype)
        if name is None:
            raise TypeError(f"{call}: {param} has dtype {obj.dtype}, which shmoe does not carry")
        a.tensor = True
        a.buffer = as_numpy(obj.detach())
        a.dtype = name
    else:
        kinds = "a numpy.ndarray" + (" or a CPU torch.Tensor" if loaded_torch() else "")
        raise TypeError(f"{call}: {param} must be {kinds}, not {type(obj).__name__}")
    a.size = a.buffer.size
    a.itemsize = a.buffer.itemsize
    a.nbytes = a.buffer.nbytes
    a.shape = tuple(a.buffer.shape)
    return a


def as_numpy(obj: Any) -> np.ndarray:
    """A numpy view of an array or tensor (bfloat16 tensors as their uint16 bit patterns)."""
    if isinstance(obj, np.ndarray):
        return obj
    torch = loaded_torch()
    assert torch is not None
    if obj.dtype == torch.bfloat16:
        return obj.view(torch.int16).numpy().view(np.uint16)
    return obj.numpy()


def from_numpy(array: np.ndarray, tensor: bool, dtype_name: Optional[str] = None) -> Any:
    """`array` as a tensor when `tensor` (zero-copy; uint16 bits become bfloat16 when dtype_name
    says so), else as it is."""
    if not tensor:
        return array
    torch = loaded_torch()
    assert torch is not None
    if dtype_name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def array_over(memory: Any, shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A writable numpy array over the bytes of `memory` (an object with the buffer protocol,
    which the array keeps alive)."""
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)
