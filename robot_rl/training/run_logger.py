"""Run-folder observability: TensorBoard scalars, a metrics.jsonl log and a PNG learning curve."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

from robot_rl.utils.disk import naming  # noqa: E402


class RunLogger:
    """Writes ``<run>/tb/`` (TensorBoard), ``<run>/metrics.jsonl`` and ``<run>/learning_curve.png``."""

    CURVES = ("eval/return_mean", "eval/success_rate", "train/episode_return")

    def __init__(self, run_dir: str | Path, curves: tuple[str, ...] | None = None, x_label: str = "env steps") -> None:
        self.run_dir = Path(run_dir)
        self.curves, self.x_label = curves or self.CURVES, x_label
        self.writer = SummaryWriter(str(self.run_dir / "tb"))
        self.history: dict[str, list[tuple[int, float]]] = defaultdict(list)
        self._jsonl = open(self.run_dir / "metrics.jsonl", "a")

    def log(self, metrics: dict[str, float], step: int) -> None:
        with naming(self.run_dir / "tb"):  # TensorBoard's writer thread reports a failed write on a later call
            for key, value in metrics.items():
                value = float(value)
                if math.isnan(value):
                    continue
                self.writer.add_scalar(key, value, step)
                self.history[key].append((step, value))
        with naming(self.run_dir / "metrics.jsonl"):
            self._jsonl.write(json.dumps({"step": step, **{k: float(v) for k, v in metrics.items()}}) + "\n")
            self._jsonl.flush()

    def plot(self) -> Path:
        """Redraws the learning curve PNG from everything logged so far."""
        keys = [k for k in self.curves if self.history.get(k)]
        fig, axes = plt.subplots(1, max(1, len(keys)), figsize=(5 * max(1, len(keys)), 3.5), squeeze=False)
        for ax, key in zip(axes[0], keys):
            steps, values = zip(*self.history[key])
            ax.plot(steps, values, marker="o" if key.startswith("eval") else None, markersize=3)
            ax.set_title(key)
            ax.set_xlabel(self.x_label)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        path = self.run_dir / "learning_curve.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path

    def close(self) -> None:
        self.writer.close()
        self._jsonl.close()
