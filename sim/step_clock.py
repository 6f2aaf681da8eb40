"""Real-time pacing of an emulated driver's physics loop, shared by the arm and car hardware nodes.

Step ``k`` is scheduled ``k * dt`` after the start. :meth:`StepClock.tick` sleeps until the next step is due and
returns that step's scheduled wall-clock time, also when the busy machine wakes the loop late: the step then takes
only the commands that had arrived by its time and is stamped with it, as a real robot's controller, which never
waits on its PC, would. A stall delays messages; it never warps the dynamics.
"""

from __future__ import annotations

import time


class StepClock:
    """The schedule of a physics loop with period ``dt`` seconds, started now."""

    def __init__(self, dt: float, resync_after: float = 0.1) -> None:
        if dt <= 0 or resync_after <= 0:
            raise ValueError(f"StepClock: dt ({dt}) and resync_after ({resync_after}) must be > 0")
        self.dt, self.resync_after = dt, resync_after
        self._t0 = time.perf_counter()
        self._wall0 = time.time() - self._t0  # perf_counter never jumps; stamps are wall clock
        self.steps = 0
        """Steps ticked so far."""
        self.due = self._t0
        """perf_counter time the current step was scheduled for."""

    def tick(self) -> float:
        """Waits for the next step and returns its scheduled wall-clock time (``time.time()`` scale)."""
        due = self._t0 + (self.steps + 1) * self.dt
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        elif delay < -self.resync_after:
            # far behind (a debugger, a suspended process): move the schedule instead of racing through the backlog
            self._t0 -= delay
            due -= delay
        self.steps += 1
        self.due = due
        return self._wall0 + due

    def behind(self) -> float:
        """Seconds the current step runs after its scheduled time."""
        return time.perf_counter() - self.due
