"""Synchronised snapshots across topics delivered independently (no ROS graph needed: the buffers alone)."""

import threading
import time

import pytest

from robot_rl.ros.link import Stream, snapshot


def _streams() -> dict[str, Stream]:
    streams = {k: Stream(lambda m: m) for k in ("pose", "object")}
    for k, s in streams.items():  # the previous instant, complete
        _deliver(s, 1.00, f"{k}@1.00")
    _deliver(streams["pose"], 1.01, "pose@1.01")  # the new instant's pose came in first
    return streams


@pytest.mark.timeout(30)
def test_snapshot_waits_for_the_reference_instant_of_every_topic() -> None:
    streams = _streams()
    late = threading.Timer(0.05, _deliver, (streams["object"], 1.01, "object@1.01"))  # same instant, later
    late.start()
    t0 = time.monotonic()
    snap, skew = snapshot(streams, ["pose", "object"], "pose", timeout=1.0)
    assert time.monotonic() - t0 >= 0.04
    assert snap["object"] == (1.01, "object@1.01") and skew == 0.0


@pytest.mark.timeout(30)
def test_snapshot_without_waiting_pairs_the_stale_item_and_reports_the_skew() -> None:
    snap, skew = snapshot(_streams(), ["pose", "object"], "pose")
    assert snap["object"] == (1.00, "object@1.00") and skew == pytest.approx(0.01)


@pytest.mark.timeout(30)
def test_snapshot_slack_and_timeout() -> None:
    snap, _ = snapshot(_streams(), ["pose", "object"], "pose", slack=0.02, timeout=1.0)  # an older item is enough
    assert snap["object"][0] == 1.00
    with pytest.raises(TimeoutError, match="no object stamped"):
        snapshot(_streams(), ["pose", "object"], "pose", timeout=0.05)


@pytest.mark.timeout(30)
def test_an_unsynced_stream_is_taken_as_it_is_without_waiting() -> None:
    """A tracker's TF frame at its own, lower rate beside joint states at the hardware rate: waiting for its next
    item would delay every observation by up to its period."""
    t0 = time.monotonic()
    snap, skew = snapshot(_streams(), ["pose", "object"], "pose", timeout=1.0, unsynced=("object",))
    assert time.monotonic() - t0 < 0.5
    assert snap["object"] == (1.00, "object@1.00") and skew == pytest.approx(0.01)


def _deliver(stream: Stream, stamp: float, value: str) -> None:
    with stream.cond:
        stream.items.append((stamp, value))
        stream.cond.notify_all()


@pytest.mark.timeout(30)
def test_wait_newer_than_the_used_stamp_never_returns_the_same_message_twice() -> None:
    """A step that overran asks for a message from half a period ago; the one the last observation used may be
    that recent, and must not count as fresh."""
    stream = Stream(lambda m: m)
    _deliver(stream, 2.00, "used")
    assert stream.wait_newer(1.99, timeout=0.0)  # at or after the tick: the used message alone would do
    assert not stream.wait_newer(1.99, timeout=0.05, than=2.00)
    threading.Timer(0.05, _deliver, (stream, 2.05, "next")).start()
    assert stream.wait_newer(1.99, timeout=1.0, than=2.00) and stream.latest() == (2.05, "next")
