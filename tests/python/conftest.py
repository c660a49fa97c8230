"""Shared by the tests: shmoe is initialised by run_pytest.py (every PE runs the same tests in
the same order, since most calls are collective)."""

import numpy as np
import pytest

import shmoe


@pytest.fixture
def me():
    return shmoe.my_pe()


@pytest.fixture
def n():
    return shmoe.n_pes()


def encode(pe, index, dtype):
    """A value that says which PE wrote it and where: pe * 1000 + index (wrapped into small
    integer types, 0/1 for bool)."""
    v = pe * 1000 + np.asarray(index)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return ((pe + np.asarray(index)) % 2).astype(bool)
    if dtype.kind in "iu" and dtype.itemsize == 1:
        v = (pe * 16 + np.asarray(index)) % 128
    elif dtype.kind in "iu" and dtype.itemsize == 2:
        v = (pe * 256 + np.asarray(index)) % 32768
    if dtype.kind == "c":
        return (v + 1j * (v + 0.5)).astype(dtype)
    return v.astype(dtype)


def all_pes_agree(ok):
    """Whether `ok` holds on every PE (collective), so that all PEs take the same branch."""
    flags = shmoe.zeros(2, np.int32)
    flags[0] = 0 if ok else 1
    shmoe.max_reduce(None, flags[1:], flags[:1])
    result = flags[1] == 0
    shmoe.free(flags)
    return bool(result)
