"""What every benchmark result records besides its figures: the command, the commit, the date and the machine
(CPU model, cores, torch / mujoco versions, GPU if any). ``write_result`` saves them as JSON under
``benchmarks/results/``; ``benchmarks/render.py`` renders the docs' benchmark pages from these files, from the
``tables`` each result holds (a :class:`Table` is what a script prints, kept as data)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    import torch

    cpu, flags = platform.processor() or "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not flags:
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    out: dict[str, Any] = {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__,
                           "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                           "python": platform.python_version()}
    bf16 = sorted(flags & {"amx_bf16", "avx512_bf16"})  # what bfloat16 kernels can use (benchmarks/pixel_options.py)
    if bf16:
        out["cpu_bf16"] = bf16
    try:
        import mujoco

        out["mujoco"] = mujoco.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


@dataclass
class Table:
    """A result table: printed row by row as Markdown while the benchmark runs, and stored in the result file."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: str = ""
    echo: bool = True

    def add(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        if self.echo and not self.rows:
            print(f"\n{self.title}\n| {' | '.join(self.columns)} |\n|{'---|' * len(self.columns)}")
        self.rows.append([str(c) for c in cells])
        if self.echo:
            print(f"| {' | '.join(self.rows[-1])} |", flush=True)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("echo")
        return out


def write_result(name: str, figures: Any, out: str | Path | None = None, tables: list[Table] | None = None) -> Path:
    """``benchmarks/results/<name>.json`` (or ``out``): the figures with command, commit, date and machine; ``tables``
    are stored under ``figures["tables"]`` for the docs' pages."""
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if tables:
        figures = {**figures, "tables": [t.as_dict() for t in tables]}
    record = {"benchmark": name, "command": "python " + shlex.join([os.path.relpath(sys.argv[0]), *sys.argv[1:]]),
              "commit": commit(), "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "machine": machine(), "figures": figures}
    path.write_text(json.dumps(record, indent=1))
    return path
