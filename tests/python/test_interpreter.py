"""Where this interpreter cannot load the extension or lacks numpy, `import shmoe` says which
interpreter shmoe was built for (its _build_info), not a bare ModuleNotFoundError."""

import subprocess
import sys

import pytest


def _import_shmoe_without(module: str) -> subprocess.CompletedProcess:
    code = f"import sys; sys.modules[{module!r}] = None; import shmoe"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.mark.parametrize("missing", ["numpy", "shmoe._shmoe"])
def test_import_names_the_interpreter_built_for(missing):
    from shmoe import _build_info

    got = _import_shmoe_without(missing)
    assert got.returncode != 0
    last = got.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: shmoe cannot load here"), got.stderr
    assert f"built for {_build_info.EXECUTABLE}, {_build_info.PYTHON} ({_build_info.SOABI})" \
        in last, last
    assert f"this is {sys.executable}" in last and missing in last, last


def test_build_info_matches_this_interpreter():
    import sysconfig

    from shmoe import _build_info

    assert _build_info.SOABI == sysconfig.get_config_var("SOABI")
    assert _build_info.PYTHON.endswith(f"{sys.version_info[0]}.{sys.version_info[1]}")


def test_a_missing_system_library_is_named():
    """libshmoe.so's dependency missing: the loader's error reaches the user with what to do."""
    code = ("import sys, shmoe._interpreter as i; "
            "e = i.mismatch(ImportError('libucp.so.0: cannot open shared object file')); "
            "print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "libucp.so.0: cannot open shared object file" in out.stdout, out.stdout
    assert "scripts/install-deps.sh" in out.stdout and "built for" not in out.stdout, out.stdout
