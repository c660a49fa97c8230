"""deep_ep on shmoe: DeepEP's Python API for CPU tensors (Buffer, V1's normal and low-latency
modes; ElasticBuffer and EPHandle, V2's; Config, EventOverlap, EventHandle, topk_idx_t,
get_physical_domain_size, get_logical_domain_size), its expert-parallel dispatch and combine
running on shmoe's MoE operators.

A Buffer joins the torch.distributed job of its group (gloo; processes started by
torch.multiprocessing.spawn or torchrun, no shmoerun): the group's rank 0 makes a fresh job key
and a store address and hands both to the group through torch.distributed; every rank of the
group then starts shmoe with shmoe.init(rank=, size=, store=, key=), over the group's ranks
only (one host). A process runs one shmoe job: its Buffers are all on the same ranks.
Importing deep_ep lets torch.cpu.Event time (enable_timing, elapsed_time), as DeepEP's tests and
benchmarks use torch.cuda.Event (_torch_cpu.py).
"""

from __future__ import annotations

import torch

from . import _torch_cpu

_torch_cpu.install()

from .buffer import Buffer  # noqa: E402
from .config import Config  # noqa: E402
from .domain import get_logical_domain_size, get_physical_domain_size  # noqa: E402
from .elastic import ElasticBuffer, EPHandle  # noqa: E402
from .utils import EventHandle, EventOverlap  # noqa: E402


topk_idx_t = torch.int64

__all__ = ["Buffer", "ElasticBuffer", "EPHandle", "EventOverlap", "EventHandle", "Config",
           "topk_idx_t", "get_physical_domain_size", "get_logical_domain_size"]
