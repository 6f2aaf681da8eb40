"""``robot-rl launch FILE [name:=value ...]``: runs a ROS 2 YAML launch file where only the pip wheels exist (no
``launch`` / ``ros2`` CLI on PyPI). The same files run unchanged with ``ros2 launch`` on a ROS 2 install once the
package is in the ament index (``robot-rl ros-index PREFIX``).

Supported subset of the YAML launch format (anything else is an error, never silently ignored):

* ``arg``: ``name``, ``default``, ``description``; set on the command line as ``name:=value``.
* ``node``: ``pkg`` (``robot_rl``), ``exec``, ``name``, ``namespace``, ``param`` (list of ``{name, value}``),
  ``remap`` (list of ``{from, to}``), ``args`` (extra command-line arguments), ``output``.
* ``executable``: ``cmd``, ``name``, ``output``.
* substitutions ``$(var NAME)`` and ``$(env NAME [default])`` in any string.

Every node is a child process with the ROS 2 command line ``--ros-args -r __node:=NAME -r __ns:=NS -p k:=v
-r from:=to``. Ctrl-C (SIGINT), SIGTERM or SIGHUP (a closed terminal) stops the graph: SIGINT to every child, then
SIGTERM after ``sigterm_timeout`` and SIGKILL after another ``sigkill_timeout`` (as ``ros2 launch`` does); the
launcher exits when all children have exited.

A child that exits with 2 refused its configuration (a node does so as it starts: a missing profile, a bad
parameter): the launcher stops the rest of the graph and repeats the child's one line (which a node writes to
the file named in ``ROBOT_RL_ERROR_FILE`` rather than to the screen, so it is shown once).

Exit codes, as ``robot-rl train``'s: 0 every child exited cleanly on its own; 1 a child failed; 2 a refused launch
file, launch argument or node configuration (the graph is stopped); 129 / 130 / 143 stopped by SIGHUP / SIGINT
(Ctrl-C) / SIGTERM.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Any

import tyro
import yaml
from tyro.conf import Positional, arg

from robot_rl.config import parse_command
from robot_rl.utils.command import command_error
from robot_rl.utils.log import get_logger

log = get_logger(__name__)

PACKAGE = "robot_rl"
EXECUTABLES = ("arm_hardware", "car_hardware", "arm_controller", "drive_controller", "arm_safety", "car_safety",
               "arm_stack", "arm_driver", "actor", "bag_recorder")
"""ROS 2 executables of package ``robot_rl``; each is the console script ``robot-rl-<exec, _ as ->``."""
_SUB = re.compile(r"\$\((var|env) ([^)\s]+)(?: ([^)]*))?\)")
NODE_KEYS = {"pkg", "exec", "name", "namespace", "param", "remap", "args", "output"}
EXEC_KEYS = {"cmd", "name", "output"}
CONFIG_ERROR = 2
"""Exit code of a process that refused its configuration (a node, ``robot-rl actor``, the launcher itself)."""
ERROR_FILE = "ROBOT_RL_ERROR_FILE"
"""Environment variable naming the file where a node started by the launcher writes its one-line configuration
error (:func:`robot_rl.ros.node.run_node`); the launcher repeats it."""


@dataclass
class LaunchConfig:
    """How the launcher stops the graph."""

    sigterm_timeout: float = 5.0
    """Seconds after SIGINT before a child still running gets SIGTERM."""
    sigkill_timeout: float = 5.0
    """Seconds after SIGTERM before SIGKILL."""


@dataclass
class Process:
    """One process of the graph: its name and command line."""

    name: str
    cmd: list[str]
    output: str = "screen"
    env: dict[str, str] = field(default_factory=dict)


def executable_path(pkg: str, exe: str) -> str:
    """The program for ``pkg``/``exec``: the console script next to this Python (the venv), else on PATH."""
    if pkg != PACKAGE:
        raise ValueError(f"node pkg {pkg!r}: only {PACKAGE!r} nodes can run without a ROS 2 install (ros2 launch)")
    if exe not in EXECUTABLES:
        raise ValueError(f"node exec {exe!r}: {PACKAGE} has {', '.join(EXECUTABLES)}")
    script = "robot-rl-" + exe.replace("_", "-")
    local = Path(sys.executable).parent / script
    found = str(local) if local.exists() else shutil.which(script)
    if not found:
        raise FileNotFoundError(f"{script} not found: install the package (pip install -e '.[ros2]')")
    return found


def substitute(value: Any, args: dict[str, str]) -> Any:
    """``$(var x)`` / ``$(env X [default])`` replaced in strings (recursively in lists and dicts)."""
    if isinstance(value, list):
        return [substitute(v, args) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, args) for k, v in value.items()}
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        kind, name, default = m.group(1), m.group(2), m.group(3)
        if kind == "var":
            if name not in args:
                raise ValueError(f"$(var {name}): no such launch argument (declared: {sorted(args)})")
            return args[name]
        if name in os.environ:
            return os.environ[name]
        if default is None:
            raise ValueError(f"$(env {name}): not set and no default")
        return default

    return _SUB.sub(one, value)


def _param_arg(name: str, value: Any) -> str:
    """``name:=value`` with the value in the YAML form rcl parses (``[0.3, 0.5]``, ``true``, ``'text'``)."""
    if isinstance(value, str):
        return f"{name}:={value}"  # already text: rcl parses it as YAML, as ros2 launch does
    return f"{name}:={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"


def load(path: str | Path, overrides: dict[str, str] | None = None) -> list[Process]:
    """Parses a launch file into the processes to start (arguments from ``overrides`` or their defaults)."""
    doc = yaml.safe_load(Path(path).read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("launch"), list):
        raise ValueError(f"{path}: not a YAML launch file (needs a top-level 'launch:' list)")
    overrides = dict(overrides or {})
    args: dict[str, str] = {}
    procs: list[Process] = []
    for entry in doc["launch"]:
        if not isinstance(entry, dict) or len(entry) != 1:
            raise ValueError(f"{path}: each launch entry is a one-key mapping, got {entry!r}")
        (kind, body), = entry.items()
        body = body or {}
        if kind == "arg":
            name = body["name"]
            if name in overrides:
                args[name] = overrides.pop(name)
            elif "default" in body:
                args[name] = str(substitute(body["default"], args))
            else:
                raise ValueError(f"launch argument {name!r} is required: add {name}:=VALUE")
        elif kind == "node":
            procs.append(_node(body, args))
        elif kind == "executable":
            unknown = set(body) - EXEC_KEYS
            if unknown:
                raise ValueError(f"executable: unsupported keys {sorted(unknown)} (supported: {sorted(EXEC_KEYS)})")
            cmd = shlex.split(substitute(body["cmd"], args))
            procs.append(Process(body.get("name", Path(cmd[0]).name), cmd, body.get("output", "screen")))
        else:
            raise ValueError(f"{path}: launch action {kind!r} is not supported here (arg, node, executable)")
    if overrides:
        raise ValueError(f"unknown launch arguments {sorted(overrides)} (declared: {sorted(args)})")
    return procs


def _node(body: dict[str, Any], args: dict[str, str]) -> Process:
    unknown = set(body) - NODE_KEYS
    if unknown:
        raise ValueError(f"node: unsupported keys {sorted(unknown)} (supported: {sorted(NODE_KEYS)})")
    body = substitute(body, args)
    cmd = [executable_path(body["pkg"], body["exec"]), *shlex.split(str(body.get("args", "")))]
    ros: list[str] = []
    if body.get("name"):
        ros += ["-r", f"__node:={body['name']}"]
    if body.get("namespace"):
        ns = str(body["namespace"])
        ros += ["-r", f"__ns:={ns if ns.startswith('/') else '/' + ns}"]
    for p in body.get("param") or []:
        if set(p) != {"name", "value"}:
            raise ValueError(f"node param entries need name and value, got {p!r} (param files are not supported)")
        ros += ["-p", _param_arg(p["name"], p["value"])]
    for r in body.get("remap") or []:
        ros += ["-r", f"{r['from']}:={r['to']}"]
    if ros:
        cmd += ["--ros-args", *ros]
    return Process(body.get("name") or body["exec"], cmd, body.get("output", "screen"))


def run(procs: list[Process], cfg: LaunchConfig | None = None) -> int:
    """Starts every process and waits; SIGINT, SIGTERM or SIGHUP stops them all, as does a child that refuses its
    configuration (exit code 2). Returns the launcher's exit code (the module docstring lists them)."""
    cfg = cfg or LaunchConfig()
    stopped_by: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stopped_by.append(signum)

    # A closed terminal or a dropped SSH session (SIGHUP) stops the graph like Ctrl-C: no node is left orphaned.
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    children: dict[str, subprocess.Popen] = {}
    refused: str | None = None
    with tempfile.TemporaryDirectory(prefix="robot-rl-launch-") as errors:
        error_files = {p.name: Path(errors) / f"{i}.txt" for i, p in enumerate(procs)}
        try:
            for p in procs:
                out = subprocess.DEVNULL if p.output == "log" else None
                # Own session: a terminal's Ctrl-C reaches the launcher only, which then stops the children in order.
                children[p.name] = subprocess.Popen(p.cmd, stdout=out, stderr=out, start_new_session=True,
                                                    env={**os.environ, **p.env, ERROR_FILE: str(error_files[p.name])})
                log.info("started %s (pid %d)", p.name, children[p.name].pid)
            reported: set[str] = set()
            while refused is None and not stopped_by and any(c.poll() is None for c in children.values()):
                for name, c in children.items():
                    if c.poll() is None or name in reported:
                        continue
                    reported.add(name)
                    if c.returncode == CONFIG_ERROR:  # the rest of the graph would run without it: stop it all
                        refused = name
                        break
                    # A node that dies while the others run is a problem worth seeing at the default level.
                    log.log(logging.INFO if c.returncode == 0 else logging.WARNING, "%s exited with %d", name,
                            c.returncode)
                time.sleep(0.1)
        finally:
            codes = stop(children, cfg)
            for s, handler in old.items():
                signal.signal(s, handler)
        if refused is None:  # also one that exited with 2 after the others
            refused = next((name for name, code in codes.items() if code == CONFIG_ERROR), None)
        if refused is not None:
            error = error_files[refused]
            line = error.read_text().strip() if error.exists() else ""
            return command_error("robot-rl launch", line or f"{refused} exited with {CONFIG_ERROR}: it refused its "
                                 "configuration (see its output)")
    if stopped_by:
        return 128 + stopped_by[0]
    return 0 if all(c in (0, -signal.SIGINT) for c in codes.values()) else 1


def stop(children: dict[str, subprocess.Popen], cfg: LaunchConfig) -> dict[str, int]:
    """SIGINT to every running child, then SIGTERM, then SIGKILL for those still running."""
    for sig, wait in ((signal.SIGINT, cfg.sigterm_timeout), (signal.SIGTERM, cfg.sigkill_timeout),
                      (signal.SIGKILL, 5.0)):
        running = [c for c in children.values() if c.poll() is None]
        if not running:
            break
        for c in running:
            c.send_signal(sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(c.poll() is None for c in running):
            time.sleep(0.05)
    codes = {name: c.wait() for name, c in children.items()}
    log.info("stopped: %s", codes)
    return codes


def launch_dir() -> Path:
    """The launch files: this checkout's ``launch/``, or where an installed wheel put them (``robot_rl_launch``)."""
    checkout = Path(__file__).resolve().parents[2] / "launch"
    if checkout.is_dir():
        return checkout

    spec = find_spec("robot_rl_launch")  # a folder of data, no __init__.py (a namespace package)
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else checkout


LAUNCH_DIR = launch_dir()


def bundled() -> dict[str, str]:
    """The bundled launch files by name (``sim_arm`` for ``sim_arm.launch.yaml``), each with its first comment line."""
    out = {}
    for path in sorted(LAUNCH_DIR.glob("*.launch.yaml")):
        lines = path.read_text().splitlines()
        comment = " ".join(line.lstrip("# ").strip() for line in lines[:next(
            (i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))])
        sentence = re.split(r"(?<=[.:])\s+(?=[A-Z])", comment, maxsplit=1)[0]
        out[path.name.removesuffix(".launch.yaml")] = sentence if len(sentence) <= 100 else sentence[:97] + "..."
    return out


def resolve(word: str) -> Path:
    """A launch file as given, else the bundled one it names: ``sim_arm``, ``sim_arm.launch.yaml`` or a checkout
    path such as ``launch/sim_arm.launch.yaml`` typed outside a checkout."""
    path = Path(word)
    if path.is_file():
        return path
    name = path.name.removesuffix(".launch.yaml")
    if path.suffix in ("", ".yaml") and (LAUNCH_DIR / f"{name}.launch.yaml").is_file():
        return LAUNCH_DIR / f"{name}.launch.yaml"
    raise FileNotFoundError(f"no launch file {word!r} (bundled: {', '.join(bundled())})")


@tyro.conf.configure(tyro.conf.FlagCreatePairsOff)
@dataclass(frozen=True)
class LaunchArgs:
    """Run a ROS 2 YAML launch file (arg, node and executable entries) without the ros2 CLI; Ctrl-C stops every
    node (SIGINT, then SIGTERM, then SIGKILL).

    Exit codes: 0 every node exited cleanly on its own; 1 a node failed; 2 a refused launch file, argument or node
    configuration (one line; the graph is stopped); 129 / 130 / 143 stopped by SIGHUP / SIGINT / SIGTERM."""

    file: Annotated[Positional[str], arg(metavar="FILE|NAME")] = ""
    """The YAML launch file, e.g. launch/sim_arm.launch.yaml, or a bundled one by name, e.g. sim_arm (found in this
    checkout's launch/ or the installed package, so it works from a wheel too)."""
    overrides: Annotated[Positional[tuple[str, ...]], arg(metavar="[NAME:=VALUE ...]", help_behavior_hint="")] = ()
    """Launch arguments, e.g. task:=PickCube image_size:=64."""
    print_only: Annotated[bool, arg(name="print")] = False
    """Print the processes' command lines instead of starting them."""
    list_only: Annotated[bool, arg(name="list")] = False
    """List the bundled launch files by name, with what each starts, and exit."""


def main(argv: list[str]) -> int:
    """``robot-rl launch FILE|NAME [name:=value ...] [--print]`` or ``robot-rl launch --list``."""
    # Words may come in any order (as ros2 launch takes them): the flags take no value, so they can go last, and
    # the one word without ":=" is the file.
    argv = [a for a in argv if not a.startswith("-")] + [a for a in argv if a.startswith("-")]
    args = parse_command(LaunchArgs, argv, prog="robot-rl launch", description=inspect.getdoc(LaunchArgs))
    if args.list_only:
        for name, about in bundled().items():
            print(f"{name:16s} {about}")
        return 0
    words = [w for w in (args.file, *args.overrides) if w]
    files = [w for w in words if ":=" not in w]
    if len(files) != 1:
        return command_error("robot-rl launch", f"expected one launch FILE or NAME and NAME:=VALUE arguments, got "
                                                f"{words} (robot-rl launch --list shows the bundled ones)")
    overrides = dict(w.split(":=", 1) for w in words if ":=" in w)
    try:
        procs = load(resolve(files[0]), overrides)
    except (ValueError, FileNotFoundError, KeyError) as exc:
        return command_error("robot-rl launch", exc)
    if args.print_only:
        for p in procs:
            print(f"{p.name}: {shlex.join(p.cmd)}")
        return 0
    return run(procs)
