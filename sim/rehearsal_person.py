"""A scripted person for the bare-driver rehearsal: sees the scene as a person beside the robot does
(:mod:`robot_rl_sim.scene_channel`), holds a joystick (``sensor_msgs/Joy`` on ``joy``, laid out as joy_node
publishes a gamepad and as robot_rl's ``ros`` teleop device reads it) and has hands for the scene (putting the cube
back). Nothing of it is on the robot's graph but the joystick's topic, as with a real person's joy_node.

What it does is what the day on the robot asks of a person: demonstrate the task (move above the cube, down, close,
lift; or reach the target), label the attempt a success or failure, put the scene back while the robot goes home,
start the next attempt, and now and then take over from the policy during training.

The joystick: left stick (axes 1, 0) moves x and y, right stick (axis 4) z, button 0 held closes the gripper
(``teleop.gripper_mode: hold``), 1 ready, 7 success, 6 failure, 3 reset, 8 stop (robot_rl's gamepad buttons).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl_sim.scene_channel import ScenePerson

BUTTON = {"gripper": 0, "ready": 1, "pause": 2, "reset": 3, "takeover": 5, "failure": 6, "success": 7, "stop": 8}
"""Function -> joystick button index: the gamepad layout of robot_rl's docs, as a person reads it there (the sim
layer does not import the teleop package; tests/ros/test_robot_day.py keeps the two equal)."""
STICK = (1, 0, 4)
"""Joystick axes of the action's x, y, z (robot_rl's gamepad layout for a 4-D arm action)."""
PUT_BACK_S = 5.0
"""A person's seconds to put the cube (or target) back: counted in ``busy_s`` (the rehearsal's hand is instant)."""
CUBE_HALF = 0.02
HOVER = 0.08
LIFT = 0.09


class RehearsalPerson:
    """A person at the rehearsal (see the module docstring). ``max_step``: the profile's ``limits.max_step`` (m per
    full-stick control period): the stick is pushed in proportion to what is left to go."""

    def __init__(self, scene_dir: str | Path, home: tuple[float, float, float], max_step: float = 0.02,
                 topic: str = "joy", rate_hz: float = 50.0) -> None:
        from sensor_msgs.msg import Joy  # optional: ros2

        from robot_rl.ros.link import RosLink  # optional: ros2 (imports rclpy)

        self.scene = ScenePerson(scene_dir)
        self.home, self.max_step = np.asarray(home, np.float64), max_step
        self.link = RosLink("rehearsal_person")
        self._joy, self._pub = Joy, self.link.publisher("joy", Joy, topic)
        self._lock = threading.Lock()
        self._axes = np.zeros(8)
        self._held: set[int] = set()
        self._pressed: dict[int, float] = {}  # button -> until when (monotonic)
        self.presses: list[tuple[float, str]] = []  # (when, function), for the test's record
        self.busy_s = 0.0  # seconds the person's hands were busy: steering, pressing, putting things back
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._publish, args=(1.0 / rate_hz,), name="joy", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the joystick
    def _publish(self, period: float) -> None:
        while not self._stop.wait(period):  # joy_node's autorepeat: the device counts as connected
            now = time.monotonic()
            with self._lock:
                buttons = [0] * 12
                for b in self._held | {b for b, until in self._pressed.items() if until > now}:
                    buttons[b] = 1
                msg = self._joy(axes=[float(a) for a in self._axes], buttons=buttons)
            msg.header.stamp = self.link.node.get_clock().now().to_msg()
            self._pub.publish(msg)

    def stick(self, xyz: np.ndarray | None = None, close: bool | None = None) -> None:
        """Pushes the stick (x, y, z in [-1, 1]; None: let go) and holds or lets go of the gripper button."""
        with self._lock:
            self._axes[:] = 0.0
            if xyz is not None:
                self._axes[list(STICK)] = np.clip(xyz, -1.0, 1.0)
            if close is not None:
                self._held = self._held | {BUTTON["gripper"]} if close else self._held - {BUTTON["gripper"]}

    def press(self, function: str, seconds: float = 0.15) -> None:
        """Presses the button of ``function`` (ready, success, failure, reset, stop) for ``seconds``."""
        with self._lock:
            self._pressed[BUTTON[function]] = time.monotonic() + seconds
        self.presses.append((time.monotonic(), function))
        time.sleep(seconds + 0.05)
        self.busy_s += seconds + 0.05

    # ------------------------------------------------------------------ the eyes and hands
    def seen(self) -> dict:
        return self.scene.seen()

    def wait_home(self, timeout: float = 60.0, tolerance: float = 0.01) -> None:
        """Until the tool rests at home (the env's reset brought it back)."""
        if not self.wait_home_or_end(None, timeout, tolerance):
            raise TimeoutError(f"the arm did not come home within {timeout} s")

    def wait_home_or_end(self, proc: Any, timeout: float = 60.0, tolerance: float = 0.01, still: bool = True) -> bool:
        """Until the tool is at home (True; with ``still``, at rest there: a recorder that waits for the person),
        or the program ``proc`` (a Popen) the person works with ended or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline and (proc is None or proc.poll() is None):
            tool = np.asarray(self.seen()["tool"])
            home = np.linalg.norm(tool - self.home) < tolerance
            if home and (not still or last is not None and np.linalg.norm(tool - last) < 5e-4):
                return True
            last = tool
            time.sleep(0.05 if not still else 0.2)
        return False

    def put_back(self) -> None:
        """Puts the task's objects back (a new placement), as a person does between attempts."""
        self.scene.ask("reset")
        time.sleep(0.1)
        self.busy_s += PUT_BACK_S

    def demo_action(self, seen: dict) -> tuple[np.ndarray, bool]:
        """Where a person steers the tool next (stick x, y, z) and whether they hold the gripper closed: a reach to
        the target, or above the cube, down, close, lift."""
        tool, goal = np.asarray(seen["tool"]), np.asarray(seen["object"])
        gain = 0.35 / self.max_step  # a person closes a third of the gap per period: no overshoot under lag
        if "grasped" not in seen:  # a reach
            return gain * (goal - tool), False
        if seen["grasped"] and seen["gripper"] > 2 * CUBE_HALF - 0.01:
            return gain * (np.array([*goal[:2], CUBE_HALF + LIFT]) - tool), True
        xy = goal[:2] - tool[:2]
        if np.linalg.norm(xy) > 0.01:
            z = HOVER if np.linalg.norm(xy) > 0.03 or tool[2] > HOVER else tool[2]
            return gain * np.array([*xy, z - tool[2]]), False
        if tool[2] - goal[2] > 0.008 and seen["gripper"] > 2 * CUBE_HALF + 0.005:
            return gain * np.array([*xy, goal[2] - tool[2]]), False
        return gain * np.array([*xy, 0.0]), True

    def demonstrate(self, proc: Any = None, give_up_s: float = 25.0) -> bool:
        """One attempt: the person steers until the scene shows success (then labels it) or gives up (a failure
        label). Presses ready first (again when the robot does not follow: the recorder was not waiting yet), and
        stops when the recorder ``proc`` (a Popen) has ended: a person does not steer for a program that quit."""
        start = time.monotonic()
        self.press("ready")
        moved_from = np.asarray(self.seen()["tool"])
        followed = False
        while time.monotonic() - start < give_up_s and (proc is None or proc.poll() is None):
            seen = self.seen()
            if seen["success"]:
                break
            move, close = self.demo_action(seen)
            self.stick(move, close)
            if not followed:
                followed = np.linalg.norm(np.asarray(seen["tool"]) - moved_from) > 0.005
                if not followed and time.monotonic() - start > 2.0:
                    self.press("ready")
                    start = time.monotonic()
            time.sleep(0.02)
        self.busy_s += time.monotonic() - start
        success = bool(self.seen()["success"])
        self.stick(None, close=success)  # still holding the cube while labelling
        self.press("success" if success else "failure")
        self.stick(None, close=False)
        return success

    def show_success_frames(self, proc: Any, hold_s: float = 1.0, give_up_s: float = 25.0) -> bool:
        """For the reward classifier's frames (``robot-rl record-frames --mode keys``): steer to success, press
        success while it shows, hold it there ``hold_s``, then press reset (a new episode). Returns whether the
        scene showed success."""
        start = time.monotonic()
        while time.monotonic() - start < give_up_s and proc.poll() is None and not self.seen()["success"]:
            self.stick(*self.demo_action(self.seen()))
            time.sleep(0.02)
        self.busy_s += time.monotonic() - start
        success = bool(self.seen()["success"])
        self.stick(None, close=success)
        if success:
            self.press("success")
            time.sleep(hold_s)
        self.press("reset")
        self.stick(None, close=False)
        return success

    def watch_episode(self, proc: Any, take_over: bool, episode_s: float = 6.0) -> bool:
        """Watches one episode of the policy (training or evaluation) until the env's reset brings the arm home
        again; with ``take_over``, steers the task's demonstration for the first 3.5 s it watches (an intervention
        from the episode's first steps), then lets go. Returns whether the scene showed success."""
        start, left, success = time.monotonic(), False, False
        while proc.poll() is None and time.monotonic() - start < episode_s + 8.0:
            seen = self.seen()
            success |= bool(seen["success"])
            away = float(np.linalg.norm(np.asarray(seen["tool"]) - self.home))
            left |= away > 0.02
            if left and away < 0.01:
                break
            # from the moment it watches: whatever wait comes before the episode (nothing is recorded while the run
            # waits), the stick is held as it starts; a reach's episode can be over within 0.5 s
            if take_over and time.monotonic() - start < 3.5:
                self.stick(*self.demo_action(seen))
                self.busy_s += 0.05
            else:
                self.stick(None, close=False)
            time.sleep(0.05)
        self.stick(None, close=False)
        return success

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self.link.close()
