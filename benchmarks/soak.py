"""Soak: ``robot-rl train`` for a long time with a fault every few minutes, nobody watching. Reports the faults by
kind and whether each was survived without a person, the transitions delivered (duplicated and missing: 0 and 0
expected), the behaviour after each fault (random actions after the warm-up: 0 expected; the windowed
update-to-data ratio in the windows after it, within 25 % of the target), the replay size, the resident memory of
every process over time (a plot) and the final evaluation (its success must be above what random actions get).

    MUJOCO_GL=egl .venv/bin/python benchmarks/soak.py [--minutes 120] [--config pickcube_pixels]
        [--fault-every 2 5] [--min-faults 0] [--faults kill_learner kill_actor stop_learner power_cut sighup disk_full]
        [--disk tmpfs|fsize] [--seed 0] [--folder runs/soak-DATE] [--out RESULT.json] [--plot PNG]

Everything goes to ``--folder`` (the run, its log, ``soak.json`` and ``soak_memory.png``); ``--out`` and ``--plot``
write the result and the plot elsewhere too (the benchmark page's files: ``--out benchmarks/results/soak.json
--plot docs/benchmarks/img/soak_memory.png``). Nothing is left in the temporary directory.

Faults: SIGKILL the learner; SIGKILL the actor; SIGSTOP the learner for longer than ``runtime.heartbeat_timeout``
(the supervisor must kill and replace it); SIGKILL the whole process group (a power cut) then ``--resume``; SIGHUP
to ``robot-rl train`` (a closed terminal) then ``--resume``; a full disk then ``--resume`` once space is freed.
``--disk tmpfs`` (needs root) puts the run folder on a tmpfs of its own and fills it with a ballast file (ENOSPC),
deleted after the run stopped; ``--disk fsize`` sets the learner's file-size limit instead (EFBIG, the same path).
At the end: SIGTERM (a final checkpoint), the replay read back (tests/runtime/delivery.py: no transition twice, no
gap inside an episode), and ``robot-rl eval`` of the final policy.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import Table, write_result  # noqa: E402

from robot_rl.runtime.transport import shm  # noqa: E402
from robot_rl.runtime.transport.names import board_name  # noqa: E402
from tests.runtime.delivery import CLI, delivery, kill_group, random_actions, start_train, windows_after  # noqa: E402

FAULTS = ("kill_learner", "kill_actor", "stop_learner", "power_cut", "sighup", "disk_full")
RESTART_WAIT_S = 600.0


class Soak:
    def __init__(self, run: Path, config: str, overrides: list[str], disk: str, log: Path) -> None:
        self.run, self.config, self.overrides, self.disk, self.log = run, config, overrides, disk, log
        self.proc: subprocess.Popen | None = None
        self.memory: list[tuple[float, str, float]] = []
        self.t0 = time.monotonic()

    # ------------------------------------------------------------- processes
    def start(self, resume: bool) -> None:
        if resume:
            self.proc = start_train("--resume", self.run, *self.overrides, log=self.log)
        else:
            self.proc = start_train(self.config, "--name", self.run.name, "--runs-dir", self.run.parent,
                                    *self.overrides, log=self.log)

    def learner(self) -> int | None:
        return learner_pid(self.run)

    def actors(self) -> list[int]:
        return actor_pids(self.run)

    def env_steps(self) -> int:
        return learner_env_steps(self.run)

    def learning(self, timeout: float, not_pid: int | None = None) -> float | None:
        """Seconds until a learner (not ``not_pid``) beats and the env steps grow again; None on time-out."""
        start, steps = time.monotonic(), self.env_steps()
        while time.monotonic() - start < timeout:
            pid = self.learner()
            if pid and pid != not_pid and self.env_steps() > steps:
                return time.monotonic() - start
            if self.proc is not None and self.proc.poll() is not None:
                return None
            self.sample()
            time.sleep(1.0)
        return None

    def sample(self) -> None:
        """Resident memory of each process of the run (by role), at most every 15 s."""
        now = time.monotonic() - self.t0
        if self.memory and now - self.memory[-1][0] < 15.0:
            return
        for role, mb in memory_rows(self.run, run_roles(self.run, self.proc)):
            self.memory.append((now, role, mb))
            self._keep(now, role, mb)

    def _keep(self, t: float, role: str, mb: float) -> None:
        """Each sample also goes to ``memory.jsonl`` beside the log at once: a harness that fails later keeps them."""
        with open(self.log.parent / "memory.jsonl", "a") as f:
            f.write(json.dumps([round(t, 1), role, round(mb, 1)]) + "\n")

    # ----------------------------------------------------------------- faults
    def inject(self, kind: str, rng: random.Random) -> dict:
        t = time.monotonic() - self.t0
        entry = {"kind": kind, "at_s": round(t), "env_steps": self.env_steps()}
        learner = self.learner()
        if kind == "kill_learner" and learner:
            os.kill(learner, signal.SIGKILL)
            entry["recovered_s"] = self.learning(RESTART_WAIT_S, not_pid=learner)
        elif kind == "stop_learner" and learner:
            os.kill(learner, signal.SIGSTOP)  # the supervisor must notice the silence and kill it
            entry["recovered_s"] = self.learning(RESTART_WAIT_S, not_pid=learner)
        elif kind == "kill_actor" and self.actors():
            victim = rng.choice(self.actors())
            os.kill(victim, signal.SIGKILL)
            entry["recovered_s"] = self.wait(lambda: [p for p in self.actors() if p != victim], RESTART_WAIT_S)
        elif kind == "power_cut":
            kill_group(self.proc)
            self.start(resume=True)
            entry["recovered_s"] = self.learning(RESTART_WAIT_S)
        elif kind == "sighup":
            self.proc.send_signal(signal.SIGHUP)
            entry["exit_code"] = self.proc.wait(timeout=RESTART_WAIT_S)
            self.start(resume=True)
            entry["recovered_s"] = self.learning(RESTART_WAIT_S)
        elif kind == "disk_full":
            entry.update(self.fill_disk())
            self.start(resume=True)
            entry["recovered_s"] = self.learning(RESTART_WAIT_S)
        else:
            entry["skipped"] = "no such process at the moment"
        entry["survived"] = entry.get("recovered_s") is not None
        print(json.dumps(entry), flush=True)
        with open(self.log.parent / "faults.jsonl", "a") as f:
            f.write(json.dumps(entry) + "\n")
        return entry

    def fill_disk(self) -> dict:
        out: dict = {}
        ballast = self.run.parent / "ballast"
        if self.disk == "tmpfs":
            free = shutil.disk_usage(self.run.parent).free
            with open(ballast, "wb") as f:  # leave 64 KiB: the next chunk or checkpoint does not fit
                f.truncate(0)
                chunk = b"\0" * (1 << 20)
                left = free - (64 << 10)
                try:
                    while left > 0:
                        left -= f.write(chunk[:min(len(chunk), left)])
                        f.flush()
                except OSError:
                    pass
        else:
            learner = self.learner()
            if learner:
                resource.prlimit(learner, resource.RLIMIT_FSIZE, (4096, 4096))
        try:
            out["exit_code"] = self.proc.wait(timeout=RESTART_WAIT_S)
        except subprocess.TimeoutExpired:
            out["exit_code"] = None
            kill_group(self.proc)
        out["message"] = "stopped on a full disk" in self.log.read_text()[-20000:]
        ballast.unlink(missing_ok=True)  # space freed
        return out

    def wait(self, predicate, timeout: float) -> float | None:  # noqa: ANN001
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if predicate():
                return time.monotonic() - start
            self.sample()
            time.sleep(1.0)
        return None


def learner_pid(run: Path) -> int | None:
    """The pid of the run's live learner (from its weight board), if any."""
    status = shm.peek_learner_status(board_name(run))
    return status.pid if status and alive(status.pid) else None


def actor_pids(run: Path) -> list[int]:
    """The pids of the run's live actors (from their registrations)."""
    pids = []
    for path in (run / "actors").glob("*.json") if (run / "actors").is_dir() else ():
        try:
            pid = int(json.loads(path.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            continue
        if alive(pid):
            pids.append(pid)
    return pids


def learner_env_steps(run: Path) -> int:
    """The env steps the run's learner has taken in (its weight board), 0 without one."""
    status = shm.peek_learner_status(board_name(run))
    return status.env_steps if status else 0


def run_roles(run: Path, proc: subprocess.Popen | None) -> dict[int, str]:
    """pid -> role (learner, actor, supervisor: ``proc``, the ``robot-rl train`` process) of the run's processes."""
    roles = {pid: "learner" for pid in [learner_pid(run)] if pid}
    roles.update({pid: "actor" for pid in actor_pids(run)})
    if proc is not None and proc.poll() is None:
        roles[proc.pid] = "supervisor"
    return roles


def memory_rows(run: Path, roles: dict[int, str]) -> list[tuple[str, float]]:
    """(role, resident MiB) of each process in ``roles`` alive now, and ("replay", the replay's filled rows in MiB:
    learner memory that grows by design) from the run's status."""
    rows = [(role, mb) for pid, role in roles.items() if (mb := rss_mb(pid)) is not None]
    try:
        rows.append(("replay", float(json.loads((run / "status.json").read_text())["replay_mb"])))
    except (OSError, ValueError, KeyError):
        pass
    return rows


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def memory_summary(memory: list[tuple[float, str, float]], warmup_s: float,
                   roles: tuple[str, ...] = ("learner", "learner less replay", "actor", "supervisor")) -> dict:
    """Per role: resident memory at the first sample after warm-up, at the end, the maximum, and growth in %;
    ``learner less replay``: the learner's memory less the replay's filled rows at the same moment (the replay
    grows by design until its capacity)."""
    replay = {t: m for t, r, m in memory if r == "replay"}
    memory = memory + [(t, "learner less replay", m - replay[t]) for t, r, m in memory
                       if r == "learner" and t in replay]
    out = {}
    for role in roles:
        series = [(t, m) for t, r, m in memory if r == role]
        after = [m for t, m in series if t >= warmup_s]
        if len(after) >= 2:
            tail = sorted(after[-5:])[len(after[-5:]) // 2]  # the median of the last samples
            out[role] = {"after_warmup_mb": after[0], "end_mb": tail, "max_mb": max(after),
                         "growth_pct": 100 * (tail - after[0]) / after[0]}
    return out


def plot_memory(memory: list[tuple[float, str, float]], faults: list[dict], path: Path,
                roles: tuple[str, ...] = ("learner", "actor", "supervisor", "replay")) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.5))
    for role in roles:
        series = [(t / 60, m) for t, r, m in memory if r == role]
        if series:
            ax.plot(*zip(*series), ".", markersize=2, label=role)
    for f in faults:
        ax.axvline(f["at_s"] / 60, color="grey", alpha=0.3, linewidth=0.8)
    ax.set_xlabel("minutes (grey: a fault)")
    ax.set_ylabel("resident memory, MiB")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def mount_tmpfs(path: Path, size_gb: float) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={int(size_gb * 1024)}m", "tmpfs", str(path)], check=True)
    return path


def behaviour(run: Path, faults: list[dict], warmup: int, utd: float) -> dict:
    """What the run did after the faults, from its final checkpoint and metrics: random actions beyond the warm-up
    (a resume must not repeat it), and per fault the windowed update-to-data ratios of the first windows wholly
    after it (within 25 % of ``utd``)."""
    per_fault = []
    for f in faults:
        windows = [v for _, v in windows_after(run, f["env_steps"])][:3]
        per_fault.append({"kind": f["kind"], "env_steps": f["env_steps"], "utd_windows": windows,
                          "utd_ok": bool(windows) and all(abs(v - utd) <= 0.25 * utd for v in windows)})
    acted = random_actions(run)  # reads the final checkpoint's replay: once
    return {"random_actions": acted, "warmup": warmup,
            "random_actions_after_warmup": max(0, acted - warmup), "utd_target": utd,
            "after_faults": per_fault}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=120.0)
    parser.add_argument("--config", default="pickcube_pixels")
    parser.add_argument("--override", nargs="*", default=[], help="extra robot-rl train flags, e.g. --agent.utd 1")
    parser.add_argument("--fault-every", nargs=2, type=float, default=(2.0, 5.0), metavar=("MIN", "MAX"),
                        help="minutes between faults, drawn uniformly")
    parser.add_argument("--min-faults", type=int, default=0,
                        help="run past --minutes until this many faults were injected (a slow machine recovers "
                             "slower, so a time budget alone can fit fewer faults)")
    parser.add_argument("--faults", nargs="+", default=list(FAULTS), choices=FAULTS)
    parser.add_argument("--disk", choices=("tmpfs", "fsize"), default="tmpfs" if os.geteuid() == 0 else "fsize")
    parser.add_argument("--disk-gb", type=float, default=8.0, help="size of the tmpfs holding the run folder")
    parser.add_argument("--warmup-minutes", type=float, default=10.0, help="memory growth is measured after this")
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--folder", default=None, help="where everything goes (default: runs/soak-<date>-<time>)")
    parser.add_argument("--plot", default=None, help="also write the memory plot here")
    parser.add_argument("--out", default=None, help="also write the result here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    folder = Path(args.folder or f"runs/soak-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    if folder.exists() and any(folder.iterdir()):
        parser.error(f"--folder {folder} is not empty")
    folder.mkdir(parents=True, exist_ok=True)
    parent = mount_tmpfs(folder / "disk", args.disk_gb) if args.disk == "tmpfs" else folder
    run, log = parent / "soak", folder / "train.log"
    print(f"run folder {run}, log {log}", flush=True)
    overrides = ["--total-env-steps", "100000000", "--seed", str(args.seed), *args.override]
    soak = Soak(run, args.config, overrides, args.disk, log)
    faults: list[dict] = []
    unplanned = 0
    try:
        soak.start(resume=False)
        end = soak.t0 + args.minutes * 60
        next_fault = time.monotonic() + rng.uniform(*args.fault_every) * 60
        while time.monotonic() < end or sum("skipped" not in f for f in faults) < args.min_faults:
            soak.sample()
            if soak.proc.poll() is not None:  # ended without a planned fault: what a person would have to do
                unplanned += 1
                print(f"train exited by itself ({soak.proc.returncode}); resuming", flush=True)
                soak.start(resume=True)
            if time.monotonic() >= next_fault:
                faults.append(soak.inject(rng.choice(args.faults), rng))
                next_fault = time.monotonic() + rng.uniform(*args.fault_every) * 60
            time.sleep(1.0)
        soak.proc.send_signal(signal.SIGTERM)
        final_code = soak.proc.wait(timeout=RESTART_WAIT_S)
        delivered = delivery(run)
        from robot_rl.config import load_yaml
        from robot_rl.training.config import TrainConfig

        cfg = load_yaml(TrainConfig, run / "config.yaml")
        acted = behaviour(run, faults, cfg.warmup_steps(drives_hardware=False), float(cfg.agent_config().utd))
        evaluation = subprocess.run([*CLI, "eval", str(run), "--episodes", str(args.eval_episodes)],
                                    capture_output=True, text=True, timeout=3600)
        text = evaluation.stdout
        success = json.loads(text[text.index("{"):]) if evaluation.returncode == 0 and "{" in text else {}
    finally:
        if soak.proc is not None and soak.proc.poll() is None:
            kill_group(soak.proc)
    for plot in {folder / "soak_memory.png", *([Path(args.plot)] if args.plot else [])}:
        plot_memory(soak.memory, faults, plot)
    by_kind = {k: {"injected": sum(f["kind"] == k for f in faults),
                   "survived": sum(f["kind"] == k and f["survived"] for f in faults)} for k in args.faults}
    result = {"minutes": args.minutes, "config": args.config, "disk": args.disk, "faults": faults,
              "by_kind": by_kind, "unplanned_exits": unplanned, "final_exit_code": final_code,
              "delivery": delivered, "behaviour": acted,
              "memory": memory_summary(soak.memory, args.warmup_minutes * 60),
              "memory_samples": soak.memory, "eval": success, "setup": {"overrides": overrides, "seed": args.seed,
                                                                         "fault_every_min": list(args.fault_every)}}
    for out in {folder / "soak.json", *([Path(args.out)] if args.out else [])}:
        write_result("soak", result, out, tables=tables(result))
    if args.disk == "tmpfs":  # the run stays readable: copied off the tmpfs before it goes
        shutil.copytree(run, folder / "soak", dirs_exist_ok=True)
        subprocess.run(["umount", str(parent)], check=False)
        parent.rmdir()


def tables(result: dict) -> list[Table]:
    faults = Table(f"Faults over {result['minutes']:.0f} minutes ({result['config']}), one every "
                   f"{result['setup']['fault_every_min'][0]:g}-{result['setup']['fault_every_min'][1]:g} min",
                   ["fault", "injected", "survived without a person"], echo=False)
    for kind, n in result["by_kind"].items():
        faults.add(kind, n["injected"], n["survived"])
    d = result["delivery"]
    outcome = Table("Outcome", ["quantity", "figure"], echo=False)
    outcome.add("transitions in the replay (final checkpoint)", d["transitions"])
    outcome.add("delivered twice", d["duplicated"])
    outcome.add("missing inside an episode", d["missing"])
    outcome.add("learner's count = replay's count", d["counted_env_steps"] == d["transitions"])
    outcome.add("runs that ended without a planned fault", result["unplanned_exits"])
    b = result.get("behaviour")
    if b:
        outcome.add("random actions after the warm-up (every resume)", b["random_actions_after_warmup"])
        ok = sum(f["utd_ok"] for f in b["after_faults"])
        outcome.add(f"faults followed by UTD windows within 25 % of {b['utd_target']:g}",
                    f"{ok} of {len(b['after_faults'])}")
    for role, m in result["memory"].items():
        outcome.add(f"{role} resident memory after warm-up -> end (max)",
                    f"{m['after_warmup_mb']:.0f} -> {m['end_mb']:.0f} MiB ({m['growth_pct']:+.1f} %, max "
                    f"{m['max_mb']:.0f})")
    if result["eval"]:
        outcome.add("final evaluation success", f"{result['eval'].get('success_rate', float('nan')):.0%}")
    return [faults, outcome]


if __name__ == "__main__":
    main()
