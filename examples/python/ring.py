"""Ring exchange on symmetric arrays: every PE puts a block to its right neighbour and raises
the neighbour's signal; each PE waits for its own signal and checks that the block came from its
left neighbour.

    shmoerun -n 4 python3 examples/python/ring.py
"""

import numpy as np

import shmoe

shmoe.init()
me, n = shmoe.my_pe(), shmoe.n_pes()
right, left = (me + 1) % n, (me - 1) % n

inbox = shmoe.zeros(1024, np.int64)  # symmetric: one on every PE
signal = shmoe.zeros(1, np.uint64)
block = me * 1_000_000 + np.arange(1024, dtype=np.int64)  # says who sent it

shmoe.put_signal(inbox, block, signal, 1, "add", right)  # the data, then the signal
shmoe.signal_wait_until(signal, "ge", 1)

expected = left * 1_000_000 + np.arange(1024)
ok = np.array_equal(inbox, expected)
# A view of the right neighbour's inbox by load/store, where it shares this host.
try:
    ok &= bool(shmoe.peer_array(inbox, right)[0] == me * 1_000_000)
except shmoe.Error:
    pass  # the neighbour runs on another host
shmoe.barrier_all()
shmoe.free(signal)
shmoe.free(inbox)
print(f"PE {me}/{n}: {'ok' if ok else 'WRONG'}", flush=True)
shmoe.finalize()
raise SystemExit(0 if ok else 1)
