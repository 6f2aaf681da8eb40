"""Chunked execution: sync / async / future-state-aware async against a known dynamics, timing of the control
loop with a slow policy, late chunks, temporal ensembling."""

from __future__ import annotations

import time

import numpy as np
import pytest

from robot_rl.policies.base import PolicyError
from robot_rl.policies.config import ExecutionConfig
from robot_rl.policies.executor import ChunkExecutor

from .toy import GAIN, GoalPolicy, roll


def run(executor: ChunkExecutor, steps: int, period_s: float = 0.0, x0=(0.0, 0.0)):
    """Steps the toy dynamics with the executor; returns states visited (before each step) and the steps."""
    x = np.asarray(x0, np.float32)
    states, out = [], []
    executor.reset()
    for _ in range(steps):
        states.append(x.copy())
        s = executor.step({"state": x})
        out.append(s)
        x = x + GAIN * s.action
        if period_s:
            time.sleep(period_s)
    return np.asarray(states), out


def test_sync_executes_whole_chunks_and_infers_at_their_ends():
    policy = GoalPolicy(horizon=8)
    ex = ChunkExecutor(policy, ExecutionConfig(mode="sync", execute_steps=5))
    states, steps = run(ex, 20)
    assert [s.chunk_index for s in steps] == [0, 1, 2, 3, 4] * 4
    assert ex.inferences == 4 and ex.missed_steps == 0
    # Each chunk was planned from the state at its first step.
    assert np.allclose(np.stack(policy.seen), states[[0, 5, 10, 15]])


@pytest.mark.parametrize("mode", ["async", "future"])
def test_async_conditions_on_the_launch_or_the_predicted_start_state(mode):
    """Latency 0.12 s at a 0.05 s period: the next inference starts lead_steps=4 before the chunk ends. Naive async
    conditions on the state at launch; future-aware on the state the robot reaches when the chunk starts (the
    known dynamics rolled through the remaining actions), which is exactly the state at the chunk's start."""
    policy = GoalPolicy(horizon=8, latency_s=0.12)
    ex = ChunkExecutor(policy, ExecutionConfig(mode=mode, execute_steps=8, lead_steps=4), period_s=0.05,
                       predict_state=roll)
    states, steps = run(ex, 32, period_s=0.05)
    ex.close()
    assert ex.missed_steps == 0 and ex.late_chunks == 0, ex.stats()
    assert [s.chunk_index for s in steps] == list(range(8)) * 4  # every chunk starts where the last one ended
    seen = np.stack(policy.seen)
    assert len(seen) == 5  # the last one launched at step 28 for a chunk starting at 32
    launch_states, start_states = states[[4, 12, 20, 28]], states[[8, 16, 24]]
    if mode == "future":
        assert np.allclose(seen[1:4], start_states, atol=1e-6), (seen[1:4], start_states)
    else:
        assert np.allclose(seen[1:], launch_states, atol=1e-6), (seen[1:], launch_states)
    assert not np.allclose(launch_states[:3], start_states)  # the two modes really differ here


def test_future_mode_needs_a_predictor():
    with pytest.raises(ValueError, match="state predictor"):
        ChunkExecutor(GoalPolicy(), ExecutionConfig(mode="future"))


def test_control_loop_stays_on_time_while_a_slow_policy_infers_asynchronously():
    """A 300 ms inference at 20 Hz with 16-step chunks: after the first (synchronous) chunk, no step call takes
    more than a few ms, and the periods stay at 50 ms."""
    policy = GoalPolicy(horizon=16, latency_s=0.3)
    ex = ChunkExecutor(policy, ExecutionConfig(mode="async"), period_s=0.05)
    ex.reset()
    x = np.zeros(2, np.float32)
    ex.step({"state": x})  # the episode's first chunk waits for the policy
    calls, periods, next_tick, last = [], [], time.perf_counter(), None
    for _ in range(60):  # 3 s, ~4 inferences
        next_tick += 0.05
        while time.perf_counter() < next_tick:
            time.sleep(0.0005)
        now = time.perf_counter()
        if last is not None:
            periods.append(now - last)
        last = now
        t0 = time.perf_counter()
        s = ex.step({"state": x})
        calls.append(time.perf_counter() - t0)
        x = x + GAIN * s.action
    ex.close()
    assert ex.inferences >= 4 and ex.missed_steps == 0, ex.stats()
    # a step that waited for the 300 ms inference would take >= 250 ms; 25 ms leaves room for a loaded 2-core machine
    assert max(calls) < 0.025, f"a control step waited {max(calls) * 1e3:.1f} ms for the policy"
    assert np.percentile(np.abs(np.asarray(periods) - 0.05), 95) < 0.005


def test_a_late_chunk_holds_the_robot_then_starts_from_its_first_action():
    """lead 1 step for a 0.2 s inference at 0.05 s: every chunk is late by ~3 steps; the robot holds (zero
    action) meanwhile and each late chunk starts at index 0."""
    policy = GoalPolicy(horizon=6, latency_s=0.2)
    ex = ChunkExecutor(policy, ExecutionConfig(mode="async", lead_steps=1, on_miss="hold"), period_s=0.05)
    _, steps = run(ex, 30, period_s=0.05)
    ex.close()
    assert ex.late_chunks >= 2 and ex.missed_steps >= 4, ex.stats()
    held = [s for s in steps if s.missed]
    assert all(s.chunk_index == -1 and np.all(s.action == 0) for s in held)
    after = [steps[i + 1].chunk_index for i, s in enumerate(steps[:-1]) if s.missed and not steps[i + 1].missed]
    assert after and all(i == 0 for i in after)


def test_continue_on_miss_runs_the_old_chunk_and_skips_the_spent_steps():
    policy = GoalPolicy(horizon=10, latency_s=0.2)
    ex = ChunkExecutor(policy, ExecutionConfig(mode="async", execute_steps=5, lead_steps=1, on_miss="continue"),
                       period_s=0.05)
    _, steps = run(ex, 30, period_s=0.05)
    ex.close()
    assert ex.late_chunks >= 1
    assert not any(s.missed for s in steps[:9])  # the first chunk's tail (indices 5-9) covers the wait
    assert any(s.chunk_index >= 5 for s in steps)
    firsts = [steps[i + 1].chunk_index for i in range(len(steps) - 1)
              if steps[i + 1].chunk_index < steps[i].chunk_index]
    assert firsts and all(i > 0 for i in firsts)  # a late chunk starts past the steps already spent


def test_temporal_ensemble_averages_overlapping_chunks_with_act_weights():
    class Const:
        def __init__(self):
            from robot_rl.policies.base import PolicyMetadata
            self.metadata = PolicyMetadata(action_dim=1, chunk_length=3)
            self.k = 0

        def infer(self, obs, instruction="", noise=None):
            self.k += 1
            return np.full((3, 1), self.k / 10, np.float32)

        def reset(self):
            pass

        def close(self):
            pass

    ex = ChunkExecutor(Const(), ExecutionConfig(mode="sync", execute_steps=1, temporal_ensemble=0.5))
    ex.reset()
    acts = [float(ex.step({"state": np.zeros(1)}).action[0]) for _ in range(4)]
    w = np.exp(-0.5 * np.arange(3))
    assert acts[0] == pytest.approx(0.1)
    assert acts[1] == pytest.approx((w[0] * 0.1 + w[1] * 0.2) / w[:2].sum())
    assert acts[2] == pytest.approx((w[0] * 0.1 + w[1] * 0.2 + w[2] * 0.3) / w.sum())
    assert acts[3] == pytest.approx((w[0] * 0.2 + w[1] * 0.3 + w[2] * 0.4) / w.sum())


def test_noise_source_is_called_per_inference_and_reaches_the_policy():
    policy = GoalPolicy(horizon=4)
    calls = []

    def noise(obs, instruction):
        calls.append(instruction)
        return np.full((4, 2), len(calls), np.float32)

    ex = ChunkExecutor(policy, ExecutionConfig(mode="sync"), noise=noise)
    ex.reset()
    for _ in range(8):
        ex.step({"state": np.zeros(2, np.float32)}, "go")
    assert calls == ["go", "go"] and [float(n[0, 0]) for n in policy.noises] == [1.0, 2.0]


def test_a_failed_inference_holds_the_robot_and_the_next_one_is_launched_at_once():
    class Flaky(GoalPolicy):
        def infer(self, obs, instruction="", noise=None):
            if len(self.seen) == 1:  # the second inference fails (a server gone for a moment)
                self.seen.append(np.asarray(obs["state"]))
                raise PolicyError("server gone")
            return super().infer(obs, instruction, noise)

    policy = Flaky(horizon=4, latency_s=0.02)
    ex = ChunkExecutor(policy, ExecutionConfig(mode="async", lead_steps=1), period_s=0.05)
    _, steps = run(ex, 20, period_s=0.05)
    ex.close()
    assert ex.failures == 1 and ex.inferences >= 4, ex.stats()
    assert any(s.missed for s in steps) and not steps[-1].missed  # held, then running chunks again


def test_reset_while_a_request_waits_does_not_stall_later_launches():
    policy = GoalPolicy(horizon=4, latency_s=0.0)
    ex = ChunkExecutor(policy, ExecutionConfig(mode="async", lead_steps=4), period_s=0.05)
    for _ in range(3):
        run(ex, 6)  # resets at every call, possibly with a request queued
    _, steps = run(ex, 12, period_s=0.05)
    ex.close()
    assert not any(s.missed for s in steps[4:]), [s.chunk_index for s in steps]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_policy_whose_every_inference_fails_stops_the_run_with_the_first_error(mode):
    class Broken(GoalPolicy):
        def infer(self, obs, instruction="", noise=None):
            raise RuntimeError("stack expects a non-empty TensorList")

    ex = ChunkExecutor(Broken(horizon=4), ExecutionConfig(mode=mode, lead_steps=1, max_failed_inferences=5),
                       period_s=0.01)
    with pytest.raises(PolicyError, match=r"5 inferences in a row failed .*the first: RuntimeError: stack expects"):
        run(ex, 200, period_s=0.01)
    ex.close()
    assert ex.failures == 5 and ex.inferences == 0
