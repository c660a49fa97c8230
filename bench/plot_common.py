"""What the benchmark plots share: reading a benchmark's CSV, saving the figure, and the command
line `python3 bench/plot_X.py CSV PNG`."""
import csv
import sys
from typing import Callable, Dict, List

import matplotlib

matplotlib.use("Agg")  # no display: the plots are files


def read_rows(csv_path: str) -> List[Dict[str, str]]:
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f))


def save(fig, png_path: str) -> None:
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    print(f"plot: {png_path}")


def command_line(draw: Callable[[str, str], None], usage: str) -> None:
    if len(sys.argv) != 3:
        sys.exit(usage)
    draw(sys.argv[1], sys.argv[2])
