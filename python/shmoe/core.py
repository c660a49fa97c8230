"""The OpenSHMEM core: setup, symmetric arrays, RMA, signals, atomics and point-to-point waits.

Every argument is converted before the C library sees it (it ends the process on bad
arguments): a bad one raises TypeError, ValueError or shmoe.Error naming the call, the parameter
and the value. Collective calls (zeros, empty, free) agree through the library first, so a bad
argument on one PE raises on every PE."""

from __future__ import annotations

import numbers
import operator
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _shmoe
from ._arrays import ArrayArg, array_over, describe, from_numpy, numpy_dtype
from ._runtime import Error, agreed, init, finalize, require_init, state

__all__ = [
    "init", "finalize", "my_pe", "n_pes", "barrier_all", "sync_all", "quiet", "fence",
    "zeros", "empty", "free", "is_symmetric", "peer_array", "put", "get", "put_signal",
    "signal_fetch", "signal_wait_until", "wait_until", "test",
    "SIGNAL_SET", "SIGNAL_ADD", "CMP_EQ", "CMP_NE", "CMP_GT", "CMP_GE", "CMP_LT", "CMP_LE",
]

SIGNAL_SET = _shmoe.SIGNAL_SET
SIGNAL_ADD = _shmoe.SIGNAL_ADD
CMP_EQ, CMP_NE, CMP_GT, CMP_GE, CMP_LT, CMP_LE = (
    _shmoe.CMP_EQ, _shmoe.CMP_NE, _shmoe.CMP_GT, _shmoe.CMP_GE, _shmoe.CMP_LT, _shmoe.CMP_LE)
_SIGNAL_OPS = {"set": SIGNAL_SET, "add": SIGNAL_ADD}
_COMPARISONS = {"eq": CMP_EQ, "ne": CMP_NE, "gt": CMP_GT, "ge": CMP_GE, "lt": CMP_LT, "le": CMP_LE}

# The specification's type name of each element type (shmem_TYPENAME_...).
_SHMEM_TYPENAMES = {
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float32": "float", "float64": "double", "float128": "longdouble",
    "complex64": "complexf", "complex128": "complexd",
}


def shmem_function(kind, dtype):
    """The _shmoe function of family `kind` (e.g. "atomic_fetch_add", "sum_reduce") for the
    element type `dtype`, or None where the specification has none."""
    typename = _SHMEM_TYPENAMES.get(dtype)
    return getattr(_shmoe, f"{kind}_{typename}", None) if typename else None


def supported_dtypes(kind):
    return [d for d in _SHMEM_TYPENAMES if shmem_function(kind, d) is not None]


def typed_function(call, kind, param, arg):
    f = shmem_function(kind, arg.dtype)
    if f is None:
        raise TypeError(
            f"{call}: {param} has dtype {arg.dtype}, which has no {kind.replace('_', ' ')} "
            f"(supported: {', '.join(supported_dtypes(kind))})")
    return f


def my_pe():
    require_init("shmoe.my_pe")
    return state.my_pe


def n_pes():
    require_init("shmoe.n_pes")
    return state.n_pes


def barrier_all():
    require_init("shmoe.barrier_all")
    _shmoe.barrier_all()


def sync_all():
    require_init("shmoe.sync_all")
    _shmoe.sync_all()


def quiet():
    require_init("shmoe.quiet")
    _shmoe.quiet()


def fence():
    require_init("shmoe.fence")
    _shmoe.fence()


# ---- Symmetric arrays ------------------------------------------------------------------------


def _shape_of(call: str, shape: Any) -> Tuple[int, ...]:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        shape = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(
            f"{call}: shape must be an int or a sequence of ints, not {shape!r}") from None
    for i, n in enumerate(shape):
        if n < 0:
            raise ValueError(f"{call}: shape[{i}]={n} is negative")
    return shape


def symmetric_numpy(call: str, shape: Any, dtype: Callable[[], np.dtype],
                    zero: bool) -> np.ndarray:
    """A numpy array on the symmetric heap (collective: every PE, same shape and dtype, which
    the PEs agree on before anything is allocated). `dtype` converts the caller's dtype."""
    require_init(call)

    def convert() -> Tuple[Tuple[int, ...], np.dtype, int]:
        t = dtype()
        dims = _shape_of(call, shape)
        return dims, t, int(np.prod(dims, dtype=np.int64)) * t.itemsize

    dims, t, nbytes = agreed(call, convert, lambda c: [("bytes", c[2]), ("itemsize", c[1].itemsize)])
    memory = _shmoe.malloc(nbytes)
    if memory is None:
        raise MemoryError(
            f"{call}: the symmetric heap has no room for {nbytes} bytes; raise "
            "SHMEM_SYMMETRIC_SIZE (e.g. SHMEM_SYMMETRIC_SIZE=2G)")
    a = array_over(memory, dims, t)
    if zero:
        a.fill(0)
        _shmoe.barrier_all()  # no PE may write into a peer's copy before it is zeroed
    return a


_REFUSED_KINDS = {"O": "object", "U": "string", "S": "bytes", "V": "void"}


def _numpy_dtype(call: str, dtype: Any) -> np.dtype:
    if is_tensor_dtype(dtype):
        raise TypeError(f"{call}: dtype {dtype} is a torch dtype: use "
                        f"shmoe.torch.{call.split('.')[-1]}")
    try:
        t = np.dtype(dtype)
    except TypeError:
        hint = (" (numpy has no bfloat16: use shmoe.torch with torch.bfloat16)"
                if str(dtype) == "bfloat16" else "")
        raise TypeError(f"{call}: dtype={dtype!r} is not a numpy dtype{hint}") from None
    if t.kind in _REFUSED_KINDS or t.hasobject:
        raise TypeError(f"{call}: dtype={t} holds {_REFUSED_KINDS.get(t.kind, 'object')} values, "
                        "which cannot live in symmetric memory (a put would send this process's "
                        "pointers or uninterpreted bytes); use a numeric or bool dtype")
    return t


def is_tensor_dtype(dtype: Any) -> bool:
    from ._arrays import loaded_torch  # noqa: PLC0415

    torch = loaded_torch()
    return torch is not None and isinstance(dtype, torch.dtype)


def zeros(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """A numpy array of zeros on the symmetric heap (collective: every PE calls it with the same
    shape and dtype). Free it with shmoe.free (collective); shmoe.finalize frees what is left."""
    return symmetric_numpy("shmoe.zeros", shape, lambda: _numpy_dtype("shmoe.zeros", dtype), True)


def empty(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """As zeros, without setting the elements."""
    return symmetric_numpy("shmoe.empty", shape, lambda: _numpy_dtype("shmoe.empty", dtype),
                           False)


def free(a: Any) -> None:
    """Frees the symmetric array `a` (collective). Its memory, and that of every view of it, goes
    back to the heap: shmoe refuses them afterwards, and what they read is undefined."""
    call = "shmoe.free"
    require_init(call)

    def convert() -> ArrayArg:
        arg = describe(a, call, "a")
        found = _shmoe.heap_allocation(arg.buffer)
        if found is None or found[0] != 0:
            raise ValueError(
                f"{call}: a (at {arg.address:#x}) is not an array from shmoe.zeros/empty (or "
                "shmoe.torch.zeros/empty) that is still allocated")
        return arg

    _shmoe.free(agreed(call, convert).buffer)


def _pe(call, pe, param="pe"):
    if isinstance(pe, bool) or not isinstance(pe, numbers.Integral):
        raise TypeError(f"{call}: {param} must be an int, not {type(pe).__name__}")
    if not 0 <= pe < state.n_pes:
        raise ValueError(f"{call}: {param}={pe} is out of range (0..{state.n_pes - 1})")
    return int(pe)


def symmetric(call: str, obj: Any, param: str, pe: Optional[int] = None, *,
              writable: bool = False) -> ArrayArg:
    """The ArrayArg of `obj`, which must lie in a live symmetric allocation (and, with `pe`, be
    reachable on that PE)."""
    arg = describe(obj, call, param, writable=writable)
    if _shmoe.heap_allocation(arg.buffer) is None:
        raise ValueError(
            f"{call}: {param} (at {arg.address:#x}, {arg.nbytes} bytes) is not symmetric: it must "
            "lie in an array from shmoe.zeros/empty (or shmoe.torch.zeros/empty) that is still "
            "allocated")
    if pe is not None and not _shmoe.addr_accessible(arg.buffer, pe):
        raise Error(f"{call}: {param} is not accessible on PE {pe}")
    return arg


def is_symmetric(a: Any) -> bool:
    """Whether `a` lies in a live symmetric allocation."""
    require_init("shmoe.is_symmetric")
    arg = describe(a, "shmoe.is_symmetric", "a")
    return _shmoe.heap_allocation(arg.buffer) is not None


def peer_array(a, pe):
    """A view of PE `pe`'s copy of the symmetric array `a`, by load and store (shmem_ptr): the
    same shape and dtype, and a tensor if `a` is one. shmoe.Error for a PE on another host."""
    call = "shmoe.peer_array"
    require_init(call)
    pe = _pe(call, pe)
    arg = symmetric(call, a, "a")
    memory = _shmoe.peer_view(arg.buffer, pe)
    if memory is None:
        raise Error(f"{call}: PE {pe} cannot be reached by load/store from PE {state.my_pe} "
                    "(it runs on another host); use shmoe.get/put")
    view = array_over(memory, arg.shape, numpy_dtype(arg.dtype))
    return from_numpy(view, arg.tensor, arg.dtype)


def _same_shape(call, dest, src):
    if dest.dtype != src.dtype:
        raise TypeError(f"{call}: dest has dtype {dest.dtype} but src has dtype {src.dtype}")
    if dest.size != src.size:
        raise ValueError(f"{call}: dest has {dest.size} elements but src has {src.size}")


def put(dest, src, pe):
    """Copies the local array `src` into PE `pe`'s copy of the symmetric array `dest`."""
    call = "shmoe.put"
    require_init(call)
    pe = _pe(call, pe)
    d = symmetric(call, dest, "dest", pe)
    s = describe(src, call, "src")
    _same_shape(call, d, s)
    _shmoe.putmem(d.buffer, s.buffer, pe)


def get(dest, src, pe):
    """Copies PE `pe`'s copy of the symmetric array `src` into the local array `dest`."""
    call = "shmoe.get"
    require_init(call)
    pe = _pe(call, pe)
    s = symmetric(call, src, "src", pe)
    d = describe(dest, call, "dest", writable=True)
    _same_shape(call, d, s)
    _shmoe.getmem(d.buffer, s.buffer, pe)


def _signal(call, sig, param="sig", pe=None):
    s = symmetric(call, sig, param, pe, writable=True)
    if s.dtype != "uint64" or s.size != 1:
        raise TypeError(f"{call}: {param} must be one uint64 element of a symmetric array "
                        f"(e.g. sigs[i:i+1]), not {s.dtype} of shape {list(s.shape)}")
    return s


def _uint64(call, param, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{call}: {param} must be an int, not {type(value).__name__}")
    if not 0 <= value < 2**64:
        raise ValueError(f"{call}: {param}={value} is out of range (0..2**64-1)")
    return int(value)


def _choice(call, param, value, names):
    if isinstance(value, str):
        if value not in names:
            raise ValueError(f"{call}: {param}={value!r} is not one of {', '.join(names)}")
        return names[value]
    if isinstance(value, numbers.Integral) and int(value) in names.values():
        return int(value)
    raise ValueError(f"{call}: {param}={value!r} is not one of {', '.join(names)} "
                     f"(or their constants)")


def put_signal(dest, src, sig, value, op, pe):
    """put(dest, src, pe), then sets (op "set", SIGNAL_SET) or adds to ("add", SIGNAL_ADD) the
    signal `sig` (one uint64 element of a symmetric array) on PE `pe`, after the data."""
    call = "shmoe.put_signal"
    require_init(call)
    pe = _pe(call, pe)
    d = symmetric(call, dest, "dest", pe)
    s = describe(src, call, "src")
    _same_shape(call, d, s)
    g = _signal(call, sig, pe=pe)
    op = _choice(call, "op", op, _SIGNAL_OPS)
    value = _uint64(call, "value", value)
    _shmoe.putmem_signal(d.buffer, s.buffer, g.buffer, value, op, pe)


def signal_fetch(sig):
    call = "shmoe.signal_fetch"
    require_init(call)
    return _shmoe.signal_fetch(_signal(call, sig).buffer)


def signal_wait_until(sig, cmp, value):
    """Waits until the local signal `sig` compares to `value` as `cmp` says ("eq", "ne", "gt",
    "ge", "lt", "le" or CMP_*); returns the signal's value."""
    call = "shmoe.signal_wait_until"
    require_init(call)
    g = _signal(call, sig)
    cmp = _choice(call, "cmp", cmp, _COMPARISONS)
    return _shmoe.signal_wait_until(g.buffer, cmp, _uint64(call, "value", value))


# ---- One element of a symmetric array: atomics and point-to-point waits ----------------------


def _element(call: str, arg: ArrayArg, index: Any) -> int:
    """The byte offset of element `index` (an int, negative from the end, or a tuple of ints)."""
    if isinstance(index, tuple):
        if len(index) != len(arg.shape):
            raise ValueError(f"{call}: index {index} has {len(index)} subscripts but a has "
                             f"{len(arg.shape)} dimensions")
        flat = 0
        for axis, (i, n) in enumerate(zip(index, arg.shape)):
            i = _index_value(call, i, n, f"index[{axis}]")
            flat = flat * n + i
    else:
        flat = _index_value(call, index, arg.size, "index")
    return flat * arg.itemsize


def _index_value(call, i, n, param):
    if isinstance(i, bool) or not isinstance(i, numbers.Integral):
        raise TypeError(f"{call}: {param} must be an int, not {type(i).__name__}")
    if not -n <= i < n:
        raise IndexError(f"{call}: {param}={i} is out of range for {n} elements")
    return int(i) % n


def _scalar(call, param, value, dtype):
    """`value` as the element type `dtype` may hold it."""
    kind = numpy_dtype(dtype).kind
    if kind in "iu":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{call}: {param} must be an int for dtype {dtype}, not "
                            f"{type(value).__name__}")
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ValueError(f"{call}: {param}={value} is out of range for {dtype} "
                             f"({info.min}..{info.max})")
        return int(value)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{call}: {param} must be a number, not {type(value).__name__}")
    return float(value)


def _atomic(op, operands):
    """shmoe.atomic_<op>(a, index, *operands, pe): the operation on element `index` of PE pe's
    copy of the symmetric array `a`; returns the old value for the fetching ones."""
    call = f"shmoe.atomic_{op}"

    def atomic(a, index, *args):
        require_init(call)
        if len(args) != len(operands) + 1:
            names = ", ".join(["a", "index", *operands, "pe"])
            raise TypeError(f"{call}() takes ({names}), got {2 + len(args)} arguments")
        pe = _pe(call, args[-1])
        arg = symmetric(call, a, "a", pe, writable=True)
        f = typed_function(call, f"atomic_{op}", "a", arg)
        offset = _element(call, arg, index)
        values = [_scalar(call, name, v, arg.dtype) for name, v in zip(operands, args[:-1])]
        return f(arg.buffer, offset, *values, pe)

    atomic.__name__ = f"atomic_{op}"
    atomic.__qualname__ = atomic.__name__
    atomic.__doc__ = (f"atomic_{op}(a, index, {''.join(o + ', ' for o in operands)}pe): "
                      f"shmem_TYPE_atomic_{op} on element `index` of symmetric array `a` on PE pe.")
    return atomic


_ATOMICS = {
    "fetch": (), "set": ("value",), "swap": ("value",), "compare_swap": ("cond", "value"),
    "fetch_inc": (), "inc": (), "fetch_add": ("value",), "add": ("value",),
    "fetch_and": ("value",), "and": ("value",), "fetch_or": ("value",), "or": ("value",),
    "fetch_xor": ("value",), "xor": ("value",),
}
for _op, _operands in _ATOMICS.items():
    globals()[f"atomic_{_op}"] = _atomic(_op, _operands)
    __all__.append(f"atomic_{_op}")


def _p2p(kind, call, a, index, cmp, value):
    require_init(call)
    arg = symmetric(call, a, "a")
    f = typed_function(call, kind, "a", arg)
    cmp = _choice(call, "cmp", cmp, _COMPARISONS)
    return f(arg.buffer, _element(call, arg, index), cmp,
             _scalar(call, "value", value, arg.dtype))


def wait_until(a, index, cmp, value):
    """Waits until element `index` of the local symmetric array `a` compares to `value` as `cmp`
    says (shmem_TYPE_wait_until)."""
    _p2p("wait_until", "shmoe.wait_until", a, index, cmp, value)


def test(a, index, cmp, value):
    """Whether element `index` of the local symmetric array `a` compares to `value` as `cmp`
    says (shmem_TYPE_test)."""
    return _p2p("test", "shmoe.test", a, index, cmp, value)

