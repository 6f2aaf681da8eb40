"""Intervention wrapper on a real MuJoCo PickCube: action muxing, events, pause/disconnect holding, episode stats,
and the scripted human's takeover rule."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator

import numpy as np
import pytest

from robot_rl.envs.make import EnvConfig, make_env
from robot_rl.teleop.base import TeleopReading
from robot_rl.teleop.intervention import InterventionWrapper
from robot_rl.teleop.scripted import ScriptedHuman, ScriptedHumanConfig

pytestmark = pytest.mark.timeout(120)


class QueuedDevice:
    """A device whose readings the test queues (stands in for the person, not for the wrapper under test)."""

    action_dim = 4

    def __init__(self) -> None:
        self.queue: deque[TeleopReading] = deque()
        self.closed = False

    def read(self) -> TeleopReading:
        return self.queue.popleft() if self.queue else TeleopReading(np.zeros(4, np.float32))

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def teleop_log() -> Iterator[list[logging.LogRecord]]:
    """The wrapper's log records, caught on its own logger: robot_rl's handler may stop propagation to the root."""
    logger, records = logging.getLogger("robot_rl.teleop.intervention"), []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(level)


def pickcube(device, **kw) -> InterventionWrapper:
    return InterventionWrapper(make_env(EnvConfig(id="robot_rl/PickCube-v0")), device, **kw)


def test_human_action_replaces_the_policy_action_while_active() -> None:
    dev = QueuedDevice()
    env = pickcube(dev)
    env.reset(seed=0)
    policy = np.array([0.5, 0.0, 0.0, -1.0], np.float32)
    human = np.array([0.0, 0.0, 1.0, 1.0], np.float32)
    dev.queue.extend([TeleopReading(human, active=True), TeleopReading(human, active=True),
                      TeleopReading(human, active=False), TeleopReading(human, active=True)])
    infos = [env.step(policy)[4] for _ in range(5)]
    assert [i["intervened"] for i in infos] == [True, True, False, True, False]
    for i in infos:
        np.testing.assert_array_equal(i["executed_action"], human if i["intervened"] else policy)
    assert (env.interventions, env.intervention_steps, env.steps) == (2, 3, 5)
    with pytest.raises(ValueError, match="teleop device gave action"):
        dev.queue.append(TeleopReading(np.array([np.nan, 0, 0, 0], np.float32), active=True))
        env.step(policy)
    env.close()
    assert dev.closed


def test_events_end_episodes_and_report_stats() -> None:
    dev = QueuedDevice()
    env = pickcube(dev, success_reward=1.0)
    env.reset(seed=1)
    zero = np.zeros(4, np.float32)
    dev.queue.extend([TeleopReading(zero, active=True), TeleopReading(zero, events=frozenset({"success"}))])
    env.step(zero)
    _, reward, terminated, truncated, info = env.step(zero)
    assert (reward, terminated, truncated, info["is_success"]) == (1.0, True, False, True)
    assert info["episode_interventions"] == 1 and info["episode_intervention_steps"] == 1
    assert info["episode_intervention_rate"] == pytest.approx(0.5)
    env.reset(seed=2)
    assert env.steps == 0
    dev.queue.append(TeleopReading(zero, events=frozenset({"failure"})))
    _, reward, terminated, _, info = env.step(zero)
    assert terminated and reward == 0.0 and not info["is_success"]
    env.reset(seed=3)
    dev.queue.append(TeleopReading(zero, events=frozenset({"reset"})))
    _, _, terminated, truncated, info = env.step(zero)
    assert truncated and not terminated and info["episode_intervention_rate"] == 0.0


def test_pause_and_disconnect_hold_the_robot(teleop_log: list[logging.LogRecord]) -> None:
    dev = QueuedDevice()
    env = pickcube(dev)
    env.reset(seed=4)
    arm = env.unwrapped
    push = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    zero = np.zeros(4, np.float32)
    dev.queue.append(TeleopReading(zero, events=frozenset({"pause"})))
    target = arm.target_pos.copy()
    info = env.step(push)[4]
    assert info["paused"] and not info["intervened"]
    np.testing.assert_allclose(arm.target_pos, target)  # the policy's push did not run
    np.testing.assert_array_equal(info["executed_action"], arm.hold_action())
    dev.queue.append(TeleopReading(zero, events=frozenset({"pause"})))  # resume
    info = env.step(push)[4]
    assert not info["paused"] and np.linalg.norm(arm.target_pos - target) > 1e-3
    target = arm.target_pos.copy()
    dev.queue.extend([TeleopReading(push, active=True, connected=False)] * 3)
    for _ in range(3):  # the cable is out: even an "active" reading must not move the robot
        info = env.step(push)[4]
        assert info["paused"] and not info["teleop_connected"] and not info["intervened"]
    np.testing.assert_allclose(arm.target_pos, target)
    info = env.step(push)[4]
    assert info["teleop_connected"] and not info["paused"]
    said = [(r.levelno, r.getMessage()) for r in teleop_log]
    assert [m for lvl, m in said if lvl == logging.WARNING and "disconnected" in m] == [
        "QueuedDevice disconnected: holding the robot still until it is back"]  # once, not every step
    assert (logging.INFO, "QueuedDevice is back") in said


def test_scripted_human_leaves_the_expert_alone_and_corrects_a_random_policy() -> None:
    cfg = ScriptedHumanConfig(takeover_steps=5, max_takeovers=3, seed=0)
    human = ScriptedHuman(cfg)
    env = pickcube(human)
    obs, _ = env.reset(seed=5)
    for _ in range(40):  # the expert as the policy: nothing to correct
        info = env.step(env.unwrapped.expert_action(0.0))[4]
        assert not info["intervened"]
    rng = np.random.default_rng(0)
    env.reset(seed=6)
    flags = []
    for _ in range(60):
        info = env.step(rng.uniform(-1, 1, 4).astype(np.float32))[4]
        flags.append(info["intervened"])
    segments = sum(1 for a, b in zip([False, *flags], flags) if b and not a)
    assert human.takeovers == 3 and sum(flags) == 3 * cfg.takeover_steps  # patience: max_takeovers
    assert segments == env.interventions >= 1  # back-to-back takeovers are one intervention
    with pytest.raises(ValueError, match="expert_action"):
        InterventionWrapper(make_env(EnvConfig(id="Pendulum-v1")), ScriptedHuman())


def test_an_episode_waits_for_the_ready_press_and_the_operator_sets_its_end() -> None:
    """teleop.start ready: the sim stands still (its step limit does not run) until ready; a countdown starts it by
    itself; the operator's time limit counts running time only; labels travel in the OperatorState; a label while
    paused ends the episode there, the robot held."""
    dev, now = QueuedDevice(), [0.0]
    env = InterventionWrapper(make_env(EnvConfig(id="robot_rl/PickCube-v0", max_episode_steps=5)), dev,
                              start="ready", episode_seconds=1.0, clock=lambda: now[0])
    zero = np.zeros(4, np.float32)
    env.reset(seed=7)
    for _ in range(20):  # far past the env's 5-step limit: nothing ran
        _, _, terminated, truncated, info = env.step(zero)
        assert info["paused"] and info["operator"].control == "waiting" and not (terminated or truncated)
    assert env.unwrapped.steps == 0
    dev.queue.append(TeleopReading(zero, events=frozenset({"ready"})))
    env.step(zero)
    controls = []
    for _ in range(3):
        now[0] += 0.4
        _, _, _, truncated, info = env.step(zero)
        controls.append((info["operator"].control, info["operator"].seconds_left, truncated))
    assert controls == [("policy", 1.0, False), ("policy", pytest.approx(0.6), False), ("policy", pytest.approx(0.2),
                                                                                        False)]
    dev.queue.append(TeleopReading(zero, events=frozenset({"pause"})))
    now[0] += 5.0  # paused time does not count
    assert env.step(zero)[4]["operator"].control == "held"
    dev.queue.append(TeleopReading(zero, events=frozenset({"failure"})))  # a label while paused
    _, _, terminated, truncated, info = env.step(zero)
    assert terminated and info["operator"].label == "failure" and not info["paused"] and not env.paused
    np.testing.assert_array_equal(info["executed_action"], env.unwrapped.hold_action())
    env.reset(seed=8)
    env.step(zero)
    dev.queue.append(TeleopReading(zero, events=frozenset({"success"})))  # success counts as ready too
    env.step(zero)
    for _ in range(3):  # the first step starts the clock
        now[0] += 0.6
        _, _, _, truncated, info = env.step(zero)
    assert truncated and info["operator"].label == "" and info["operator"].seconds_left == 0.0  # time is up
    countdown = InterventionWrapper(make_env(EnvConfig(id="robot_rl/PickCube-v0")), QueuedDevice(), start="countdown",
                                    countdown_s=2.0, clock=lambda: now[0])
    countdown.reset(seed=9)
    assert countdown.step(zero)[4]["operator"].control == "waiting"
    now[0] += 2.0
    countdown.step(zero)
    assert countdown.step(zero)[4]["operator"].control == "policy"


def test_the_scripted_human_presses_ready_and_labels() -> None:
    cfg = ScriptedHumanConfig(ready_after=3, label=True, give_up_steps=4, threshold=100.0)  # never takes over
    env = InterventionWrapper(make_env(EnvConfig(id="robot_rl/PickCube-v0")), ScriptedHuman(cfg), start="ready")
    env.reset(seed=0)
    waiting = 0
    while env.step(np.zeros(4, np.float32))[4]["operator"].control == "waiting":
        waiting += 1
    assert waiting == 4  # three periods, then the press (that period still waits)
    labels = []
    for _ in range(6):
        _, _, terminated, _, info = env.step(np.zeros(4, np.float32))
        labels.append(info["operator"].label)
        if terminated:
            break
    assert labels == ["", "", "", "failure"]  # with the loop's first step: gave up after 4, its press on the 5th


def test_who_waits_for_the_ready_press() -> None:
    from robot_rl.teleop.config import TeleopConfig

    modes = {(d, m): TeleopConfig(device=d, ros_msg=m).start_mode() for d, m in
             (("keyboard", "joy"), ("gamepad", "joy"), ("spacemouse", "joy"), ("ros", "joy"), ("ros", "twist"),
              ("scripted", "joy"))}
    assert modes == {("keyboard", "joy"): "ready", ("gamepad", "joy"): "ready", ("spacemouse", "joy"): "ready",
                     ("ros", "joy"): "ready", ("ros", "twist"): "now", ("scripted", "joy"): "now"}  # twist: no buttons
    assert TeleopConfig(device="scripted", start="ready").start_mode() == "ready"
    with pytest.raises(ValueError, match="teleop.start"):
        TeleopConfig(start="later").validate()  # type: ignore[arg-type]


def test_stop_holds_the_robot_for_good_and_is_reported(teleop_log: list[logging.LogRecord]) -> None:
    dev = QueuedDevice()
    env = pickcube(dev)
    env.reset(seed=6)
    arm = env.unwrapped
    push = np.ones(4, np.float32)
    info = env.step(push)[4]
    assert not info["paused"] and not info["operator"].stop
    target = arm.target_pos.copy()
    dev.queue.append(TeleopReading(push, active=True, events=frozenset({"stop"})))
    dev.queue.extend([TeleopReading(push, active=True)] * 3)  # after stop, not even the person moves the robot
    for _ in range(5):
        _, reward, terminated, truncated, info = env.step(push)
        assert info["paused"] and info["operator"].stop and not info["intervened"]
        assert (reward, terminated, truncated) == (0.0, False, False)
    np.testing.assert_allclose(arm.target_pos, target)
    env.reset(seed=7)  # a new episode does not undo it
    assert env.step(push)[4]["operator"].stop
    assert [r.getMessage() for r in teleop_log if "stop" in r.getMessage()] == [
        "stop pressed: the robot holds; the run ends with a final checkpoint"]


def test_the_scripted_human_presses_stop_after_its_episodes() -> None:
    env = InterventionWrapper(make_env(EnvConfig(id="robot_rl/PickCube-v0", max_episode_steps=5)),
                              ScriptedHuman(ScriptedHumanConfig(stop_after_episodes=2)))
    stops = []
    for episode in range(3):
        env.reset(seed=episode)
        stops.append(any(env.step(np.zeros(4, np.float32))[4]["operator"].stop for _ in range(5)))
    assert stops == [False, False, True]
