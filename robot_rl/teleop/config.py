"""Configuration of the teleoperation side of a run: which device, how its input maps to actions, and what the
intervention wrapper does with it (``TrainConfig.teleop``; CLI ``--teleop.device scripted`` etc.)."""

from __future__ import annotations

from dataclasses import dataclass, field

from robot_rl.teleop.scripted import ScriptedHumanConfig

DEVICES = ("none", "scripted", "keyboard", "gamepad", "spacemouse", "ros")


@dataclass
class TeleopConfig:
    """Teleoperation device and interventions."""

    device: str = "none"
    """Who may take over: none | scripted (the task's expert, sim only) | keyboard | gamepad | spacemouse | ros."""
    success_reward: float = 1.0
    """Reward of a step the human labels a success (the episode then ends)."""
    scripted: ScriptedHumanConfig = field(default_factory=ScriptedHumanConfig)
    """The scripted human's takeover rule (device: scripted)."""

    def validate(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"teleop.device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        self.scripted.validate()
