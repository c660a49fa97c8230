"""torchtitan 0.2.x's DeepEP path (torchtitan/distributed/deepep, DeepEPMoE with
DeepEPExpertParallel) on deep_ep over shmoe, on CPU tensors in a spawned gloo job, against
torchtitan's own plain MoE with the same weights run on each rank's tokens alone (no parallelism,
no deep_ep): the independent reference. No file of torchtitan is edited; the one shim is the
CPU registration of its two custom ops (register_cpu_ops below)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchtitan", reason="torchtitan is not installed (python/requirements-clients"
                    ".txt pins it; scripts/venv.sh installs it)")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from _ranks import BF16_U, RANKS, close_enough, spawn_ranks  # noqa: E402

DIM, HIDDEN, EXPERTS_PER_RANK, TOPK, TOKENS = 64, 96, 4, 3, 40


def register_cpu_ops():
    """THE SHIM. torchtitan 0.2.x registers its deepep::dispatch and deepep::combine ops for the
    CUDA dispatch key only (@torch.library.impl(_lib, "dispatch", "CUDA")), as its DeepEP runs on
    GPUs; CPU tensors then find no kernel. This registers torchtitan's own implementations,
    unchanged, for the CPU key too; their autograd (register_autograd) is key-independent."""
    from torchtitan.distributed.deepep import deepep as tt

    torch.library.impl(tt._lib, "dispatch", "CPU")(tt._dispatch_op_impl)
    torch.library.impl(tt._lib, "combine", "CPU")(tt._combine_op_impl)
    _integer_histc_on_cpu()


def _integer_histc_on_cpu():
    """THE SECOND SHIM (torch, not torchtitan, and for both layers alike). torchtitan's router
    and reorderer count tokens per expert with torch.histc on the int64 expert indices, which
    torch implements for CUDA only ("histogram_cpu" not implemented for 'Long'). On the CPU an
    int64 tensor is counted as its float32 values, which are exact for these small indices (bins
    of width 1 from 0), and the counts are returned in the input's dtype, as CUDA does."""
    histc = torch.histc
    if getattr(histc, "_shmoe_cpu_integers", False):
        return

    def cpu_histc(input, bins=100, min=0, max=0, *, out=None):
        if input.device.type == "cpu" and not input.is_floating_point() and out is None:
            return histc(input.float(), bins=bins, min=min, max=max).to(input.dtype)
        return histc(input, bins=bins, min=min, max=max, out=out)

    cpu_histc._shmoe_cpu_integers = True
    torch.histc = cpu_histc


def _layers(n, shared=True):
    """(plain MoE, DeepEPMoE over the job's "ep" mesh), the same weights on every rank."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    from torchtitan.distributed.expert_parallel import DeepEPExpertParallel
    from torchtitan.models.moe.moe import MoE, MoEArgs
    from torchtitan.models.moe.moe_deepep import DeepEPMoE

    args = MoEArgs(num_experts=n * EXPERTS_PER_RANK, num_shared_experts=1 if shared else 0,
                   top_k=TOPK, score_func="softmax", route_norm=True, use_grouped_mm=False,
                   score_before_experts=True, load_balance_coeff=1e-3)
    torch.manual_seed(1234)  # the same weights on every rank
    ref = MoE(args, dim=DIM, hidden_dim=HIDDEN)
    with torch.no_grad():  # as torchtitan initialises (under no_grad, on the meta-free path)
        ref.init_weights(0.5, torch.device("cpu"))
    ref = ref.to(torch.bfloat16)
    ref.expert_bias = ref.expert_bias.float()
    ep = DeepEPMoE(args, dim=DIM, hidden_dim=HIDDEN).to(torch.bfloat16)
    ep.load_state_dict(ref.state_dict())
    ep.expert_bias = ep.expert_bias.float()
    mesh = init_device_mesh("cpu", (n,), mesh_dim_names=("ep",))
    parallelize_module(ep.experts, mesh, DeepEPExpertParallel(score_before_experts=True))
    return ref, ep


def _inputs(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    x = torch.randn((2, TOKENS // 2, DIM), generator=g).to(torch.bfloat16)
    dy = torch.randn((2, TOKENS // 2, DIM), generator=g).to(torch.bfloat16)
    return x, dy


def _fwd_bwd(layer, x, dy):
    layer.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    y = layer(x)
    y.backward(dy)
    return y.detach(), x.grad


def _local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def _compare_step(rank, n, ref, ep, step, silent=None):
    """One forward and backward of both layers on this rank's fresh tokens; every output and
    gradient checked. Tolerances: both layers compute the same sums in bf16 but round in other
    places (DeepEP's path rounds the top-k score to bf16 before scaling, sums a rank's top-k
    rows with scatter_add in bf16 and the ranks' partial sums in fp32; the plain MoE scales in
    fp32 and sums the top-k at once), so an element differs by a few bf16 roundings (2^-8
    relative) of the largest terms it sums; the bound is ulps x 2^-8 x the tensor's largest
    reference value, 4 for the outputs (about 4 differently placed roundings) and 8 for the
    gradients (those roundings, then the backward's own in other places)."""
    x, dy = _inputs(rank, step)
    y_ref, dx_ref = _fwd_bwd(ref, x, dy)
    y_ep, dx_ep = _fwd_bwd(ep, x, dy)
    if rank == 0:
        print(f"step {step} at {n} ranks:", flush=True)
    close_enough("output", y_ep, y_ref, y_ref.abs().max(), 4)
    close_enough("input gradient", dx_ep, dx_ref, dx_ref.abs().max(), 8)
    # Router and shared experts: every rank's parameters are full copies; their gradients from
    # this rank's tokens must agree on each rank (so also summed over ranks, as DP reduces).
    for name in ("router.gate.weight", "shared_experts.w1.weight", "shared_experts.w2.weight",
                 "shared_experts.w3.weight"):
        p_ref, p_ep = ref.get_parameter(name), ep.get_parameter(name) if ep.shared_experts \
            is not None or not name.startswith("shared") else None
        if p_ep is None:
            continue
        close_enough(name, p_ep.grad, p_ref.grad, p_ref.grad.abs().max(), 8)
    # Experts: rank r holds experts [r * E/n, (r+1) * E/n); its shard's gradient is the sum of
    # every rank's tokens' contributions: the reference's full gradients summed over ranks.
    lo, hi = rank * EXPERTS_PER_RANK, (rank + 1) * EXPERTS_PER_RANK
    for w in ("w1", "w2", "w3"):
        full = getattr(ref.experts, w).grad.float()
        dist.all_reduce(full)
        shard = _local(getattr(ep.experts, w).grad)
        assert shard.shape == full[lo:hi].shape, (shard.shape, full.shape)
        close_enough(f"experts.{w} shard", shard, full[lo:hi], full.abs().max(), 8)
        if silent is not None and lo <= silent < hi:
            assert bool((shard == 0).all()), f"experts.{w}: a silent expert has a gradient"
    return y_ep


def _layer_scenario(rank, n):
    register_cpu_ops()
    ref, ep = _layers(n)
    _compare_step(rank, n, ref, ep, step=1)
    # A second forward/backward in the same process, on fresh tokens.
    _compare_step(rank, n, ref, ep, step=2)
    # Inference: torchtitan's combine pops its handle in inference mode; the result must match.
    x, _ = _inputs(rank, 3)
    with torch.inference_mode():
        y_ref, y_ep = ref(x), ep(x)
    close_enough("inference-mode output", y_ep, y_ref, y_ref.abs().max(), 4)
    from torchtitan.distributed.deepep import deepep as tt

    assert tt._handle_cache == {}, f"handles left in torchtitan's cache: {list(tt._handle_cache)}"


def _skewed_scenario(rank, n):
    """Every token avoids the last rank's experts (a -1e4 expert bias, which torchtitan's router
    adds for the choice only): that rank receives no token, its experts' gradients are zero, and
    every result still matches."""
    register_cpu_ops()
    ref, ep = _layers(n)
    bias = torch.zeros(n * EXPERTS_PER_RANK)
    bias[(n - 1) * EXPERTS_PER_RANK:] = -1e4
    ref.expert_bias.copy_(bias)
    ep.expert_bias.copy_(bias)
    _compare_step(rank, n, ref, ep, step=4, silent=(n - 1) * EXPERTS_PER_RANK)
    got = ep.tokens_per_expert[(n - 1) * EXPERTS_PER_RANK:]
    assert bool((got == 0).all()), got
    _compare_step(rank, n, ref, ep, step=5, silent=(n - 1) * EXPERTS_PER_RANK)


def test_deepep_moe_matches_plain_moe():
    """Outputs, input gradients, expert-shard gradients, router and shared-expert gradients, two
    steps in one process, then an inference-mode forward."""
    spawn_ranks(_layer_scenario, RANKS)


def test_skewed_routing_leaves_a_rank_without_tokens():
    spawn_ranks(_skewed_scenario, RANKS)
