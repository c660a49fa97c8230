"""bfloat16 for numpy, which has no such type: values travel as their uint16 bit patterns."""

import numpy as np

__all__ = ["from_float32", "to_float32"]


def from_float32(a):
    """The bfloat16 bit patterns (uint16) nearest to the float32 values `a` (ties to even; NaN
    stays NaN)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, (u >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)


def to_float32(bits):
    """The float32 values of bfloat16 bit patterns (exact)."""
    wide = np.ascontiguousarray(bits, dtype=np.uint16).astype(np.uint32)
    return (wide << np.uint32(16)).view(np.float32)
