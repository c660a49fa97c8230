"""The extension module is built for one Python (its version and ABI) and needs numpy: where this
interpreter cannot load it, the error names the interpreter shmoe was built for."""

from __future__ import annotations

import sys

from . import _build_info


def mismatch(cause: ImportError) -> ImportError:
    """The ImportError to raise, from the one importing numpy or the module raised."""
    if "libshmoe.so" in str(cause):
        return ImportError(f"shmoe cannot load here: {cause}. The extension finds libshmoe.so "
                           "relative to itself: reinstall shmoe (pip install, or cmake --install)")
    if "cannot open shared object file" in str(cause):  # a system library, not the interpreter
        return ImportError(
            f"shmoe cannot load here: {cause}. That system library (UCX, PMIx, oneDNN, libcrypto, "
            "fmt or GCC's OpenMP runtime) must be installed: scripts/install-deps.sh from shmoe's "
            "source installs them on Debian")
    built = f"{_build_info.PYTHON} ({_build_info.SOABI})"
    if _build_info.EXECUTABLE:
        built = f"{_build_info.EXECUTABLE}, {built}"
    this = f"{sys.executable}, {sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]}"
    return ImportError(
        f"shmoe cannot load here: {cause}. shmoe was built for {built}; this is {this}. Run it "
        "with that interpreter, or build shmoe for this one (pip install <shmoe checkout or "
        "wheel>, or cmake -DPython3_EXECUTABLE=...); it also needs numpy in that interpreter")
