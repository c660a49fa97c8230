"""A tiny DeepSeek-V3 built from torchtitan 0.2.x's own model code trains 20 steps on CPU in a
spawned gloo job, data-parallel over the ranks: once with its MoE layers' experts sharded over
the ranks through torchtitan's DeepEP path (DeepEPMoE, DeepEPExpertParallel, deep_ep over shmoe),
twice more the same way, and once with torchtitan's plain MoE holding every expert on every rank
(no expert parallelism, no deep_ep: the independent reference). The two expert-parallel runs give
bitwise-equal loss curves; the expert-parallel curve tracks the reference's; both train.

The same shims as test_torchtitan.py (its register_cpu_ops: torchtitan's two custom ops
registered for the CPU key too, and torch.histc counting int64 indices on the CPU)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchtitan", reason="torchtitan is not installed (python/requirements-clients"
                    ".txt pins it; scripts/venv.sh installs it)")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from _ranks import BF16_U, RANKS, spawn_ranks  # noqa: E402
from test_torchtitan import register_cpu_ops  # noqa: E402

STEPS, BATCH, SEQ, VOCAB, EXPERTS_PER_RANK, LR = 20, 2, 16, 256, 4, 0.5


def _args(n, moe_impl):
    from torchtitan.models.deepseek_v3.model.args import DeepSeekV3ModelArgs
    from torchtitan.models.moe import MoEArgs

    args = DeepSeekV3ModelArgs(
        vocab_size=VOCAB, dim=64, inter_dim=128, moe_inter_dim=48, n_layers=3, n_dense_layers=1,
        n_heads=4, max_seq_len=SEQ, q_lora_rank=0, kv_lora_rank=32, qk_nope_head_dim=16,
        qk_rope_head_dim=8, v_head_dim=16, mscale=0.70,
        moe_args=MoEArgs(num_experts=n * EXPERTS_PER_RANK, num_shared_experts=1, top_k=2,
                         score_func="softmax", route_norm=False, score_before_experts=False,
                         use_grouped_mm=False, load_balance_coeff=None))
    args.moe_impl = moe_impl  # what torchtitan's update_from_config sets from the job config
    return args


def _model(n, expert_parallel):
    """The model, the same weights on every rank and in every run; with expert_parallel, each
    MoE layer's experts sharded over the job's "ep" mesh through DeepEPExpertParallel, as
    torchtitan's parallelize_deepseekv3 does for the deepep backend."""
    from torchtitan.models.deepseek_v3.model.model import DeepSeekV3Model

    torch.manual_seed(4321)
    reference = DeepSeekV3Model(_args(n, "standard"))
    with torch.no_grad():
        reference.init_weights(torch.device("cpu"))
    if not expert_parallel:
        return _to_bf16(reference)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    from torchtitan.distributed.expert_parallel import DeepEPExpertParallel

    model = DeepSeekV3Model(_args(n, "deepep"))
    model.load_state_dict(reference.state_dict())
    model = _to_bf16(model)
    mesh = init_device_mesh("cpu", (n,), mesh_dim_names=("ep",))
    for block in model.layers.values():
        if block.moe_enabled:
            parallelize_module(block.moe.experts, mesh,
                               DeepEPExpertParallel(score_before_experts=False))
    return model


def _to_bf16(model):
    """The parameters in bf16; the buffers as they are (the rotary embedding's complex table, the
    router's fp32 bias and token counts, as torchtitan keeps them)."""
    with torch.no_grad():
        for p in model.parameters():
            p.data = p.data.to(torch.bfloat16)
    return model


def _batch(rank, n, step):
    """This rank's tokens and labels, the same at every step (the model learns them by heart, so
    the loss falls within a few steps); the labels follow from the tokens by a fixed map."""
    g = torch.Generator().manual_seed(7919 + rank)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return tokens, (tokens * 37 + 11) % VOCAB


def _is_expert_shard(p):
    return hasattr(p, "to_local")  # DeepEPExpertParallel makes them DTensors (Shard(0))


def _local(p):
    return p.to_local() if _is_expert_shard(p) else p


def _train(rank, n, expert_parallel):
    """(The loss curve: the job's mean loss before each step; every expert weight's update over
    the run, on this rank; each one's bound, see _add_drift_bounds) of STEPS steps of SGD, in
    mixed precision as torchtitan trains under FSDP: the model computes in bf16, from fp32
    master weights that the fp32 gradients update. Each rank's loss is its tokens' summed
    cross-entropy over the job's token count, so the gradients summed over ranks are the job's
    mean: the expert shards get that sum from the dispatch's backward (a combine of every rank's
    gradients), every other parameter from an all-reduce."""
    model = _model(n, expert_parallel)
    named = [(name, p) for name, p in model.named_parameters()]
    master = {name: _local(p).detach().float().clone() for name, p in named}
    start = {name: m.clone() for name, m in master.items() if ".moe.experts." in name}
    total_tokens = BATCH * SEQ * n
    curve, drift = [], {}
    for step in range(STEPS):
        tokens, labels = _batch(rank, n, step)
        with torch.no_grad():
            for name, p in named:
                _local(p).copy_(master[name])
                p.grad = None
        logits = model(tokens)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), labels.view(-1),
                               reduction="sum") / total_tokens
        loss.backward()
        grads = {}
        for name, p in named:
            if p.grad is None:
                continue
            g = _local(p.grad).float()
            if not (expert_parallel and _is_expert_shard(p)):
                dist.all_reduce(g)
            grads[name] = g
        _add_drift_bounds(master, grads, drift)
        for name, g in grads.items():
            master[name] -= LR * g
        job_loss = loss.detach().clone()
        dist.all_reduce(job_loss)
        curve.append(float(job_loss))
    updates = {name: master[name] - w for name, w in start.items()}
    return curve, updates, drift


def _add_drift_bounds(master, grads, drift):
    """Adds one step's share to the bound on each expert weight's update. The two runs'
    gradients of a step differ by at most test_torchtitan.py's gradient bound, 8 x 2^-8 x the
    largest gradient, so their updates by LR times that; the master weights' own fp32
    roundings are below 2^-23 of a weight, which the bound covers with one more 2^-20 x max |w|
    a step. Over the steps the bounds add up. (Called in the reference run, whose weights and
    gradients are full.)"""
    for name, g in grads.items():
        if ".moe.experts." in name:
            share = LR * 8 * BF16_U * float(g.abs().max()) + 2.0 ** -20 * float(
                master[name].abs().max())
            drift[name] = drift.get(name, 0.0) + share


def _training_scenario(rank, n):
    register_cpu_ops()
    reference, ref_updates, drift = _train(rank, n, expert_parallel=False)
    first, ep_updates, _ = _train(rank, n, expert_parallel=True)
    second, _, _ = _train(rank, n, expert_parallel=True)
    if rank == 0:
        print(f"loss at {n} ranks, step: reference, expert-parallel", flush=True)
        for step, (r, e) in enumerate(zip(reference, first)):
            print(f"  {step:2d}: {r:.6f} {e:.6f}", flush=True)
    # Two expert-parallel runs of the same job: the same bits at every step.
    assert first == second, f"two expert-parallel runs differ: {first} vs {second}"
    # Both train: the loss falls by a third (from about ln(256) = 5.5 for random weights).
    for name, curve in (("reference", reference), ("expert-parallel", first)):
        assert curve[-1] < curve[0] * 2 / 3, f"{name} did not train: {curve}"
    # The experts learnt alike: each rank's shard of every MoE layer updated as the same experts
    # of the reference, within the drift the two runs' roundings allow (_add_drift_bounds).
    # (The loss alone would not show it: on this task the embeddings and the output layer carry
    # most of the learning, and experts that learnt at half the rate move the loss by 1e-4.)
    lo = rank * EXPERTS_PER_RANK
    for name, shard in ep_updates.items():
        full = ref_updates[name][lo:lo + EXPERTS_PER_RANK]
        err = float((shard.double() - full.double()).abs().max())
        size = float(full.abs().max())
        assert err <= drift[name], (f"{name}: the expert-parallel update differs from the "
                                    f"reference's by {err} > {drift[name]} (largest {size})")
        if rank == 0:
            print(f"  {name}: update up to {size:.2e}, max |err| {err:.2e}, "
                  f"{err / drift[name]:.2f} of the bound", flush=True)
    # The curves track each other: step 0 runs the same weights, whose outputs differ by a few
    # bf16 roundings (test_torchtitan.py's output bound, 4 x 2^-8 of the largest value), which
    # reach the loss as at most that relative difference; the weights then drift apart within
    # the bounds above, which keeps each later loss within the same relative bound.
    for step, (r, e) in enumerate(zip(reference, first)):
        bound = 4 * BF16_U * r
        assert abs(e - r) <= bound, (f"step {step}: expert-parallel loss {e} vs reference {r} "
                                     f"(bound {bound})")


def test_tiny_deepseek_v3_trains_alike_with_and_without_expert_parallelism():
    spawn_ranks(_training_scenario, RANKS)
