"""What the binding needs to know about an array argument (a numpy.ndarray, or a CPU
torch.Tensor where torch is in use), and how results are made in the caller's kind of array.

torch is never imported here: a tensor can only come from a program that imported torch
already, so sys.modules tells whether one may be given."""

import sys

import numpy as np

# Element types by name. For numpy they are dtype.name; bfloat16 is torch's (numpy has none: its
# bit patterns travel as uint16).
_TORCH_NAMES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
    "float64", "complex64", "complex128",
)

# numpy's dtype for each element type name (bfloat16: its bit patterns).
def numpy_dtype(name):
    return np.dtype(np.uint16) if name == "bfloat16" else np.dtype(name)


def loaded_torch():
    """The torch module if this program imported it, else None."""
    return sys.modules.get("torch")


def torch_dtype_name(dtype):
    torch = loaded_torch()
    for name in _TORCH_NAMES:
        if getattr(torch, name, None) == dtype:
            return name
    return None


def is_tensor(obj):
    torch = loaded_torch()
    return torch is not None and isinstance(obj, torch.Tensor)


class ArrayArg:
    """An argument's memory: address, size, element type, and the array itself."""

    __slots__ = ("obj", "address", "nbytes", "size", "shape", "dtype", "itemsize", "tensor")

    def __repr__(self):
        return f"{self.dtype}{list(self.shape)} at {self.address:#x}"


def describe(obj, call, param, *, writable=False):
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
        a.address = obj.__array_interface__["data"][0]
        a.nbytes = obj.nbytes
        a.size = obj.size
        a.shape = obj.shape
        a.dtype = obj.dtype.name
        a.itemsize = obj.itemsize
        return a
    if is_tensor(obj):
        if obj.device.type != "cpu":
            raise ValueError(f"{call}: {param} is on device {obj.device}; shmoe takes CPU tensors")
        if not obj.is_contiguous():
            raise ValueError(f"{call}: {param} must be contiguous (its strides are {obj.stride()})")
        name = torch_dtype_name(obj.dtype)
        if name is None:
            raise TypeError(f"{call}: {param} has dtype {obj.dtype}, which shmoe does not carry")
        a.tensor = True
        a.address = obj.data_ptr()
        a.size = obj.numel()
        a.itemsize = obj.element_size()
        a.nbytes = a.size * a.itemsize
        a.shape = tuple(obj.shape)
        a.dtype = name
        return a
    kinds = "a numpy.ndarray" + (" or a CPU torch.Tensor" if loaded_torch() else "")
    raise TypeError(f"{call}: {param} must be {kinds}, not {type(obj).__name__}")


def as_numpy(obj):
    """A numpy view of an array or tensor (bfloat16 tensors as their uint16 bit patterns)."""
    if isinstance(obj, np.ndarray):
        return obj
    torch = loaded_torch()
    if obj.dtype == torch.bfloat16:
        return obj.view(torch.int16).numpy().view(np.uint16)
    return obj.numpy()


def from_numpy(array, tensor, dtype_name=None):
    """`array` as a tensor when `tensor` (zero-copy; uint16 bits become bfloat16 when dtype_name
    says so), else as it is."""
    if not tensor:
        return array
    torch = loaded_torch()
    if dtype_name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


class _Memory:
    """Memory at an address, seen through numpy's array interface; keeps `owner` alive."""

    def __init__(self, address, shape, dtype, owner=None):
        self.owner = owner
        self.__array_interface__ = {
            "data": (address, False),
            "shape": tuple(shape),
            "typestr": dtype.str,
            "version": 3,
        }


def array_at(address, shape, dtype, owner=None):
    """A numpy array over memory the caller keeps valid (`owner` is kept alive with it)."""
    return np.asarray(_Memory(address, shape, np.dtype(dtype), owner))
