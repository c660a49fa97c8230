"""The package where torch cannot be imported (as on a machine without PyTorch): the core and
the MoE buffer work with numpy alone, shmoe.torch says what is missing, and calls before init
and after finalize are refused. Run under shmoerun; exits non-zero on any failure."""

import sys

sys.modules["torch"] = None  # `import torch` now raises ImportError, as where it is not installed

import numpy as np  # noqa: E402

import shmoe  # noqa: E402
from shmoe import moe  # noqa: E402


def refused(call, exc_type, text):
    try:
        call()
    except exc_type as e:
        assert text in str(e), f"{text!r} not in {str(e)!r}"
    else:
        raise AssertionError(f"no {exc_type.__name__} ({text})")


refused(shmoe.my_pe, shmoe.Error, "shmoe.my_pe: call shmoe.init() first")
refused(lambda: shmoe.zeros(3), shmoe.Error, "shmoe.zeros: call shmoe.init() first")
refused(lambda: moe.MoeBuffer(1, 1, 1, 1, "float32"), shmoe.Error, "call shmoe.init() first")
try:
    import shmoe.torch  # noqa: F401
except ImportError:
    pass
else:
    raise AssertionError("shmoe.torch imported without torch")

shmoe.init()
me, n = shmoe.my_pe(), shmoe.n_pes()
a = shmoe.zeros(4, np.int32)
shmoe.put(a, np.arange(4, dtype=np.int32) + 10 * me, (me + 1) % n)
shmoe.barrier_all()
assert a.tolist() == [10 * ((me - 1) % n) + i for i in range(4)], a
shmoe.free(a)

buf = moe.MoeBuffer(4, 8, 2 * n, 1, "bfloat16")
x = shmoe.bfloat16.from_float32(np.arange(32, dtype=np.float32).reshape(4, 8) + me)
idx = np.array([[(me * 2 + t) % (2 * n)] for t in range(4)])
recv_x, recv_idx, _, counts, handle = buf.dispatch(x, idx, np.ones((4, 1), np.float32))
assert recv_x.dtype == np.uint16 and sum(counts) == recv_x.shape[0]
out = buf.combine(recv_x, handle)
assert np.array_equal(out, x), "a weight-1 round trip must return the tokens"
buf.close()

shmoe.finalize()
refused(shmoe.barrier_all, shmoe.Error, "shmoe.barrier_all: shmoe.finalize() has been called")
refused(shmoe.init, shmoe.Error, "shmoe.init: shmoe was finalized in this process")
assert "torch" not in sys.modules or sys.modules["torch"] is None
print(f"PE {me}: ok without torch")
