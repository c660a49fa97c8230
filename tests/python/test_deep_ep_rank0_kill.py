"""deep_ep's shrink mode when rank 0 dies: rank 0 of a 4-rank job is SIGKILLed after the first
round, and the others must go on: mask it, and get exact results from the live ranks in every
later call (references as in test_deep_ep_shrink.py: every rank's inputs from its seed, fresh
in each run, exact integer encodings). Nothing of the job may live in rank 0 alone: the config store runs as a
process of its own (deep_ep/_job.py), and the ranks are plain processes started here, with the
torch.distributed store hosted by this process (torch.multiprocessing.spawn and torchrun would
stop the survivors themselves: docs/deep_ep.md). The survivors' teardown runs over the live ranks:
they must end with status 0, and the store process once they have; the test prints the time from
the kill to the survivors' mask.
Also run as one rank: python3 test_deep_ep_rank0_kill.py RANK SIZE STORE_PORT FIRST_ROUND"""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

N, KILLED = 4, 0
TIMEOUT_MS = 2500


def _rank(rank, n, port, first):
    """One rank: round `first` with every rank; then rank 0 kills itself, and the others run
    the next two rounds, a clean and one more round without it, each checked exactly with rank 0
    masked (a round's inputs come from its number)."""
    from test_deep_ep_shrink import HIDDEN, LOCAL, TOKENS, _mask, _round

    import deep_ep
    from deep_ep import _job

    store = dist.TCPStore("127.0.0.1", port, n, is_master=False)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=n)
    hint = deep_ep.Buffer.get_low_latency_rdma_size_hint(TOKENS, HIDDEN, n, n * LOCAL)
    buffer = deep_ep.Buffer(dist.group.WORLD, 0, hint, low_latency_mode=True,
                            explicitly_destroy=True, enable_shrink=True)
    _round(rank, n, buffer, first, set())
    if rank == KILLED:
        print(f"store pid {_job._store.pid}", flush=True)
        print(f"killed at {time.time()}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    masked_at = _round(rank, n, buffer, first + 1, {KILLED})
    _round(rank, n, buffer, first + 2, {KILLED})
    buffer.clean_low_latency_buffer(TOKENS, HIDDEN, n * LOCAL)
    assert _mask(buffer, n) == {KILLED}
    _round(rank, n, buffer, first + 3, {KILLED})
    print(f"rank {rank}: went on, masked at {masked_at}", flush=True)
    # The teardown (destroy, then shmoe's finalize at exit) runs over the live ranks: the
    # survivors end with status 0, and the store with the last of them. torch.distributed's
    # group is left alone: its collectives would wait for rank 0.
    buffer.destroy()


def _ended(pid):
    """Whether process `pid` has ended (gone, or a zombie that no longer holds its sockets)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_rank0_killed_the_others_go_on(tmp_path):
    store = dist.TCPStore("127.0.0.1", 0, N, is_master=True, wait_for_workers=False)
    env = dict(os.environ, SHMOE_PE_LOSS="continue", SHMOE_SHRINK_TIMEOUT_MS=str(TIMEOUT_MS))
    first = random.randrange(1 << 20)
    print(f"first round {first}")
    logs = [tmp_path / f"rank{r}.log" for r in range(N)]
    ranks = []
    for r in range(N):
        with open(logs[r], "w") as log:
            ranks.append(subprocess.Popen([sys.executable, __file__, str(r), str(N),
                                           str(store.port), str(first)], env=env, stdout=log,
                                          stderr=subprocess.STDOUT))
    try:
        statuses = [p.wait(timeout=150) for p in ranks]
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait()
    out = [log.read_text() for log in logs]
    assert statuses[KILLED] == -signal.SIGKILL, out[KILLED]
    for r in range(N):
        if r != KILLED:
            assert statuses[r] == 0 and f"rank {r}: went on" in out[r], out[r]
    store_pid = int(out[KILLED].split("store pid ")[1].split()[0])
    killed_at = float(out[KILLED].split("killed at ")[1].split()[0])
    masks = [float(o.split("went on, masked at ")[1].split()[0]) for o in out if "went on" in o]
    print(f"kill to mask: {min(masks) - killed_at:.2f} to {max(masks) - killed_at:.2f} s")
    # Each survivor's connection to the store ended with its process: the store must follow.
    deadline = time.time() + 10
    while not _ended(store_pid) and time.time() < deadline:
        time.sleep(0.1)
    assert _ended(store_pid), f"the config store (pid {store_pid}) outlived every rank"


def test_joining_a_store_apart_refuses_bad_arguments():
    """shmoe.init(..., store_apart=True) (shmoe_init_joining) names what is wrong and starts
    nothing: store_apart without rank and the rest, a store without its port, a bad rank."""
    import shmoe

    with pytest.raises(TypeError, match="store_apart=True needs rank, size, store and key"):
        shmoe.init(store_apart=True)
    with pytest.raises(shmoe.Error, match="shmoe_init_joining: store '127.0.0.1:0' is invalid: "
                       "the port is not a number in 1..65535"):
        shmoe.init(rank=0, size=1, store="127.0.0.1:0", key="k" * 64, store_apart=True)
    with pytest.raises(shmoe.Error, match=r"shmoe_init_joining: rank=2 is out of range \(0..1\)"):
        shmoe.init(rank=2, size=2, store="127.0.0.1:5", key="k" * 64, store_apart=True)


if __name__ == "__main__":
    _rank(*(int(a) for a in sys.argv[1:5]))
