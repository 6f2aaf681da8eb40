"""The ``robot-rl`` command.

    robot-rl train [CONFIG] [--resume RUN_DIR] [--field.sub value ...]
    robot-rl eval RUN_DIR [RUN_DIR ...] [--episodes N] [--video out.gif|mp4]
    robot-rl eval POLICY [--tasks PickColor ...] [--execution.mode sync|async|future]
        (a base policy per task)
    robot-rl learner --run-dir RUN [--resume]
        (what `train` starts; run alone on another machine)
    robot-rl actor --run-dir RUN [--index I]   (likewise)
    robot-rl record-demos TASK [--device scripted] [-n 20] [--out PATH] [--noise 0.1]
        [--seed 0] [--image-size 0]
    robot-rl demos show PATH [--episode K] [--video out.gif|out.mp4]
    robot-rl datasets export PATH --out DIR [--format lerobot] | import DIR --out PATH
        (LeRobotDataset v3.0)
    robot-rl record-frames TASK [--mode sim|keys] [--episodes 40] [--image-size 64]
        [--out PATH]   (reward frames)
    robot-rl train-reward FRAMES [FRAMES ...] [--out DIR] [--epochs N]
        (success classifier for a learned reward)
    robot-rl train-bc [CONFIG] [--datasets ...] [--out DIR] [--steps N]
        (the small VLA by behaviour cloning)
    robot-rl distill [CONFIG] --run RUN [--episodes N] [--out DIR] [--train.datasets ...]
        (RL -> generalist)
    robot-rl serve-policy POLICY [--host 127.0.0.1] [--port 8000]
        (openpi's websocket protocol)
    robot-rl export RUN_DIR [--format onnx|torchscript] [--out DIR]
        (a policy for robot PCs; see robot_rl.deploy)
    robot-rl launch FILE [name:=value ...] [--print]
        (ROS 2 YAML launch file, e.g. launch/sim_arm.launch.yaml)
    robot-rl ros-index PREFIX   (ament index entries so `ros2 launch robot_rl ...` resolves)
    robot-rl robot list | show PROFILE | check PROFILE [--namespace NS]
        (a robot profile resolved, or checked against the live graph and safety node)
    robot-rl record-excitation [CONFIG] [--profile P] [--out DIR] [--seconds 60]
        (moves the arm and records a bag for calibrate)
    robot-rl record-response [CONFIG] [--profile P] [--out FILE]
        (the end effector's path under a probe of the actions, for calibrate --response)
    robot-rl calibrate [CONFIG] --bag BAG [--response FILE] [--profile P] [--out DIR]
        (the sim's latency, bandwidth, friction... fitted to a robot log)
    robot-rl record-car-excitation [CONFIG] [--profile P] [--out DIR] [--seconds 60]
        (drives the car around its track and records a bag for calibrate-car)
    robot-rl calibrate-car [CONFIG] --bag BAG [--profile P] [--out DIR]
        (the Drive sim's latency, lags, trim and odometry gain fitted to a car's log)

Every command takes ``--log-level debug|info|warning|error`` (processes it starts inherit it)
and ``--help``. CONFIG is a YAML file or the name of a bundled task config
(robot_rl/configs/<name>.yaml; default: pendulum); every field of TrainConfig can be overridden
with a flag, e.g. ``--agent.utd 10 --total-env-steps 20000``.

Exit codes of ``robot-rl train``: 0 the run is complete; 1 the supervisor ended it (a restart
budget spent, a full disk: the message says how to continue); 2 a refused command line or
config (nothing started); 129 / 130 / 143 stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM, with a
final checkpoint (continue with ``--resume``). A learner or actor that stops on a full disk
exits with 3, as does any other command that runs out of space (one message naming the file;
what it was writing is not left half-written).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from dataclasses import replace as with_fields
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from robot_rl.config import ConfigError, JsonDict, load_yaml, parse, parse_command, replace
from robot_rl.policies.base import POLICY_FAILED, PolicyError
from robot_rl.policies.config import BasePolicyConfig, ExecutionConfig
from robot_rl.utils.command import command_error
from robot_rl.utils.disk import DISK_FULL, describe, disk_full_error
from robot_rl.utils.imports import absolute_imports
from robot_rl.utils.log import get_logger, pop_log_level, setup_logging
from robot_rl.utils.process import die_with_parent, exit_on_signal, ignore_stop_signals, on_stop_signals
from robot_rl.utils.run_dir import NoCompleteCheckpoint, latest_checkpoint
from robot_rl.view.config import ViewConfig

log = get_logger("robot_rl.cli")
CONFIG_DIR = Path(__file__).parent / "configs"
DEFAULT_CONFIG = "pendulum"
CONFIG_ERROR = 2


def bundled_configs() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def resolve_config(name: str) -> Path:
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        return path
    bundled = CONFIG_DIR / f"{name}.yaml"
    if not bundled.is_file():
        raise ValueError(f"unknown task config {name!r}: not a .yaml file and not bundled "
                         f"(bundled: {', '.join(bundled_configs())})")
    return bundled


def fail(command: str, message: object) -> int:
    """A refused command line or config: one message, exit code 2 (never a restart or a resume hint); a full
    disk: one message, exit code 3."""
    return command_error(f"robot-rl {command}", message)


def resumed_agent(cfg: Any, resume: str) -> Any:
    """The config a resume checks: ``init_from`` is read only while the run has no checkpoint of its own (after
    one, a resume loads the agent fine-tuned so far), so a base run moved or deleted since does not stop it."""
    if not cfg.init_from:
        return cfg
    try:
        latest_checkpoint(resume)
    except (FileNotFoundError, ValueError, OSError):
        return cfg
    return with_fields(cfg, init_from="")


def cmd_train(argv: list[str]) -> int:
    from robot_rl.training.config import TrainConfig  # deferred: loads torch; robot-rl --help stays fast

    resume = None
    if "--resume" in argv:
        i = argv.index("--resume")
        if i + 1 >= len(argv):
            return fail("train", "--resume needs a run folder")
        resume = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    description = (f"Train a policy: learner and actors as separate processes.\n\nCONFIG: a YAML file or a bundled "
                   f"task ({', '.join(bundled_configs())}); without CONFIG the bundled '{DEFAULT_CONFIG}' task, "
                   f"whose values --help shows as defaults. Precedence: dataclass defaults < CONFIG < flags.\n\n"
                   f"--resume RUN_DIR continues a run from its folder (its config.yaml; flags override it), also one "
                   f"stopped before its first checkpoint.")
    try:
        if argv and not argv[0].startswith("-"):
            config_path, argv = resolve_config(argv[0]), argv[1:]
        elif resume is not None:
            config_path = Path(resume) / "config.yaml"
        else:
            config_path = resolve_config(DEFAULT_CONFIG)
        cfg = parse(TrainConfig, config_path, argv, prog="robot-rl train [CONFIG]", description=description)
        # Files named on the command line are relative to the working directory; make them absolute once.
        cfg = replace(cfg, {"env.imports": absolute_imports(cfg.env.imports, Path.cwd())})
        if resume is None:
            from robot_rl.runtime.preflight import check_run  # deferred: loads torch; robot-rl --help stays fast

            check_run(cfg)
        else:
            resumed_agent(cfg, resume).validate()
    except (ConfigError, ValueError) as exc:
        return fail("train", exc)
    from robot_rl.runtime.supervisor import RunAborted, train  # deferred: loads torch; robot-rl --help stays fast

    try:
        run_dir, result = train(cfg, resume)
    except (FileExistsError, FileNotFoundError, ConfigError) as exc:
        return fail("train", exc)
    except RunAborted as exc:  # a restart budget spent, a full disk: one message, not a traceback
        log.error("train: %s", exc)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: the run stopped with a final checkpoint, as on SIGTERM or SIGHUP
        return 128 + signal.SIGINT
    print(f"run folder: {run_dir}")
    print("final evaluation: " + json.dumps({k: round(v, 3) for k, v in result.items()}))
    print(f"policy: {run_dir / 'checkpoints'}  curve: {run_dir / 'learning_curve.png'}")
    return 0


@dataclass(frozen=True)
class SideArgs:
    """One side of a run started on its own (``robot-rl train`` starts both)."""

    run_dir: str
    """Run folder written by ``robot-rl train`` (its config.yaml)."""
    resume: bool = False
    """Learner: restore the latest checkpoint."""
    index: int = 0
    """Actor: its index in the run."""
    incarnation: int = 0
    """Actor: how many times this index was restarted."""


def _run_side(argv: list[str], prog: str):
    from robot_rl.training.config import TrainConfig  # deferred: loads torch; robot-rl --help stays fast

    args = parse_command(SideArgs, argv, prog)
    return args, load_yaml(TrainConfig, Path(args.run_dir) / "config.yaml")


def _disk_full(side: str, exc: BaseException, run_dir: str) -> int | None:
    """A learner or actor stopped by a full disk: one message naming what filled up, exit code DISK_FULL (the
    supervisor then ends the run instead of restarting); None for any other error."""
    err = disk_full_error(exc)
    if err is None:
        return None
    log.debug("%s: the full-disk error", side, exc_info=exc)
    log.error("%s stopped, the disk is full (%s) under %s. The last checkpoint is intact and the actors' spools "
              "hold what it lacks: free space, then continue with robot-rl train --resume %s", side, describe(err),
              run_dir, run_dir)
    return DISK_FULL


def _errors_not_signals() -> None:
    """A file-size limit (``ulimit -f``) gives an error the process reports (EFBIG), not a core-dumping SIGXFSZ;
    a writer thread that hits a full disk (TensorBoard's), or a writer's ``__del__`` retrying its flush (imageio's),
    leaves the one message to the main thread."""
    if getattr(sys.unraisablehook, "_robot_rl", False):  # once per process
        return
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    default, default_unraisable = threading.excepthook, sys.unraisablehook

    def hook(args: threading.ExceptHookArgs) -> None:
        if disk_full_error(args.exc_value) is None:
            default(args)
        else:
            log.debug("thread %s: %s", args.thread.name if args.thread else "?", args.exc_value)

    def unraisable(args) -> None:  # noqa: ANN001 - sys.UnraisableHookArgs
        if disk_full_error(args.exc_value) is None:
            default_unraisable(args)
        else:
            log.debug("%s: %s", args.object, args.exc_value)
    unraisable._robot_rl = True  # type: ignore[attr-defined]
    threading.excepthook, sys.unraisablehook = hook, unraisable


def cmd_learner(argv: list[str]) -> int:
    """The learner alone (e.g. on a GPU box): ``robot-rl learner --run-dir RUN [--resume]``."""
    import torch  # deferred: torch; robot-rl --help stays fast

    from robot_rl.runtime.learner import Learner  # deferred: loads torch; robot-rl --help stays fast

    die_with_parent()
    _errors_not_signals()

    try:
        args, cfg = _run_side(argv, "robot-rl learner")
        rt = cfg.runtime
        torch.set_num_threads(rt.learner_threads or max(1, (os.cpu_count() or 1) - rt.num_actors))
        if rt.learner_nice:
            os.nice(rt.learner_nice)  # the actors' control loops come first on a shared machine
        on_stop_signals(exit_on_signal)  # until it can checkpoint
        learner = Learner(cfg, args.run_dir, resume=args.resume)
    except (ConfigError, ValueError, NoCompleteCheckpoint) as exc:  # a restart would fail the same way
        return fail("learner", exc)
    # From here a stop signal ends the run at the next step with a final checkpoint (the supervisor's shutdown,
    # a scheduler's SIGTERM, a closed terminal, Ctrl-C)
    on_stop_signals(lambda signum, _frame: learner.request_stop(signum))
    try:
        learner.run()
    except Exception as exc:
        if (code := _disk_full("learner", exc, args.run_dir)) is None:
            raise
        return code
    finally:
        learner.close()
    return 128 + learner.stop_signal if learner.stop_signal else 0


def cmd_actor(argv: list[str]) -> int:
    """One actor alone (e.g. on the robot PC): ``robot-rl actor --run-dir RUN [--index I]``."""
    from robot_rl.envs.contract import RobotUnavailable  # deferred: imports gymnasium
    from robot_rl.runtime.actor import Actor  # deferred: loads torch; robot-rl --help stays fast

    die_with_parent()
    _errors_not_signals()

    try:
        args, cfg = _run_side(argv, "robot-rl actor")
        # SIGTERM / SIGHUP (and Ctrl-C when run alone) = stop cleanly: the partial chunk and the spool are flushed
        on_stop_signals(exit_on_signal)
        actor = Actor(cfg, args.run_dir, index=args.index, incarnation=args.incarnation)
    except (ConfigError, ValueError) as exc:
        return fail("actor", exc)
    try:
        actor.run()
    except RobotUnavailable as exc:  # the transitions so far are flushed; a new actor life reconnects
        log.error("actor %s: the robot stopped answering (%s); this actor ends, a replacement reconnects",
                  args.index, exc)
        return 1
    except PolicyError as exc:  # after the executor's max_failed_inferences in a row: one line, no traceback
        log.error("actor %s: %s", args.index, exc)
        return POLICY_FAILED
    except Exception as exc:
        if (code := _disk_full("actor", exc, args.run_dir)) is None:
            raise
        return code
    return 0


@dataclass(frozen=True)
class EvalArgs:
    """Deterministic evaluation of trained runs (several runs, i.e. seeds, also get the IQM with a stratified
    bootstrap 95 % CI) or of a base policy (a saved policy folder or a ws:// policy server) per task."""

    run_dirs: Annotated[tuple[str, ...], tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR|POLICY")]
    """Run folders (their latest checkpoint's policy, or ``--policy best``), or one base policy: a folder with
    policy.json, ws://HOST:PORT or lerobot:<type>:<folder>."""
    policy: Literal["latest", "best"] = "latest"
    """Run folders: which policy of each: the newest checkpoint's, or the best evaluation's the learner kept
    (``keep_best``)."""
    episodes: int = 10
    """Episodes per run (the same placements for every run) or per task."""
    video: str | None = None
    """Write the first run's episodes to this .gif or .mp4 (several cameras side by side); for a base policy, a
    folder that gets one video per task."""
    tasks: tuple[str, ...] = ()
    """Base policy: the sim tasks to evaluate on (default: the tasks the policy was trained on)."""
    env_kwargs: JsonDict = field(default_factory=dict)
    """Base policy: env kwargs for ``tasks`` (default: those of its training data)."""
    instruction: str = ""
    """Base policy: the instruction for tasks that report none (e.g. a robot env)."""
    base_policy: BasePolicyConfig = field(default_factory=BasePolicyConfig)
    """Base policy: how it is reached (its path is the positional argument)."""
    execution: ExecutionConfig = field(default_factory=lambda: ExecutionConfig(mode="sync"))
    """Base policy: how its chunks are executed."""
    view: ViewConfig = field(default_factory=ViewConfig)
    """The live operator view of the first run's episodes (``--view.enabled``; the view extra), each saved under
    ``<run>/eval_view``."""


def cmd_eval(argv: list[str]) -> int:
    from robot_rl.policies.evaluate import is_base_policy  # deferred: loads gymnasium; robot-rl --help stays fast
    from robot_rl.training.evaluation import evaluate_base_policy, evaluate_runs  # deferred: loads torch

    args = parse_command(EvalArgs, argv, "robot-rl eval")
    if not args.run_dirs:
        return fail("eval", "give at least one run folder or a base policy")
    try:
        if is_base_policy(args.run_dirs[0]):
            if len(args.run_dirs) > 1:
                return fail("eval", "a base policy is evaluated alone")
            result = evaluate_base_policy(args.run_dirs[0], args.tasks, args.env_kwargs, args.episodes,
                                          args.base_policy, args.execution, args.video, args.instruction)
            print(json.dumps(result, indent=2))
            return 0
        result = evaluate_runs(list(args.run_dirs), args.episodes, args.video, view=args.view, policy=args.policy)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        return fail("eval", exc)
    except PolicyError as exc:  # a base policy that cannot run: its error, not a 0 % success
        log.error("eval: %s", exc)
        return 1
    if len(args.run_dirs) == 1:
        result = result[args.run_dirs[0]]
    print(json.dumps(result, indent=2))
    if args.video:
        log.info("video: %s", args.video)
    return 0


@dataclass(frozen=True)
class ServePolicyArgs:
    """Serve a base policy over openpi's websocket protocol (clients: base_policy.path ws://HOST:PORT, openpi's
    websocket client). Binds 127.0.0.1 unless --host says otherwise; with a token in --token-env's variable,
    clients must send it."""

    policy: Annotated[str, tyro.conf.Positional]
    """A saved policy folder (policy.json), lerobot:<type>:<folder>, or another server's ws:// URL (a relay)."""
    host: str = "127.0.0.1"
    """Address to bind (0.0.0.0 = every interface: set a token)."""
    port: int = 8000
    """TCP port."""
    token_env: str = "ROBOT_RL_POLICY_TOKEN"
    """Environment variable holding the token clients must send (unset = no token)."""
    max_message_mb: float = 64.0
    """Largest request accepted (MB); a larger one closes its connection."""
    device: str = "cpu"
    """Torch device of a local policy."""
    metadata: JsonDict = field(default_factory=dict)
    """Policy metadata fields to set (a LeRobot policy's action_low / action_high, control_hz)."""


def cmd_serve_policy(argv: list[str]) -> int:
    from robot_rl.policies.serve import serve  # deferred: loads websockets; robot-rl --help stays fast

    args = parse_command(ServePolicyArgs, argv, "robot-rl serve-policy")
    try:
        serve(args.policy, args.host, args.port, args.token_env, args.max_message_mb, args.device, args.metadata)
    except (ValueError, OSError) as exc:
        return fail("serve-policy", exc)
    return 0


def cmd_record_demos(argv: list[str]) -> int:
    from robot_rl.datasets.cli import record_main  # deferred: loads torch; robot-rl --help stays fast

    return record_main(argv)


def cmd_demos(argv: list[str]) -> int:
    from robot_rl.datasets.cli import demos_main  # deferred: loads torch; robot-rl --help stays fast

    return demos_main(argv)


def cmd_datasets(argv: list[str]) -> int:
    from robot_rl.datasets.cli import datasets_main  # deferred: loads torch; robot-rl --help stays fast

    return datasets_main(argv)


def cmd_record_frames(argv: list[str]) -> int:
    from robot_rl.rewards.cli import record_frames_main  # deferred: loads torch; robot-rl --help stays fast

    return record_frames_main(argv)


def cmd_train_reward(argv: list[str]) -> int:
    from robot_rl.rewards.cli import train_reward_main  # deferred: loads torch; robot-rl --help stays fast

    return train_reward_main(argv)


def _config_job(name: str, cls: type, job: Any, description: str, argv: list[str]) -> int:
    """``robot-rl <name> [CONFIG] [--field value ...]``: parse and check a config, run ``job(cfg)``, print its JSON
    summary; a refused config or a job's ValueError is one message and exit code 2."""
    config_path = None
    if argv and not argv[0].startswith("-"):
        config_path, argv = argv[0], argv[1:]
    try:
        cfg = parse(cls, config_path, argv, prog=f"robot-rl {name}",
                    description=f"{description} CONFIG: a YAML file (optional). Precedence: defaults < CONFIG < flags.")
        cfg.validate()
    except (ConfigError, ValueError) as exc:
        return fail(name, exc)
    try:
        summary = job(cfg)
    except (ValueError, FileExistsError, RuntimeError) as exc:
        return fail(name, exc)
    print(json.dumps(summary, indent=2))
    return 0


def cmd_train_bc(argv: list[str]) -> int:
    from robot_rl.vla.train import TrainBCConfig, train_bc  # deferred: loads torch; robot-rl --help stays fast

    return _config_job("train-bc", TrainBCConfig, train_bc, "Train the small VLA by behaviour cloning on demo "
                       "datasets, then evaluate it per task.", argv)


def cmd_record_excitation(argv: list[str]) -> int:
    from robot_rl.calibration.excite import ExcitationConfig, record_excitation  # deferred: loads rclpy

    return _config_job("record-excitation", ExcitationConfig, record_excitation, "Move the arm around where it is "
                       "(sums of sines with holds, the gripper closed and opened) through the profile's joint "
                       "position controller and record its commands and joint states into a bag for robot-rl "
                       "calibrate.", argv)


def cmd_record_response(argv: list[str]) -> int:
    from robot_rl.calibration.response import ResponseConfig, record_response  # deferred: loads rclpy

    return _config_job("record-response", ResponseConfig, record_response, "Run a probe of the policy's actions "
                       "(a push along x, a hold, a push down, a hold) through the robot env from a reset, a few "
                       "times, and write the end effector's mean path for robot-rl calibrate --response.", argv)


def cmd_calibrate(argv: list[str]) -> int:
    from robot_rl.calibration.job import CalibrateConfig, calibrate  # deferred: loads MuJoCo

    return _config_job("calibrate", CalibrateConfig, calibrate, "Fit the sim to a robot log: replay its commands in "
                       "the sim through the driver's joint position path and fit latency, bandwidth and joint "
                       "friction (CMA-ES), read state latency, joint noise and gripper speed off the log; with "
                       "--response, fit the sim's stiffness and delay to the robot's probe response; write a "
                       "reality profile, randomized env kwargs for training and a report.", argv)


def cmd_record_car_excitation(argv: list[str]) -> int:
    from robot_rl.calibration.car_excite import CarExcitationConfig, record_car_excitation  # deferred: loads rclpy

    return _config_job("record-car-excitation", CarExcitationConfig, record_car_excitation, "Drive the car around "
                       "its track (pure pursuit on its map pose, the speed switched and the yaw rate kicked) through "
                       "the robot env and the safety node, and record its driver's commands and odometry into a bag "
                       "for robot-rl calibrate-car.", argv)


def cmd_calibrate_car(argv: list[str]) -> int:
    from robot_rl.calibration.car_job import CalibrateCarConfig, calibrate_car  # deferred: loads MuJoCo

    return _config_job("calibrate-car", CalibrateCarConfig, calibrate_car, "Fit the Drive sim to a car's log: "
                       "read the odometry's latency and gain off it, replay its commands in the sim car and fit the "
                       "command latency, drivetrain and steering lags and trim (CMA-ES); write a car reality "
                       "profile, randomized env kwargs for training and a report.", argv)


def cmd_distill(argv: list[str]) -> int:
    from robot_rl.vla.distill import DistillConfig, distill  # deferred: loads torch; robot-rl --help stays fast

    return _config_job("distill", DistillConfig, distill, "Collect a fine-tuning run's successful episodes and "
                       "re-train the generalist (small VLA) on them mixed with its original data; evaluate it per "
                       "task before and after.", argv)


@dataclass(frozen=True)
class ExportArgs:
    """Export a run's latest policy for deployment without the training stack (ONNX for onnxruntime, or
    TorchScript), checked against the torch policy on the run's recorded observations."""

    run_dir: Annotated[str, tyro.conf.Positional]
    """The run folder."""
    format: str = "onnx"
    """onnx or torchscript."""
    out: str = ""
    """Output folder (default: <run>/export-<format>)."""
    observations: int = 256
    """Recorded observations the export is checked on (largest difference allowed: 1e-5)."""


def cmd_export(argv: list[str]) -> int:
    from robot_rl.deploy.export import export_run  # deferred: loads torch; robot-rl --help stays fast

    args = parse_command(ExportArgs, argv, "robot-rl export")
    out = args.out or str(Path(args.run_dir) / f"export-{args.format}")
    try:
        meta = export_run(args.run_dir, args.format, out, args.observations)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        return fail("export", exc)
    print(json.dumps({"out": out, **meta}, indent=1))
    return 0


def cmd_launch(argv: list[str]) -> int:
    from robot_rl.ros.launch import main as launch_main  # deferred: +10 ms (subprocess) to robot-rl --help

    return launch_main(argv)


def cmd_robot(argv: list[str]) -> int:
    from robot_rl.ros.robot_cli import main as robot_main  # deferred: robot-rl --help stays fast

    return robot_main(argv)


def cmd_ros_index(argv: list[str]) -> int:
    from robot_rl.ros.ament import main as ament_main  # deferred: +10 ms (subprocess) to robot-rl --help

    return ament_main(argv)


COMMANDS = {"train": cmd_train, "learner": cmd_learner, "actor": cmd_actor, "eval": cmd_eval,
            "record-demos": cmd_record_demos, "demos": cmd_demos, "datasets": cmd_datasets, "launch": cmd_launch,
            "ros-index": cmd_ros_index, "robot": cmd_robot, "record-frames": cmd_record_frames,
            "train-reward": cmd_train_reward, "train-bc": cmd_train_bc, "serve-policy": cmd_serve_policy,
            "distill": cmd_distill, "export": cmd_export, "record-excitation": cmd_record_excitation,
            "record-response": cmd_record_response, "calibrate": cmd_calibrate,
            "record-car-excitation": cmd_record_car_excitation, "calibrate-car": cmd_calibrate_car}


def main(argv: list[str] | None = None) -> int:
    entry = argv is None  # the process's own command (not a call from Python, which keeps its signal handlers)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        # headless: MuJoCo renders offscreen with EGL (any env's, not only robot_rl's sims), unless told otherwise
        os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        argv, level = pop_log_level(argv)
        setup_logging(level)
    except ValueError as exc:
        print(f"robot-rl: error: {exc}", file=sys.stderr)
        return CONFIG_ERROR
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__)
        return 0 if not argv or argv[0] in ("-h", "--help") else CONFIG_ERROR
    _errors_not_signals()
    try:
        return COMMANDS[argv[0]](argv[1:])
    except Exception as exc:
        if disk_full_error(exc) is None:
            raise
        return fail(argv[0], exc)  # one message, exit code DISK_FULL
    finally:  # the command is done: a signal now could only cut the exit (atexit, finalizers) with a traceback
        if entry and threading.current_thread() is threading.main_thread():
            ignore_stop_signals()


def ros_actor_main(argv: list[str] | None = None) -> int:
    """ROS 2 executable ``actor`` (console script ``robot-rl-actor``): ``robot-rl actor`` started from a launch file.

    A launcher appends ``--ros-args ...`` (node name, remaps); the actor is not a node itself (its env makes one), so
    that tail is dropped and the rest goes to ``robot-rl actor`` (e.g. ``--run-dir RUN --index 0``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--ros-args" in args:
        args = args[: args.index("--ros-args")]
    return main(["actor", *args])


if __name__ == "__main__":
    raise SystemExit(main())
