"""Megatron-core's DeepEP path (MoEFlexTokenDispatcher with moe_flex_dispatcher_backend="deepep",
megatron/core/transformer/moe/fused_a2a.py) on deep_ep over shmoe, on CPU tensors in a spawned
gloo job with Megatron's model-parallel groups (parallel_state.initialize_model_parallel, as its
unit tests set them up). The dispatcher's whole cycle (preprocess, dispatch, per-expert
permutation, the experts' work, unpermutation, combine, postprocess) is checked against a local
float64 reference of the same MoE on this rank's tokens, forward and backward. No file of
Megatron-core is edited and nothing of it is shimmed: fused_a2a's autograd Functions have no
device-specific registration. Megatron's jit_fuser (torch.compile of dispatch_preprocess) is
turned off with Megatron's own switch (megatron.core.jit.disable_jit_fuser): compiling on 2 CPU
cores costs more than the test, and the compiled and eager code compute the same."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("megatron.core", reason="megatron-core is not installed (python/requirements-"
                    "clients.txt pins it; scripts/venv.sh installs it)")

import torch  # noqa: E402

from _ranks import RANKS, close_enough, spawn_ranks  # noqa: E402

HIDDEN, EXPERTS_PER_RANK, TOPK, TOKENS = 64, 4, 2, 48


def _dispatcher(rank, n):
    from megatron.core import jit

    jit.disable_jit_fuser()  # before token_dispatcher binds jit_fuser at its import
    from megatron.core import parallel_state
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.moe.token_dispatcher import MoEFlexTokenDispatcher
    from megatron.core.transformer.transformer_config import TransformerConfig

    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1,
                                                 pipeline_model_parallel_size=1,
                                                 expert_model_parallel_size=n)
    config = TransformerConfig(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=4, num_moe_experts=n * EXPERTS_PER_RANK,
        moe_router_topk=TOPK, moe_token_dispatcher_type="flex",
        moe_flex_dispatcher_backend="deepep", moe_router_dtype="fp32", bf16=True,
        params_dtype=torch.bfloat16, use_cpu_initialization=True, moe_permute_fusion=False,
        expert_model_parallel_size=n)
    pgs = ProcessGroupCollection.use_mpu_process_groups(required_pgs=["ep", "expt_tp", "tp_ep"])
    local = list(range(rank * EXPERTS_PER_RANK, (rank + 1) * EXPERTS_PER_RANK))
    return MoEFlexTokenDispatcher(EXPERTS_PER_RANK, local, config, pg_collection=pgs), local


def _routing(rank, n, step, exact):
    """This rank's tokens, routing map [tokens, experts] and probabilities (zero off the top-k;
    with `exact`, 1/2 for each of the two experts, so that x * p and their sum are exact)."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    experts = n * EXPERTS_PER_RANK
    x = torch.randn((TOKENS, HIDDEN), generator=g).to(torch.bfloat16)
    logits = torch.randn((TOKENS, experts), generator=g)
    top = logits.topk(TOPK, dim=1).indices
    routing_map = torch.zeros((TOKENS, experts), dtype=torch.bool).scatter_(1, top, True)
    p = torch.full((TOKENS, TOPK), 0.5) if exact else torch.softmax(logits.gather(1, top), 1)
    probs = torch.zeros((TOKENS, experts)).scatter_(1, top, p)
    dy = torch.randn((TOKENS, HIDDEN), generator=g).to(torch.bfloat16)
    return x, routing_map, probs, dy


def _weights(n, identity):
    """Every expert's [hidden, hidden] bf16 matrix, the same on every rank."""
    if identity:
        return torch.eye(HIDDEN, dtype=torch.bfloat16).expand(n * EXPERTS_PER_RANK, -1, -1)
    g = torch.Generator().manual_seed(77)
    return (torch.randn((n * EXPERTS_PER_RANK, HIDDEN, HIDDEN), generator=g) / HIDDEN ** 0.5
            ).to(torch.bfloat16)


def _cycle(dispatcher, local, w, x, routing_map, probs):
    """Megatron's flex dispatcher cycle (the order MoELayer calls it in), with expert e's work
    y = (rows @ W_e) * p in bf16 (fp32 product of the rows and the float32 probabilities)."""
    hidden, p = dispatcher.dispatch_preprocess(x, routing_map, probs)
    hidden, p = dispatcher.token_dispatch(hidden, p)
    rows, tokens_per_expert, p = dispatcher.dispatch_postprocess(hidden, p)
    counts = [int(c) for c in tokens_per_expert.tolist()]
    assert sum(counts) == rows.shape[0], (counts, rows.shape)
    outs = []
    for e, part, pp in zip(local, rows.split(counts), p.split(counts)):
        outs.append(((part @ w[e]).float() * pp.unsqueeze(1)).to(torch.bfloat16))
    out = torch.cat(outs) if outs else rows[:0]
    out = dispatcher.combine_preprocess(out)
    out = dispatcher.token_combine(out)
    return dispatcher.combine_postprocess(out), counts


def _reference(w, x, routing_map, probs, dy):
    """The same MoE on this rank's tokens alone, in float64 with autograd: out[t] = sum over
    t's experts e of probs[t, e] * (x[t] @ W_e)."""
    x64 = x.double().requires_grad_(True)
    p64 = probs.double().requires_grad_(True)
    per_expert = torch.einsum("th,ehk->tek", x64, w.double())  # [tokens, experts, hidden]
    out = (per_expert * (p64 * routing_map).unsqueeze(2)).sum(1)
    out.backward(dy.double())
    # The probabilities' gradient is a dot product over hidden: its terms' magnitude.
    dp_terms = (per_expert.detach().abs() * dy.double().abs().unsqueeze(1)).sum(2)
    return out.detach(), x64.grad, p64.grad, dp_terms


def _step(rank, n, dispatcher, local, step, exact=False, silent_rank=None):
    x, routing_map, probs, dy = _routing(rank, n, step, exact)
    if silent_rank is not None:  # no token goes to silent_rank's experts
        lo = silent_rank * EXPERTS_PER_RANK
        probs[:, lo:lo + EXPERTS_PER_RANK] = 0
        routing_map[:, lo:lo + EXPERTS_PER_RANK] = False
        g = torch.Generator().manual_seed(5000 + rank)
        others = [e for e in range(n * EXPERTS_PER_RANK) if not lo <= e < lo + EXPERTS_PER_RANK]
        for t in range(TOKENS):
            if routing_map[t].sum() < TOPK:  # re-route to experts elsewhere
                routing_map[t] = False
                probs[t] = 0
                pick = torch.tensor(others)[torch.randperm(len(others), generator=g)[:TOPK]]
                routing_map[t, pick] = True
                probs[t, pick] = 1.0 / TOPK
    w = _weights(n, identity=exact)
    xg = x.clone().requires_grad_(True)
    pg = probs.clone().requires_grad_(True)
    y, counts = _cycle(dispatcher, local, w, xg, routing_map, pg)
    y.backward(dy)
    if rank == 0:
        print(f"step {step} at {n} ranks{' (identity experts, p = 1/2)' if exact else ''}:",
              flush=True)
    if exact:
        # Combine restores the input: x/2 + x/2 == x exactly in bf16.
        assert torch.equal(y, x), f"combine did not restore the input: max |err| " \
            f"{float((y.float() - x.float()).abs().max())}"
        return counts
    ref, dx_ref, dp_ref, dp_terms = _reference(w, x, routing_map, probs, dy)
    # Each output is at most TOPK bf16 products (the matmul rounded once, then scaled by p and
    # rounded), summed in bf16 on a rank and in fp32 across ranks: 4 roundings of its largest
    # terms bound it; the input gradient goes through the same steps backward (cached dispatch
    # of dy, the bf16 matmul with W_e^T, the scaled rows' combine): 4 again.
    close_enough("output vs float64 reference", y, ref, ref.abs().max(), 4)
    close_enough("input gradient", xg.grad, dx_ref, dx_ref.abs().max(), 4)
    # The probabilities' gradient: a float32 dot product of dy with the bf16-rounded expert
    # output (one rounding, 2^-8 relative, of each term): bounded by 2 roundings of the sum of
    # its terms' magnitudes, taken where the route exists (elsewhere it must be 0).
    close_enough("probs gradient", pg.grad, dp_ref, dp_terms, 2, "sum |dy * expert output|")
    assert bool((pg.grad[~routing_map] == 0).all())
    return counts


def _scenario(rank, n):
    dispatcher, local = _dispatcher(rank, n)
    _step(rank, n, dispatcher, local, 1, exact=True)
    _step(rank, n, dispatcher, local, 2)
    _step(rank, n, dispatcher, local, 3)  # a second cycle in the same process
    counts = _step(rank, n, dispatcher, local, 4, silent_rank=n - 1)
    if rank == n - 1:
        assert counts == [0] * EXPERTS_PER_RANK, counts


def test_flex_dispatcher_deepep_backend():
    """Dispatch, the experts' work and combine: combine restores the input (identity experts,
    exact probabilities), outputs and gradients of x and the probabilities equal the float64
    reference within bf16 tolerance, twice, then with a rank that receives no token."""
    spawn_ranks(_scenario, RANKS)
