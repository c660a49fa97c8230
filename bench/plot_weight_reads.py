"""Draws bench/mega_bench.sh's weight-read rows: for each layer shape, the layer's time per call
against tokens per PE, with FP8 and with bf16 weights at each PE count, and as a dashed line the
time the FP8 weight bytes take at the streaming read bandwidth measured in the same runs: the
limit of a decode-bound layer, so that the gap to it and to bf16 shows at a glance.

    python3 bench/plot_weight_reads.py CSV PNG
"""
import statistics
from collections import defaultdict

from plot_common import command_line, read_rows, save  # first: it picks the Agg backend

import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path: str, png_path: str) -> None:
    rows = read_rows(csv_path)
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        series = defaultdict(lambda: defaultdict(list))
        limit = defaultdict(lambda: defaultdict(list))
        for r in rows:
            if r["shape"] != shape:
                continue
            pes, tokens = int(r["pes"]), int(r["tokens"])
            series[(pes, r["weights"])][tokens].append(float(r["e2e_ms"]))
            if r["weights"] == "fp8":  # MB over GB/s: ms
                limit[pes][tokens].append(float(r["weight_read_mb"]) / float(r["read_gbps"]))
        for (pes, weights), points in sorted(series.items()):
            tokens = sorted(points)
            ax.plot(tokens, [statistics.median(points[t]) for t in tokens],
                    marker="o" if weights == "fp8" else "s",
                    linestyle="-" if weights == "fp8" else ":",
                    label=f"{weights} weights, {pes} PEs")
        for pes, points in sorted(limit.items()):
            tokens = sorted(points)
            ax.plot(tokens, [statistics.median(points[t]) for t in tokens], linestyle="--",
                    color="gray", linewidth=1, label=f"fp8 bytes at read speed, {pes} PEs")
        ax.set_xscale("log", base=2)
        ax.set_title(shape)
        ax.set_xlabel("tokens per PE")
        ax.set_ylabel("ms per call (slowest PE)")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    save(fig, png_path)


if __name__ == "__main__":
    command_line(main, __doc__)
