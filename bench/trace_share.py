"""The epilogue's share of a MegaMoE call, from its stage trace (shmoe-moe mega --trace FILE).

  trace_share.py FILE.json  ->  prints "epilogue_share busy_us epilogue_us"

epilogue: the stages "swiglu" (SwiGLU and re-quantization) and "write-back" (GEMM2's rows to the
combine windows), whether they are stages of their own or nested in a GEMM stage as its
epilogue. busy: the stages that are not nested in another, less the waits ("wait rows", "combine
wait", and "header+plan", which waits for every PE's header). Sums over every PE and worker. The
trace's times are wall-clock, so a worker that lost its core mid-stage counts that time too.
"""

import json
import sys

EPILOGUE = {"swiglu", "write-back"}
WAITS = {"wait rows", "combine wait", "header+plan"}


def share(events):
    by_thread = {}
    for e in events:
        if e.get("ph") == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    busy = epilogue = 0.0
    for stages in by_thread.values():
        # Sorted by start, longest first: a stage inside the last top-level one is nested in it.
        stages.sort(key=lambda e: (e["ts"], -e["dur"]))
        end = float("-inf")
        for e in stages:
            if e["cat"] in EPILOGUE:
                epilogue += e["dur"]
            if e["ts"] >= end:  # top level
                end = e["ts"] + e["dur"]
                if e["cat"] not in WAITS:
                    busy += e["dur"]
    if busy <= 0:
        sys.exit("trace_share.py: the trace has no busy stages")
    return epilogue / busy, busy, epilogue


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: trace_share.py FILE.json")
    with open(sys.argv[1], encoding="utf-8") as f:
        s, busy, epilogue = share(json.load(f)["traceEvents"])
    print(f"{s:.4f} {busy:.1f} {epilogue:.1f}")


if __name__ == "__main__":
    main()
