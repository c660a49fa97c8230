"""A small MoE layer forward across PEs: each PE owns num_experts / n_pes experts (SwiGLU MLPs);
tokens are dispatched to their top-k experts, the experts run where they live, and combine sums
their outputs back at each token's PE. Every PE then checks its output against a plain PyTorch
MoE layer (NumPy where torch is not installed) that holds every expert and computes everything
locally.

    shmoerun -n 4 python3 examples/python/moe_layer.py
"""

import numpy as np

import shmoe
from shmoe import moe

try:
    import torch
except ImportError:
    torch = None

TOKENS, HIDDEN, FFN, EXPERTS_PER_PE, TOPK = 32, 64, 128, 2, 2
SEED = 42

shmoe.init()
me, n = shmoe.my_pe(), shmoe.n_pes()
E = EXPERTS_PER_PE * n

# Every PE builds every expert from the seed (it needs them only for the reference check).
rng = np.random.default_rng(SEED)
w_in = (rng.standard_normal((E, FFN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32)
w_out = (rng.standard_normal((E, HIDDEN, FFN // 2)) / np.sqrt(FFN // 2)).astype(np.float32)

# This PE's tokens and routing (a softmax router's top-k).
rng = np.random.default_rng([SEED, me])
x = rng.standard_normal((TOKENS, HIDDEN)).astype(np.float32)
router = np.random.default_rng(SEED + 1).standard_normal((HIDDEN, E)).astype(np.float32)
logits = x @ router
topk_idx = np.argsort(-logits, axis=1)[:, :TOPK]
top = np.take_along_axis(logits, topk_idx, axis=1)
scores = np.exp(top - top.max(axis=1, keepdims=True))
topk_weights = (scores / scores.sum(axis=1, keepdims=True)).astype(np.float32)


def expert(e, rows):
    """SwiGLU MLP of expert e on rows [r, HIDDEN] (float32)."""
    h = rows @ w_in[e].T
    gate, up = h[:, : FFN // 2], h[:, FFN // 2 :]
    return ((gate / (1 + np.exp(-gate))) * up) @ w_out[e].T


buf = moe.MoeBuffer(TOKENS, HIDDEN, E, TOPK, "float32")
recv_x, recv_expert, _, counts, handle = buf.dispatch(x, topk_idx, topk_weights)
y = np.empty_like(recv_x)
first = 0
for local, count in enumerate(counts):  # rows come grouped by local expert
    rows = slice(first, first + count)
    y[rows] = expert(me * EXPERTS_PER_PE + local, recv_x[rows])
    first += count
out = buf.combine(y, handle, topk_weights)
buf.close()

# The reference: the same layer, all in one process.
if torch is not None:
    tx = torch.from_numpy(x)
    ref = torch.zeros(TOKENS, HIDDEN)
    for t in range(TOKENS):
        for k in range(TOPK):
            e = int(topk_idx[t, k])
            h = torch.from_numpy(w_in[e]) @ tx[t]
            act = torch.nn.functional.silu(h[: FFN // 2]) * h[FFN // 2 :]
            ref[t] += float(topk_weights[t, k]) * (torch.from_numpy(w_out[e]) @ act)
    ref = ref.numpy()
    by = "PyTorch"
else:
    ref = np.zeros_like(x)
    for t in range(TOKENS):
        for k in range(TOPK):
            ref[t] += topk_weights[t, k] * expert(int(topk_idx[t, k]), x[t : t + 1])[0]
    by = "NumPy"
err = float(np.max(np.abs(out - ref)))
tolerance = 2e-5 * float(np.max(np.abs(ref)))  # fp32 GEMMs summed in different orders
ok = err <= tolerance
print(f"PE {me}/{n}: rows received per local expert {counts}; max |out - {by} layer| = {err:.2e} "
      f"(tolerance {tolerance:.2e}): {'ok' if ok else 'WRONG'}", flush=True)
shmoe.finalize()
raise SystemExit(0 if ok else 1)
