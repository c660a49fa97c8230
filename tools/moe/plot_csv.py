#!/usr/bin/env python3
"""Draws shmoe-moe's perf CSVs (``shmoe-moe ... --perf --plot`` runs it once the job has ended).

    plot_csv.py CSV WAITS_CSV [CSV WAITS_CSV ...]      (WAITS_CSV "-": none)

For each CSV, a PNG of the same name next to it (``pipeline_pes2_..._int32.png``) with, for the
last run the CSV holds (it gathers runs, each row stamped with its run_id):
  * the time per call on each PE: the whole op on the PE's slowest worker, and the communication
    alone (the CSV's full_op and comm_only rows);
  * the bandwidth of every run in the file, in order, so that appended runs show a trend;
  * the wait matrix (how long each PE waited for each source PE per call) and the slow PE it names.
Exit status: 0 when every PNG is drawn; 3 when matplotlib is missing (one line on stderr says so);
1 for a CSV it cannot read.
"""

import csv
import os
import re
import sys

MISSING_MATPLOTLIB = 3


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def per_pe_times(row):
    """{pe: max over its workers} of the time_pe{p}_w{w}_us columns."""
    times = {}
    for column, value in row.items():
        m = re.fullmatch(r"time_pe(\d+)_w(\d+)_us", column or "")
        if m and value not in (None, ""):
            pe = int(m.group(1))
            times[pe] = max(times.get(pe, 0.0), float(value))
    return times


def draw(plt, main_csv, waits_csv):
    rows = read_rows(main_csv)
    if not rows:
        raise ValueError(f"{main_csv} holds no rows")
    runs = list(dict.fromkeys(r["run_id"] for r in rows))
    last = runs[-1]
    last_rows = {r["metric"]: r for r in rows if r["run_id"] == last}
    waits = []
    if waits_csv != "-":
        waits = [r for r in read_rows(waits_csv) if r["run_id"] == last]

    panels = 3 if waits else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.5))
    shape = rows[-1]
    fig.suptitle(
        f"{os.path.basename(main_csv)}\n"
        f"pes={shape['pes']} bs={shape['bs']} hidden={shape['hidden']} topk={shape['topk']} "
        f"experts_per_pe={shape['experts_per_pe']} dtype={shape['dtype']} loops={shape['loops']}; "
        f"last run {last} at {shape['time']}",
        fontsize=9,
    )

    # The last run's time per PE.
    ax = axes[0]
    full = per_pe_times(last_rows.get("full_op", {}))
    comm = per_pe_times(last_rows.get("comm_only", {}))
    pes = sorted(set(full) | set(comm))
    width = 0.4
    ax.bar([p - width / 2 for p in pes], [full.get(p, 0) for p in pes], width,
           label="full op (slowest worker)")
    ax.bar([p + width / 2 for p in pes], [comm.get(p, 0) for p in pes], width,
           label="communication only")
    ax.set_xticks(pes)
    ax.set_ylim(0, 1.3 * max([*full.values(), *comm.values(), 1e-3]))  # room for the legend
    ax.set_xlabel("PE")
    ax.set_ylabel("µs per call")
    ax.set_title("last run: time per call on each PE", fontsize=10)
    ax.legend(fontsize=8)

    # Bandwidth of every run in the file.
    ax = axes[1]
    top = 1e-3
    for metric, label in (("full_op", "full op"), ("comm_only", "communication only")):
        by_run = {r["run_id"]: float(r["bandwidth_gbps"]) for r in rows if r["metric"] == metric}
        xs = [i for i, run in enumerate(runs) if run in by_run]
        top = max([top, *by_run.values()])
        ax.plot(xs, [by_run[runs[i]] for i in xs], marker="o", label=label)
    times = {r["run_id"]: r["time"] for r in rows}
    ticks = list(range(len(runs)))
    if len(runs) > 8:
        ticks = ticks[:: (len(runs) + 7) // 8]
    ax.set_xticks(ticks)
    ax.set_xticklabels([times[runs[i]].replace("T", "\n") for i in ticks], fontsize=7)
    ax.set_xlabel("run (UTC start)")
    ax.set_ylabel("GB/s (all PEs)")
    ax.set_ylim(0, 1.3 * top)  # room for the legend
    ax.set_title(f"bandwidth of the {len(runs)} run(s) in this CSV", fontsize=10)
    ax.legend(fontsize=8)

    # The last run's wait matrix.
    if waits:
        n = 1 + max(max(int(r["waiting_pe"]), int(r["source_pe"])) for r in waits)
        matrix = [[0.0] * n for _ in range(n)]
        for r in waits:
            matrix[int(r["waiting_pe"])][int(r["source_pe"])] = float(r["wait_us_per_call"])
        ax = axes[2]
        image = ax.imshow(matrix, cmap="viridis")
        fig.colorbar(image, ax=ax, label="µs waited per call")
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xlabel("source PE (waited for)")
        ax.set_ylabel("waiting PE")
        slow = int(waits[0]["slow_pe"])
        ax.set_title(f"last run: waits (slow PE: {slow if slow >= 0 else 'none'})", fontsize=10)

    fig.tight_layout()
    png = os.path.splitext(main_csv)[0] + ".png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def main(argv):
    if not argv or len(argv) % 2 != 0:
        print("usage: plot_csv.py CSV WAITS_CSV [CSV WAITS_CSV ...] (WAITS_CSV -: none)",
              file=sys.stderr)
        return 2
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"shmoe-moe: --plot: matplotlib is not installed for {sys.executable}: install it "
              "(pip install matplotlib) or name a Python that has it with --plot-python; the CSVs "
              "are written, no PNG was drawn", file=sys.stderr)
        return MISSING_MATPLOTLIB
    for main_csv, waits_csv in zip(argv[::2], argv[1::2]):
        try:
            png = draw(plt, main_csv, waits_csv)
        except (OSError, ValueError, KeyError) as e:
            print(f"shmoe-moe: --plot: cannot draw {main_csv}: {e!r}", file=sys.stderr)
            return 1
        print(f"plot: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
