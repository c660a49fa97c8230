"""pytest inside one PE of a job:  shmoerun -n N python3 run_pytest.py [pytest arguments]

Every PE runs the same tests in the same order (they are collective). PE 0 prints pytest's
report; the other PEs stay quiet unless their tests fail, when they print theirs. The first
failure ends the PE at once with pytest's status (shmoerun then stops the others and exits with
that status); "no tests collected" (pytest's 5) is a failure too. After a run that passed on
this PE, shmoe.finalize() waits for every PE."""

import contextlib
import io
import os
import sys

import pytest

import shmoe


def main():
    shmoe.init()
    me = shmoe.my_pe()
    args = [*sys.argv[1:], "-x", "-p", "no:cacheprovider", "-o", "console_output_style=classic"]
    if me == 0:
        status = pytest.main([*args, "-v", "-rs"])
        report = ""
    else:
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            status = pytest.main([*args, "-q"])
        report = captured.getvalue()
    if status == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"PE {me}: pytest collected no tests", flush=True)
        status = 1
    if status != 0:
        for line in report.splitlines():
            print(f"[PE {me}] {line}")
        sys.stdout.flush()
        sys.stderr.flush()
        # No finalize: the other PEs may wait in a collective this PE will never join.
        os._exit(int(status))
    shmoe.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
