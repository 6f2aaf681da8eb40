"""The arm's future-state prediction (future-state-aware execution): from a state and the actions still to run,
where the simulated arm really gets to."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import robot_rl_sim  # noqa: F401


def test_arm_predicts_where_a_chunk_of_delta_actions_takes_the_ee():
    """Noisy scripted PickCube motions, predicted 6 steps (0.3 s) ahead: within ~1 cm where the EE really is,
    against ~9 cm between the state at launch and the state 6 steps later."""
    errors, naive, vel_err = [], [], []
    for seed in range(3):
        env = gym.make("robot_rl/PickCube-v0")
        obs, _ = env.reset(seed=seed)
        arm = env.unwrapped
        history = []
        for _ in range(60):
            action = arm.expert_action(0.1)
            history.append((obs["state"].copy(), arm.target_pos.copy(), action))
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        history.append((obs["state"].copy(), arm.target_pos.copy(), None))
        for t in range(len(history) - 7):
            state, target, _ = history[t]
            arm.target_pos[:] = target  # the controller's target at that moment, as the executor would see it
            predicted = arm.predict_state(state, np.stack([history[t + k][2] for k in range(6)]))
            actual = history[t + 6][0]
            errors.append(np.linalg.norm(predicted[:3] - actual[:3]))
            naive.append(np.linalg.norm(state[:3] - actual[:3]))
            vel_err.append(np.linalg.norm(predicted[7:10] - actual[7:10]) / max(np.linalg.norm(actual[7:10]), 0.05))
            assert np.array_equal(predicted[3:7], state[3:7]) and np.array_equal(predicted[10:], state[10:])
        env.close()
    assert np.mean(errors) < 0.012 and np.mean(naive) > 0.05, (np.mean(errors), np.mean(naive))
    assert np.median(vel_err) < 0.5, np.median(vel_err)
