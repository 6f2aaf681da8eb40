"""When a reset's gripper has finished opening: at the commanded opening, or stopped short of it.

A sim episode starts with the gripper open; a real gripper is slow (Franka Hand 0.1 m/s by default, Robotiq 2F-85
20-150 mm/s), so a reset that only waits for the arm starts the next episode with the fingers still opening from the
last grasp. Read by :class:`robot_rl.envs.ros_env.RosArmEnv` with the gripper's reported opening each period.
"""

from __future__ import annotations


class GripperSettle:
    """``settled(t, opening)``: the opening (m) is within ``tolerance`` of ``target``, or has moved less than
    ``tolerance`` for ``stall`` s (a blocked finger, a gripper whose stroke ends short of the target). A robot that
    reports no gripper (``opening`` None) is always settled."""

    def __init__(self, target: float, tolerance: float, stall: float) -> None:
        if tolerance <= 0 or stall <= 0:
            raise ValueError(f"gripper settle: tolerance ({tolerance}) and stall ({stall} s) must be > 0")
        self.target, self.tolerance, self.stall = float(target), float(tolerance), float(stall)
        self.last: float | None = None
        self._still_since: tuple[float, float] | None = None  # (time, opening) the current still spell began at

    def settled(self, t: float, opening: float | None) -> bool:
        if opening is None:
            return True
        self.last = round(float(opening), 4)
        if abs(opening - self.target) < self.tolerance:
            return True
        if self._still_since is None or abs(opening - self._still_since[1]) >= self.tolerance:
            self._still_since = (t, float(opening))
            return False
        return t - self._still_since[0] >= self.stall
