"""The actor's control-loop scheduling."""

import os
import threading
import warnings

from robot_rl.utils.process import set_realtime


def test_realtime_scheduling_applies_to_the_calling_thread_only() -> None:
    """``runtime.actor_rt_priority``: SCHED_FIFO for the control loop's thread where allowed (root here), a
    warning and normal scheduling where refused; the process's other threads are never switched."""
    seen: dict[str, object] = {}

    def loop_thread() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seen["ok"] = set_realtime(10)
        seen["policy"] = os.sched_getscheduler(0)
        seen["warned"] = [str(w.message) for w in caught]

    t = threading.Thread(target=loop_thread)
    t.start()
    t.join()
    if seen["ok"]:
        assert seen["policy"] == os.SCHED_FIFO and not seen["warned"]
    else:
        assert seen["policy"] == os.SCHED_OTHER and "refused" in seen["warned"][0]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # this (main) thread untouched
