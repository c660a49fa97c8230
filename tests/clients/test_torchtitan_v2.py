"""torchtitan 0.3's DeepEP path (DeepEP V2: torchtitan/distributed/deepep/deepep.py over
deep_ep.ElasticBuffer, driven by its DeepEPTokenDispatcher) on deep_ep over shmoe, on CPU tensors
in a spawned gloo job, against torchtitan's own LocalTokenDispatcher (EP=1: no parallelism, no
deep_ep) with the same weights run on each rank's tokens alone: the independent reference. Both
sit in torchtitan's RoutedExperts (dispatcher, GroupedExperts, combine) exactly as its MoE builds
them; the expert-parallel one holds this rank's shard of the experts.

Checked: the training layout (compact, do_expand=False with a CPU sync) forward and backward
(outputs, input gradients, routing-score gradients, expert-shard gradients), two steps in one
process; the inference layout (expand, do_expand=True without a CPU sync, which torchtitan takes
under no_grad with cudagraphable=True); routing that leaves the last rank without tokens.

torchtitan 0.3.0 cannot live beside the 0.2.2 that the project's venv holds
(python/requirements-clients.txt), so this test installs python/requirements-clients-v2.txt with
`pip install --no-deps --target` into a directory of its own ($SHMOE_TEST_CLIENTS_V2_DIR, which
CMake sets to <build>/clients-v2; by hand ~/.cache/shmoe/clients-v2) and puts it first on
sys.path in the spawned ranks only (never in pytest's process, which may hold 0.2.2's tests);
it is skipped, saying why, only when that install fails. No file of torchtitan is edited; the
one shim is the CPU registration of its two custom ops (register_cpu_ops below). torchtitan 0.3
needs nothing of deep_ep.ElasticBuffer beyond what it has."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from _ranks import RANKS, close_enough, spawn_ranks  # noqa: E402

DIM, HIDDEN, EXPERTS_PER_RANK, TOPK, BATCH, SEQ = 64, 96, 4, 3, 2, 20
TOKENS = BATCH * SEQ
PINS = Path(__file__).resolve().parents[2] / "python" / "requirements-clients-v2.txt"
VERSION = "0.3.0"


def _pinned():
    return {line.split("==")[0]: line.split("==")[1] for line in PINS.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def _installed(target):
    """Whether target holds every pin at its version (pip's dist-info directories say)."""
    return all((target / f"{name}-{version}.dist-info").is_dir()
               for name, version in _pinned().items())


@pytest.fixture(scope="module")
def torchtitan_v2():
    """The directory holding torchtitan 0.3.0 and its one needed dependency, installed on first
    use (into a fresh directory renamed into place, so concurrent runs do not see half of it)."""
    target = Path(os.environ.get("SHMOE_TEST_CLIENTS_V2_DIR")
                  or Path.home() / ".cache" / "shmoe" / "clients-v2")
    if not _installed(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        run = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                              "--disable-pip-version-check", "--target", str(fresh), "-r",
                              str(PINS)], capture_output=True, text=True)
        if run.returncode != 0 or not _installed(fresh):
            shutil.rmtree(fresh, ignore_errors=True)
            pytest.skip(f"torchtitan {VERSION} could not be installed from PyPI ({PINS.name}): "
                        f"{(run.stderr or run.stdout).strip()[-400:]}")
        shutil.rmtree(target, ignore_errors=True)
        try:
            fresh.rename(target)
        except OSError:  # another run put it there first
            shutil.rmtree(fresh, ignore_errors=True)
    return str(target)


def _use(target):
    """In a spawned rank: torchtitan 0.3.0 from target, ahead of the venv's 0.2.2."""
    sys.path.insert(0, target)
    assert "torchtitan" not in sys.modules, "torchtitan was imported before its 0.3 path was set"
    import torchtitan

    assert torchtitan.__file__.startswith(target), torchtitan.__file__
    register_cpu_ops()


def register_cpu_ops():
    """THE SHIM. torchtitan 0.3 registers its deepep::dispatch and deepep::combine ops (over
    ElasticBuffer) for the CUDA dispatch key only (@torch.library.impl(_lib, "dispatch",
    "CUDA")), as its DeepEP runs on GPUs; CPU tensors then find no kernel. This registers
    torchtitan's own implementations, unchanged, for the CPU key too; their autograd
    (torch.library.register_autograd) is key-independent."""
    from torchtitan.distributed.deepep import deepep as tt

    torch.library.impl(tt._lib, "dispatch", "CPU")(tt._dispatch_op_impl)
    torch.library.impl(tt._lib, "combine", "CPU")(tt._combine_op_impl)


def _experts(n, rank, mesh, cudagraphable=False):
    """(reference RoutedExperts with LocalTokenDispatcher and all n x EXPERTS_PER_RANK experts,
    expert-parallel RoutedExperts with DeepEPTokenDispatcher and this rank's shard of them), the
    same weights on every rank."""
    from torchtitan.models.common.moe import GroupedExperts, RoutedExperts
    from torchtitan.models.common.token_dispatcher import (DeepEPTokenDispatcher,
                                                           LocalTokenDispatcher)

    e = n * EXPERTS_PER_RANK
    ref = RoutedExperts.Config(
        inner_experts=GroupedExperts.Config(dim=DIM, hidden_dim=HIDDEN, num_experts=e),
        token_dispatcher=LocalTokenDispatcher.Config(num_experts=e, top_k=TOPK)).build()
    ep = RoutedExperts.Config(
        inner_experts=GroupedExperts.Config(dim=DIM, hidden_dim=HIDDEN,
                                            num_experts=EXPERTS_PER_RANK),
        token_dispatcher=DeepEPTokenDispatcher.Config(
            num_experts=e, top_k=TOPK, hidden_dim=DIM, num_max_tokens_per_rank=TOKENS,
            cudagraphable=cudagraphable)).build()
    g = torch.Generator().manual_seed(1234)  # the same weights on every rank
    lo, hi = rank * EXPERTS_PER_RANK, (rank + 1) * EXPERTS_PER_RANK
    with torch.no_grad():
        for name, fan_in in (("w1_EFD", DIM), ("w2_EDF", HIDDEN), ("w3_EFD", DIM)):
            full = getattr(ref.inner_experts, name)
            full.copy_(torch.randn(full.shape, generator=g) / fan_in ** 0.5)
            getattr(ep.inner_experts, name).copy_(full[lo:hi])
    ref, ep = ref.to(torch.bfloat16), ep.to(torch.bfloat16)
    # What RoutedExperts.parallelize does after sharding the experts: the EP mesh to the
    # dispatcher, whose init_buffer makes (or reuses) torchtitan's process-global ElasticBuffer.
    ep.token_dispatcher.wire_meshes(ep_mesh=mesh)
    return ref, ep


def _inputs(rank, n, step, skew=False):
    """This rank's tokens, routing (as torchtitan's TokenChoiceTopKRouter: softmax scores in
    fp32, top-k, renormalised) and output gradient; with skew, no token picks the last rank's
    experts."""
    g = torch.Generator().manual_seed(100 * step + rank)
    x = torch.randn((BATCH, SEQ, DIM), generator=g).to(torch.bfloat16)
    dy = torch.randn((BATCH, SEQ, DIM), generator=g).to(torch.bfloat16)
    logits = torch.randn((BATCH, SEQ, n * EXPERTS_PER_RANK), generator=g)
    if skew:
        logits[..., (n - 1) * EXPERTS_PER_RANK:] = -1e4
    scores = torch.softmax(logits, dim=-1)
    top, ids = scores.topk(TOPK, dim=-1, sorted=False)
    top = top / top.sum(dim=-1, keepdim=True)
    return x, top, ids, dy


def _forward(layer, x, top, ids):
    e = layer.token_dispatcher.num_experts
    routing = torch.zeros(x.shape[:2] + (e,), dtype=torch.bool).scatter_(-1, ids, True)
    return layer(x, top, ids, routing.sum(dim=(0, 1)))  # as MoE.forward calls it


def _fwd_bwd(layer, x, top, ids, dy):
    layer.zero_grad(set_to_none=True)
    x, top = x.clone().requires_grad_(True), top.clone().requires_grad_(True)
    y = _forward(layer, x, top, ids)
    y.backward(dy)
    return y.detach(), x.grad, top.grad


def _compare_step(rank, n, ref, ep, step, skew=False):
    """One forward and backward of both on this rank's fresh tokens; every output and gradient
    checked. Tolerances: both compute the same sums in bf16 but round in other places (the
    DeepEP path scales the expert rows by the score in bf16, sums a rank's top-k rows with
    scatter_add in bf16 and the ranks' partial sums in fp32; the local path scales in fp32 and
    sums the top-k at once), so an element differs by a few bf16 roundings (2^-8 relative) of
    the largest terms it sums: the bound is ulps x 2^-8 x the tensor's largest reference value,
    4 for the outputs and 8 for the gradients (those roundings, then the backward's own)."""
    x, top, ids, dy = _inputs(rank, n, step, skew)
    y_ref, dx_ref, ds_ref = _fwd_bwd(ref, x, top, ids, dy)
    y_ep, dx_ep, ds_ep = _fwd_bwd(ep, x, top, ids, dy)
    if rank == 0:
        print(f"step {step} at {n} ranks{' (skewed)' if skew else ''}:", flush=True)
    close_enough("output", y_ep, y_ref, y_ref.abs().max(), 4)
    close_enough("input gradient", dx_ep, dx_ref, dx_ref.abs().max(), 8)
    close_enough("routing-score gradient", ds_ep, ds_ref, ds_ref.abs().max(), 8)
    # Experts: rank r holds experts [r * E/n, (r+1) * E/n); its shard's gradient is the sum of
    # every rank's tokens' contributions: the reference's full gradients summed over ranks.
    lo, hi = rank * EXPERTS_PER_RANK, (rank + 1) * EXPERTS_PER_RANK
    for w in ("w1_EFD", "w2_EDF", "w3_EFD"):
        full = getattr(ref.inner_experts, w).grad.float()
        dist.all_reduce(full)
        shard = getattr(ep.inner_experts, w).grad
        assert shard.shape == full[lo:hi].shape, (shard.shape, full.shape)
        close_enough(f"experts.{w} shard", shard, full[lo:hi], full.abs().max(), 8)
        if skew and rank == n - 1:
            assert bool((shard == 0).all()), f"experts.{w}: the silent rank's experts have a " \
                                              "gradient"
    _no_handles_left()


def _no_handles_left():
    from torchtitan.distributed.deepep import deepep as tt

    assert tt._handle_cache == {}, f"handles left in torchtitan's cache: {list(tt._handle_cache)}"


def _expand_step(rank, n, ref, ep, step, skew=False):
    """A no_grad forward with cudagraphable=True: torchtitan dispatches with do_expand=True and
    do_cpu_sync=False, takes the per-expert counts from handle.psum_num_recv_tokens_per_expert,
    feeds the static expert-grouped layout to the grouped GEMM as it is (rows past the last
    expert's are GEMM garbage that the combine must not read), scales each received row by its
    score and combines through the handle. Bound as the training forward's."""
    from torchtitan.distributed.deepep import deepep as tt

    assert ep.token_dispatcher.cudagraphable
    x, top, ids, _ = _inputs(rank, n, step, skew)
    # A spy on the buffer (it records, then calls the real dispatch): the layout must be the
    # expand one, else this step would test the compact path again.
    buffer, calls = tt._buffer, []
    dispatch = buffer.dispatch
    buffer.dispatch = lambda *a, **k: calls.append(k) or dispatch(*a, **k)
    try:
        with torch.no_grad():
            y_ref, y_ep = _forward(ref, x, top, ids), _forward(ep, x, top, ids)
    finally:
        del buffer.dispatch
    assert [(k["do_expand"], k["do_cpu_sync"]) for k in calls] == [(True, False)], calls
    close_enough(f"expand-layout (no_grad) output{' (skewed)' if skew else ''}", y_ep, y_ref,
                 y_ref.abs().max(), 4)
    _no_handles_left()


def _mesh(n):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (n,), mesh_dim_names=("ep",))


def _layer_scenario(rank, n, target):
    _use(target)
    mesh = _mesh(n)
    ref, ep = _experts(n, rank, mesh)
    _compare_step(rank, n, ref, ep, step=1)
    _compare_step(rank, n, ref, ep, step=2)  # a second step in the same process
    # The training layer under no_grad with cudagraphable=False: compact layout, no backward.
    x, top, ids, _ = _inputs(rank, n, 3)
    with torch.no_grad():
        y_ref, y_ep = _forward(ref, x, top, ids), _forward(ep, x, top, ids)
    close_enough("compact-layout (no_grad) output", y_ep, y_ref, y_ref.abs().max(), 4)
    _no_handles_left()
    # The inference layer (cudagraphable=True) on the same process-global ElasticBuffer.
    ref, ep = _experts(n, rank, mesh, cudagraphable=True)
    _expand_step(rank, n, ref, ep, step=4)
    _expand_step(rank, n, ref, ep, step=5)
    # cudagraphable=True with grad enabled falls back to the compact layout, backward and all.
    _compare_step(rank, n, ref, ep, step=6)


def _skewed_scenario(rank, n, target):
    """No token picks the last rank's experts: that rank receives no token, its experts'
    gradients are zero, and every result still matches, in both layouts."""
    _use(target)
    mesh = _mesh(n)
    ref, ep = _experts(n, rank, mesh)
    _compare_step(rank, n, ref, ep, step=7, skew=True)
    ref, ep = _experts(n, rank, mesh, cudagraphable=True)
    _expand_step(rank, n, ref, ep, step=8, skew=True)


def test_deepep_dispatcher_matches_local_dispatcher(torchtitan_v2):
    """Compact layout forward and backward, two steps, a no_grad forward; expand layout under
    no_grad, twice; then the cudagraphable layer under grad (compact again)."""
    spawn_ranks(_layer_scenario, RANKS, torchtitan_v2)


def test_skewed_routing_leaves_a_rank_without_tokens(torchtitan_v2):
    spawn_ranks(_skewed_scenario, RANKS, torchtitan_v2)
