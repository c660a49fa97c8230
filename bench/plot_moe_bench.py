"""Draws bench/moe_bench.sh's rows: for each shape and PE count, each operator's rate per core
the PEs can use (min(cores, PEs)) against one thread's memcpy measured in the same run (1.0, a
solid line) and the 0.9 the operators aim for (dashed), so that the gap shows at a glance.

    python3 bench/plot_moe_bench.py CSV PNG
"""
from plot_common import command_line, read_rows, save  # first: it picks the Agg backend

import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path: str, png_path: str) -> None:
    rows = read_rows(csv_path)
    groups = list(dict.fromkeys((r["shape"], int(r["pes"])) for r in rows))
    ops = list(dict.fromkeys(r["op"] for r in rows))
    fig, ax = plt.subplots(figsize=(2.2 * len(groups) + 2, 4))
    width = 0.8 / len(ops)
    for i, op in enumerate(ops):
        values = []
        for shape, pes in groups:
            match = [r for r in rows if r["op"] == op and r["shape"] == shape and int(r["pes"]) == pes]
            if match:
                r = match[0]
                used = min(int(r["cores"]), pes)
                values.append(float(r["agg_gbps"]) / (float(r["memcpy_gbps"]) * used))
            else:
                values.append(0.0)
        ax.bar([g + i * width for g in range(len(groups))], values, width, label=op)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.axhline(0.9, color="gray", linewidth=1, linestyle="--")
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{shape}, {pes} PEs" for shape, pes in groups])
    ax.set_ylabel("rate per core used / one thread's memcpy")
    ax.set_title("MoE dispatch and combine against a copy by one core (1.0; dashed: 0.9)")
    ax.legend(fontsize=8)
    save(fig, png_path)


if __name__ == "__main__":
    command_line(main, __doc__)
