"""The command stream's rate under load: for each arm profile, the rate and period jitter of the command the safety
node streams to the driver (``command.rate_hz``), on an idle and on a loaded machine, with normal scheduling and
with SCHED_FIFO (``--rt-priority``), beside the DDS floor measured in the same run.

    MUJOCO_GL=egl .venv/bin/python benchmarks/command_rate.py [--profiles ros2_control_joint_position ur5e_servo
        franka_fr3_cartesian] [--seconds 15] [--rt-priority 50] [--load 2] [--out RESULT.json]

Each profile runs as against a real driver: the emulated driver (``arm_driver``) and the safety node
(``arm_safety``) in processes of their own (a private ``ROS_DOMAIN_ID``, localhost discovery), with the echo node
(``dds_echo``) beside them. This process plays the actor: it publishes a target pose on ``policy/target_pose`` at
20 Hz (a 2 cm circle about the profile's home, one turn in 4 s), and a probe node of its own (its own rclpy
context, no executor) keeps every message on the profile's command topic with the DDS sample information: the
source timestamp (when the safety node published it), the reception timestamp (when Fast DDS received it here) and
the publication sequence number (lost messages). Rate = messages published in the window / window length; jitter =
the gap between consecutive messages minus the nominal period (1 / ``command.rate_hz``), p50 / p99 / max, at the
publisher (source stamps) and at the receiver. A ping to the echo node every 50 ms, between the targets, measures
the DDS floor of the same window (two hops, nothing else).

Per profile and scheduling the graph is started once; the window on the idle machine comes first, then ``--load``
busy-loop processes (one per core by default) are started and the loaded window follows. The machine's load is
stated as the mean number of runnable tasks (sampled from ``/proc/loadavg`` every 0.5 s: what the load average
averages, without its one-minute lag), the one-minute load average at the end of the window and the share of
both cores that was busy (``/proc/stat``), and the cores the driver and the safety node used. With
``--rt-priority N`` the driver, safety and echo nodes are started with ``--rt-priority N`` and this process (the
actor) runs at SCHED_FIFO N as with ``runtime.actor_rt_priority N``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from common import Table, write_result  # noqa: E402
from ros_latency import percentiles  # noqa: E402

from robot_rl.utils.process import set_realtime  # noqa: E402
from tests.ros.graph import Graph, ros_env  # noqa: E402
from tests.ros.test_profiles import profile_file, wait_kinematics  # noqa: E402

PROFILES = ("ros2_control_joint_position", "ur5e_servo", "franka_fr3_cartesian")
TARGET_HZ = 20.0


def message_type(name: str) -> type:
    """``"geometry_msgs/msg/PoseStamped"`` -> the message class."""
    package, _, cls = name.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), cls)


class CommandProbe:
    """Every message on ``topic`` with its DDS sample information, on a node of its own context that no executor
    spins: a thread takes all waiting messages every 20 ms and keeps (source ns, reception ns, publication sequence
    number). The stamps are Fast DDS's, so this thread's own scheduling does not enter the figures."""

    def __init__(self, msg_type: type, topic: str, depth: int = 5000) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.node import Node
        from rclpy.qos import QoSProfile

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node("command_probe", context=self.context)
        self.sub = self.node.create_subscription(msg_type, topic, lambda _: None, QoSProfile(depth=depth))
        self.samples: list[tuple[int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="command_probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sub = self.sub
        while not self._stop.wait(0.02):
            with sub.handle:
                while (taken := sub.handle.take_message(sub.msg_type, sub.raw)) is not None:
                    info = taken[1]
                    self.samples.append((info["source_timestamp"], info["received_timestamp"],
                                         info["publication_sequence_number"] or 0))

    def matched(self) -> bool:
        return self.sub.get_publisher_count() > 0

    def window(self, start_ns: int, end_ns: int) -> np.ndarray:
        """The samples published in [start, end) as an (n, 3) int64 array, in publication order."""
        s = np.array(self.samples, np.int64).reshape(-1, 3)
        s = s[(s[:, 0] >= start_ns) & (s[:, 0] < end_ns)]
        return s[np.argsort(s[:, 2], kind="stable")]

    def close(self) -> None:
        import rclpy

        self._stop.set()
        self._thread.join(timeout=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def stream_figures(samples: np.ndarray, seconds: float, period: float) -> dict:
    """Rate and period jitter of one window's samples (see the module docstring)."""
    src, rcv, seq = samples[:, 0] / 1e9, samples[:, 1] / 1e9, samples[:, 2]

    def jitter(t: np.ndarray) -> dict:
        gaps = np.diff(np.sort(t)) - period
        return {k: v for k, v in percentiles(gaps).items() if k != "n"}

    return {"messages": int(len(src)), "rate_hz": len(src) / seconds, "gap_minus_period": jitter(src),
            "received_gap_minus_period": jitter(rcv), "lost": int(seq[-1] - seq[0] + 1 - len(seq)) if len(seq) else 0,
            "longest_gap_ms": float(np.diff(np.sort(src)).max() * 1e3)}


def busy_loops(n: int) -> list[subprocess.Popen]:
    """``n`` processes spinning in a Python loop at normal scheduling (each keeps one core busy), whatever this
    process's scheduling (a child would inherit SCHED_FIFO)."""
    return [subprocess.Popen(["chrt", "--other", "0", sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def cpu_times() -> np.ndarray:
    """(busy, total) jiffies of all cores so far (/proc/stat)."""
    fields = np.array(Path("/proc/stat").read_text().splitlines()[0].split()[1:], np.int64)
    return np.array([fields.sum() - fields[3] - fields[4], fields.sum()])


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, s) process ``pid`` has used so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runnable() -> int:
    """Tasks runnable now (the 4th field of /proc/loadavg, less this reader)."""
    return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0]) - 1


def measure(profile_path: str, seconds: float, load: int, rt_priority: int, nodes: dict[str, int]) -> dict:
    """The idle window, then the loaded one, on a running graph whose node processes are ``nodes`` (name: pid; their
    CPU use is reported per window). See the module docstring."""
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import Header, String

    from robot_rl.robots.profile import load_profile
    from robot_rl.ros.echo import PING, PONG
    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import from_stamp, pose_stamped
    from robot_rl.ros.profile_check import ARM_COMMAND_TYPES

    profile = load_profile(profile_path)
    period = 1.0 / profile.command.rate_hz
    if rt_priority:  # the actor's control loop with runtime.actor_rt_priority; Fast DDS's threads inherit it
        set_realtime(rt_priority, "--rt-priority")
    probe = CommandProbe(message_type(ARM_COMMAND_TYPES[profile.command.interface]), profile.command.topic)
    link = RosLink("command_rate_actor")
    procs: list[subprocess.Popen] = []
    try:
        link.subscribe("pong", Header, PONG, lambda m: (from_stamp(m.stamp), time.time()), stamped=False,
                       depth=10000, fast=True)
        link.subscribe("state", String, "safety_state", lambda m: m.data, stamped=False, depth=10000,
                       latched=True)
        ping = link.publisher("ping", PoseStamped, PING)
        pub = link.publisher("target", PoseStamped, "policy/target_pose")
        assert not link.wait_subscribed(["target", "ping"], 30.0) and not link.wait_matched(["pong"], 30.0)
        home, quat = np.asarray(profile.home_pos), np.asarray(profile.limits.home_quat)
        k, tick = 0, time.monotonic()
        pings: list[float] = []

        def drive(until: float, samples: list[int] | None = None) -> None:
            """Targets at 20 Hz and a ping 25 ms after each until ``until`` (monotonic); runnable counts into
            ``samples`` every 0.5 s."""
            nonlocal k, tick
            while tick < until:
                phase = 2 * np.pi * k / (4.0 * TARGET_HZ)
                pub.publish(pose_stamped(home + 0.02 * np.array([np.cos(phase) - 1, np.sin(phase), 0.0]), quat,
                                         time.time()))
                time.sleep(max(0.0, tick + 0.5 / TARGET_HZ - time.monotonic()))
                t = time.time()
                ping.publish(pose_stamped(home, quat, t))
                pings.append(t)
                if samples is not None and k % int(TARGET_HZ / 2) == 0:
                    samples.append(runnable())
                k += 1
                tick += 1.0 / TARGET_HZ
                time.sleep(max(0.0, tick - time.monotonic()))

        deadline = time.monotonic() + 30.0
        while not probe.matched() or len(probe.samples) < 10:  # the stream starts with the first target
            assert time.monotonic() < deadline, "no command on " + profile.command.topic
            drive(time.monotonic() + 0.1)
        drive(time.monotonic() + 2.0)  # the reference settles onto the circle
        out = {}
        for name in ("idle", "loaded"):
            if name == "loaded":
                procs = busy_loops(load)
                drive(time.monotonic() + 2.0)  # the scheduler settles with the load
            counts: list[int] = []
            holds_before = sum(1 for _, s in list(link.streams["state"].items) if s == "hold")
            first_ping, start, cpu = len(pings), time.time_ns(), cpu_times()
            used = {n: cpu_seconds(pid) for n, pid in nodes.items()}
            drive(time.monotonic() + seconds, counts)
            end, cpu = time.time_ns(), cpu_times() - cpu
            used = {n: (cpu_seconds(pid) - used[n]) / ((end - start) / 1e9) for n, pid in nodes.items()}
            holds = sum(1 for _, s in list(link.streams["state"].items) if s == "hold") - holds_before
            drive(time.monotonic() + 0.3)  # the last messages of the window arrive (targets go on: no hold)
            answered = {round(s, 6): a for _, (s, a) in list(link.streams["pong"].items)}
            sent = pings[first_ping:]
            floor = np.array([answered[round(t, 6)] - t for t in sent if round(t, 6) in answered])
            out[name] = {**stream_figures(probe.window(start, end), (end - start) / 1e9, period),
                         "dds_floor": {**percentiles(floor), "answered": f"{floor.size}/{len(sent)}"},
                         "runnable_mean": float(np.mean(counts)), "loadavg_1min": os.getloadavg()[0],
                         "cpu_busy": float(cpu[0] / cpu[1]), "node_cores": used,
                         "holds": holds,
                         "load": f"{load} busy loops" if name == "loaded" else "none"}
        return {"nominal_hz": profile.command.rate_hz, "interface": profile.command.interface,
                "topic": profile.command.topic, **out}
    finally:
        for p in procs:
            p.kill()
            p.wait()
        link.close()
        probe.close()
        if rt_priority:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def tables(result: dict) -> list[Table]:
    nominal = " / ".join(sorted({f"{r['nominal_hz']:g}" for r in result["runs"]}))
    table = Table(f"Command stream on the driver's topic (command.rate_hz {nominal} Hz) beside the DDS floor of the "
                  "same window", ["profile", "scheduling", "machine load", "rate Hz", "gap − period p50 / p99 / max ms",
                                  "watchdog holds", "DDS floor p50 / p99 ms"], echo=False)
    for r in result["runs"]:
        for name in ("idle", "loaded"):
            w = r[name]
            j, f = w["gap_minus_period"], w["dds_floor"]
            load = (f"{'no load' if name == 'idle' else w['load']}: CPU {100 * w['cpu_busy']:.0f} %, "
                    f"{w['runnable_mean']:.1f} runnable, load avg {w['loadavg_1min']:.1f}")
            table.add(r["profile"], f"SCHED_FIFO {r['rt_priority']}" if r["rt_priority"] else "normal", load,
                      f"{w['rate_hz']:.1f}", f"{j['p50_ms']:+.2f} / {j['p99_ms']:+.2f} / {j['max_ms']:+.1f}",
                      w["holds"], f"{f['p50_ms']:.2f} / {f['p99_ms']:.2f}")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each window (idle, loaded)")
    parser.add_argument("--rt-priority", type=int, default=50,
                        help="SCHED_FIFO priority of the second pass (0: normal scheduling only)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy-loop processes of the load")
    parser.add_argument("--domain", type=int, default=231)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.update(ros_env(args.domain))
    tmp = Path(tempfile.mkdtemp(prefix="command_rate_"))
    runs = []
    for name in args.profiles:
        path = profile_file(name, tmp)
        for prio in (0, args.rt_priority) if args.rt_priority else (0,):
            rt = ("--rt-priority", str(prio)) if prio else ()
            graph = Graph(args.domain, tmp)
            graph.start("arm_driver", "-p", f"profile:={path}", args=rt)
            graph.start("arm_safety", "-p", f"profile:={path}", args=rt)
            graph.start("dds_echo", args=rt)
            try:
                wait_kinematics(graph)
                pids = {n: graph.procs[n].pid for n in ("arm_driver", "arm_safety")}
                run = {"profile": name, "rt_priority": prio, **measure(path, args.seconds, args.load, prio, pids)}
            finally:
                graph.stop()
            runs.append(run)
            for w in ("idle", "loaded"):
                print(name, f"rt={prio}", w, f"{run[w]['rate_hz']:.1f} Hz", run[w]["gap_minus_period"],
                      f"lost {run[w]['lost']}", f"runnable {run[w]['runnable_mean']:.1f}", flush=True)
    from robot_rl_controllers.ros_safety_config import SafetyConfig

    result = {"runs": runs, "setup": {"profiles": args.profiles, "seconds": args.seconds, "load": args.load,
                                      "rt_priority": args.rt_priority, "target_hz": TARGET_HZ,
                                      "watchdog_rate_hz": SafetyConfig.watchdog_rate_hz}}
    print(f"results: {write_result('command_rate', result, args.out, tables=tables(result))}")


if __name__ == "__main__":
    main()
