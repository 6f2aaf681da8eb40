"""Statistics of the episodes the actors' chunks carry (returns, lengths, success, interventions, policy lag), per
logging window."""

from __future__ import annotations

from collections import defaultdict

import numpy as np


class EpisodeStats:
    """Per-stream running sums of the episodes in progress; finished episodes go to the logging window."""

    def __init__(self) -> None:
        # stream -> [return, length, intervened steps, takeovers, last step intervened]
        self._running: dict[int, list] = defaultdict(lambda: [0.0, 0, 0, 0, False])
        self.window: dict[str, list[float]] = defaultdict(list)

    def add(self, chunk: dict[str, np.ndarray], stream_base: int, version: int, env_steps: int = 0,
            published_at: dict[int, int] | None = None) -> int:
        """Counts the valid rows of ``chunk`` (taken in after ``env_steps``); returns the number of episodes that
        ended in it. ``published_at`` (policy version -> env steps taken in when it was published) gives each row's
        policy lag in env steps: how much newer the data is than the data the acting weights were trained on."""
        valid = chunk["valid"]
        self.window["policy_lag"].extend(version - chunk["policy_version"][valid])
        if published_at:
            rows = env_steps + np.arange(1, int(np.count_nonzero(valid)) + 1)
            made = np.array([published_at.get(int(v), -1) for v in chunk["policy_version"][valid]])
            known = made >= 0
            self.window["policy_lag_steps"].extend((rows[known] - made[known]).astype(float))
        self.window["intervened"].extend(chunk["intervened"][valid].astype(float))
        ended = 0
        for i in np.flatnonzero(valid):
            ep = self._running[stream_base + int(chunk["stream"][i])]
            ep[0] += float(chunk["reward"][i])
            ep[1] += 1
            human = bool(chunk["intervened"][i])
            ep[2] += human
            ep[3] += human and not ep[4]
            ep[4] = human
            if chunk["terminated"][i] or chunk["truncated"][i]:
                ended += 1
                self.window["episode_return"].append(ep[0])
                self.window["episode_length"].append(ep[1])
                self.window["episode_success"].append(float(chunk["success"][i]))
                label = int(chunk["label"][i]) if "label" in chunk else 0
                self.window["episode_labelled"].append(float(label > 0))  # by the operator (success or failure)
                if label:
                    self.window["episode_labelled_success"].append(float(label == 1))
                self.window["episode_interventions"].append(ep[3])
                self.window["episode_intervention_rate"].append(ep[2] / ep[1])
                ep[:] = [0.0, 0, 0, 0, False]
        return ended

    def take_window(self) -> dict[str, float]:
        """Means since the last call, named as logged."""
        names = {"policy_lag": "actor/policy_lag", "intervened": "actor/intervention_rate",
                 "policy_lag_steps": "actor/policy_lag_steps"}
        out = {names.get(k, f"train/{k}"): float(np.mean(v)) for k, v in self.window.items() if v}
        if self.window.get("policy_lag_steps"):
            out["actor/policy_lag_steps_max"] = float(np.max(self.window["policy_lag_steps"]))
        self.window.clear()
        return out
