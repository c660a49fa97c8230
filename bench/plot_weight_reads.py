"""Draws bench/mega_bench.sh's weight-read rows: for each layer shape, the weight bytes a call
reads per second against tokens per PE, FP8 and bf16 weights at each PE count, with the
machine's streaming read bandwidth (measured in the same runs) as a dashed line: the limit of a
decode-bound layer.

    python3 bench/plot_weight_reads.py CSV PNG
"""
import csv
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path: str, png_path: str) -> None:
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        series = defaultdict(lambda: defaultdict(list))
        reads = defaultdict(list)
        for r in rows:
            if r["shape"] != shape:
                continue
            key = (int(r["pes"]), r["weights"])
            series[key][int(r["tokens"])].append(float(r["weight_gbps"]))
            reads[int(r["pes"])].append(float(r["read_gbps"]))
        for (pes, weights), points in sorted(series.items()):
            tokens = sorted(points)
            ax.plot(tokens, [statistics.median(points[t]) for t in tokens],
                    marker="o" if weights == "fp8" else "s",
                    linestyle="-" if weights == "fp8" else ":",
                    label=f"{weights} weights, {pes} PEs")
        for pes, values in sorted(reads.items()):
            ax.axhline(statistics.median(values), linestyle="--", linewidth=1, color="gray")
            ax.annotate(f"read, {pes} PEs", (0.02, statistics.median(values)),
                        xycoords=("axes fraction", "data"), fontsize=8, color="gray",
                        va="bottom")
        ax.set_xscale("log", base=2)
        ax.set_title(shape)
        ax.set_xlabel("tokens per PE")
        ax.set_ylabel("weight GB/s read by the busiest PE")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    print(f"plot: {png_path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
