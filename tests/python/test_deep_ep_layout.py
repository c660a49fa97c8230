"""deep_ep's V2 package layout: the names DeepEP main's deep_ep exports, EventOverlap's V2 API
(hooks after a wait, release_handle), and get_physical/logical_domain_size in real gloo jobs of
spawned processes whose hosts are simulated with SHMOE_HOST_ID."""

import importlib.util
import os
import socket
import traceback

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

V2_NAMES = {"Buffer", "ElasticBuffer", "EPHandle", "EventOverlap", "EventHandle", "Config",
            "topk_idx_t", "get_physical_domain_size", "get_logical_domain_size"}


def test_the_names_deepep_main_exports():
    """Every V2 name, but ElasticBuffer and EPHandle only once deep_ep/elastic.py exists."""
    import deep_ep

    expected = set(V2_NAMES)
    if importlib.util.find_spec("deep_ep.elastic") is None:
        expected -= {"ElasticBuffer", "EPHandle"}
    assert set(deep_ep.__all__) == expected
    assert all(hasattr(deep_ep, name) for name in expected)


def test_utils_leaves_room_for_deepeps_helpers():
    """scripts/deepep-tests.sh lays DeepEP's helpers into deep_ep.utils: none may be ours."""
    for helper in ("envs", "math", "refs", "gate", "testing"):
        assert importlib.util.find_spec(f"deep_ep.utils.{helper}") is None, helper
    from deep_ep.utils import EventHandle, EventOverlap, check_nvlink_connections  # noqa: F401
    from deep_ep.utils.event import EventOverlap as Again

    assert Again is EventOverlap


def test_a_hook_runs_once_at_the_next_wait():
    from deep_ep import EventHandle, EventOverlap

    calls = []
    overlap = EventOverlap(EventHandle())
    overlap.register_hook_after_wait(lambda: calls.append("hook"))
    with pytest.raises(RuntimeError, match="a hook is already registered"):
        overlap.register_hook_after_wait(lambda: calls.append("second"))
    assert calls == []
    overlap.current_stream_wait()
    overlap.current_stream_wait()
    assert calls == ["hook"] and overlap.event is not None
    overlap.register_hook_after_wait(lambda: calls.append("at exit"))
    with overlap:
        assert calls == ["hook"]
    assert calls == ["hook", "at exit"] and overlap.event is not None


def test_release_handle_drops_the_event():
    from deep_ep import EventHandle, EventOverlap

    overlap = EventOverlap(EventHandle(), extra_tensors=(torch.zeros(1),))
    with overlap(release_handle=True):
        pass
    assert overlap.event is None
    with pytest.raises(RuntimeError, match="the event is None"):
        overlap.current_stream_wait()
    with overlap:  # no event: nothing to wait for
        pass
    kept = EventOverlap(EventHandle())
    with kept(release_handle=True):
        pass
    with kept:  # release_handle applies to one block
        pass
    assert kept.event is None
    again = EventOverlap(EventHandle())
    again.current_stream_wait(release_handle=True)
    assert again.event is None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _domains(rank, n, port, failures):
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        import deep_ep

        os.environ.pop("SHMOE_HOST_ID", None)
        os.environ.pop("GROUP_RANK", None)
        assert deep_ep.get_physical_domain_size(dist.new_group(list(range(n)))) == (1, n)
        os.environ["SHMOE_HOST_ID"] = f"host{rank // 2}"  # node-major: 2 hosts of 2 ranks
        group = dist.new_group(list(range(n)))
        assert deep_ep.get_physical_domain_size(group) == (2, 2)
        assert deep_ep.get_logical_domain_size(group) == (2, 2)
        assert deep_ep.get_logical_domain_size(group, allow_hybrid_mode=False) == (1, 4)
        assert deep_ep.get_physical_domain_size(None) == (2, 2)
        odd = dist.new_group([1, 3])
        if rank % 2:
            assert deep_ep.get_physical_domain_size(odd) == (2, 1)
        first_host = dist.new_group([0, 1])
        if rank < 2:
            assert deep_ep.get_logical_domain_size(first_host) == (1, 2)
        os.environ["SHMOE_HOST_ID"] = f"host{rank % 2}"  # ranks alternate hosts
        with pytest.raises(ValueError, match=r"node-major .* hosts are \['host0', 'host1', "
                                             r"'host0', 'host1'\]"):
            deep_ep.get_physical_domain_size(dist.new_group(list(range(n))))
        os.environ["SHMOE_HOST_ID"] = "host0" if rank < 3 else "host1"  # 3 + 1 ranks
        with pytest.raises(ValueError, match="as many ranks on every host"):
            deep_ep.get_logical_domain_size(dist.new_group(list(range(n))))
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank}:\n{traceback.format_exc()}")
        raise


def test_domain_sizes_of_simulated_hosts():
    n = 4
    ctx = mp.get_context("spawn")
    failures = ctx.SimpleQueue()
    try:
        mp.spawn(_domains, args=(n, _free_port(), failures), nprocs=n)
    except Exception:
        lines = []
        while not failures.empty():
            lines.append(failures.get())
        pytest.fail("\n".join(lines) or "a rank failed")


def test_domain_sizes_need_torch_distributed():
    import deep_ep

    if dist.is_initialized():
        pytest.skip("torch.distributed is initialized in this process")
    with pytest.raises(RuntimeError, match="torch.distributed is not initialized"):
        deep_ep.get_physical_domain_size(None)
