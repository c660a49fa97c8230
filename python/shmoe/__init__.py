"""shmoe for Python: OpenSHMEM symmetric arrays and the MoE operators.

    import shmoe
    shmoe.init()                      # under: shmoerun -n 4 python3 prog.py
    a = shmoe.zeros(8, "int64")       # symmetric: every PE has one, peers can reach it
    shmoe.put(a, np.arange(8), (shmoe.my_pe() + 1) % shmoe.n_pes())
    shmoe.barrier_all()
    shmoe.finalize()

Submodules: shmoe.moe (MoeBuffer: dispatch/combine, MegaMoE; both also shmoe.MoeBuffer and
shmoe.MegaMoE), shmoe.torch (symmetric tensors; needs
torch), shmoe.bfloat16 (bfloat16 bit patterns for numpy). Every call that takes an array also
takes a CPU torch.Tensor where torch is in use."""

from . import _interpreter

try:
    import numpy  # noqa: F401
    from . import _shmoe
except ImportError as e:
    raise _interpreter.mismatch(e) from e
from ._runtime import Error
from .core import *  # noqa: F403
from .core import __all__ as _core_all
from .teams import *  # noqa: F403
from .teams import __all__ as _teams_all
from . import bfloat16, moe  # noqa: E402
from .moe import MegaMoE, MoeBuffer  # noqa: E402

__all__ = ["Error", "MegaMoE", "MoeBuffer", "bfloat16", "moe", *_core_all, *_teams_all]


def info():
    """(vendor name, (major, minor) of the OpenSHMEM specification)."""
    return _shmoe.info_get_name(), _shmoe.info_get_version()
