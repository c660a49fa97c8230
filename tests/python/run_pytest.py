"""pytest inside one PE of a job:  shmoerun -n N python3 run_pytest.py [pytest arguments]

Every PE runs the same tests in the same order (they are collective). PE 0 prints pytest's
report; the other PEs stay quiet unless a test fails. The first failure on any PE prints that
PE's report of it and ends the PE at once with status 1, before any teardown (which may be
collective, and would wait for PEs that are elsewhere): shmoerun then stops the others and
exits with that status. "No tests collected" (pytest's 5) is a failure too. After a run that
passed on this PE, shmoe.finalize() waits for every PE."""

import contextlib
import io
import os
import sys

import pytest

import shmoe


class EndOnFailure:
    """Ends this PE at its first failed test phase, with the failure printed."""

    def __init__(self, me):
        self.me = me

    def pytest_runtest_logreport(self, report):
        if report.failed:
            text = f"{report.nodeid} ({report.when}) FAILED on PE {self.me}:\n{report.longreprtext}"
            for line in text.splitlines():
                sys.__stdout__.write(f"[PE {self.me}] {line}\n")
            sys.__stdout__.flush()
            os._exit(1)


def main():
    shmoe.init()
    me = shmoe.my_pe()
    args = [*sys.argv[1:], "-x", "-p", "no:cacheprovider", "-o", "console_output_style=classic"]
    if me == 0:
        status = pytest.main([*args, "-v", "-rs", "-s"], plugins=[EndOnFailure(me)])
        report = ""
    else:
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            status = pytest.main([*args, "-q", "-s"], plugins=[EndOnFailure(me)])
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
