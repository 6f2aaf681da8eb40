"""Reality profiles: the ways a rehearsal robot differs from the training sim, as a real arm does.

The emulated drivers (:mod:`robot_rl_sim.ros_arm_driver`, parameter ``reality``) apply a profile to their own
physics and outputs; training never sees it (the env reads topics, as on a robot). Bundled: ``mild``, ``typical``
and ``hard`` (``sim/realities/*.yaml``), each value with where it comes from (``sim/realities/FACTS.md``).
``nominal`` (every field at its default) is the training sim itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import yaml

BUNDLED = Path(__file__).resolve().parent / "realities"
P = TypeVar("P")


@dataclass(frozen=True)
class RealityProfile:
    """How the rehearsal robot differs from the training sim (all defaults: not at all)."""

    name: str = "nominal"
    """What the profile is called (its file's stem)."""
    command_latency: float = 0.0
    """s from a command message to its taking effect (controller update period, DDS hop, driver look-ahead)."""
    state_latency: float = 0.0
    """s by which joint states, TF and the wrench go out late (a joint_state_publisher merging at 30 Hz)."""
    camera_latency: float = 0.0
    """s by which camera images (and their CameraInfo) go out late (exposure, USB transfer, the driver)."""
    tracking_bandwidth_scale: float = 1.0
    """The joint position loop's bandwidth relative to the driver emulation's nominal ``joint_omega`` (Cartesian
    stiffness scales with its square): a softer joint impedance than the sim's tracking."""
    joint_coulomb_friction: float = 0.0
    """N m of dry friction on every arm joint (MuJoCo ``frictionloss``), which the sim does not model."""
    joint_viscous_friction: float = 0.0
    """N m s/rad added to every arm joint's damping."""
    gripper_speed: float = 0.0
    """m/s at which the gripper's opening may change (its fingers together); 0: the sim gripper's own speed."""
    joint_noise: float = 0.0
    """rad (and rad/s) std of the noise on published joint positions (and velocities)."""
    brightness_change: float = 0.0
    """Fractional change of the images' brightness (a gain of 1 + x on every channel, the blue one 1 - x: a
    warmer white balance than the sim's)."""
    camera_position_error: float = 0.0
    """m the cameras sit from where their frames say (hand-eye calibration error): along the optical frame's (1, 1,
    1) diagonal. Their TF frames stay where the robot's description puts them."""
    camera_rotation_error: float = 0.0
    """Degrees the cameras are panned (about the image's vertical axis) from where their frames say: the image moves
    sideways by f tan(angle) pixels."""
    camera_focal_error: float = 0.0
    """Fractional error of the focal length that CameraInfo reports: the lens's true focal length is 1 + x times it
    (images more zoomed in than the intrinsics say)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Where each value comes from (field -> source), as stated facts."""

    def __post_init__(self) -> None:
        check_numbers(self, "reality profile")
        if not 0.0 < self.tracking_bandwidth_scale <= 4.0:
            raise ValueError(f"reality profile {self.name!r}: tracking_bandwidth_scale must be in (0, 4]")
        if self.brightness_change >= 1.0:
            raise ValueError(f"reality profile {self.name!r}: brightness_change must be < 1")

    @property
    def nominal(self) -> bool:
        return self == RealityProfile(name=self.name, sources=self.sources)


def check_numbers(profile: Any, what: str, signed: tuple[str, ...] = ()) -> None:
    """A profile's numbers are finite and, but for ``signed`` ones, >= 0; its ``sources`` name only its fields."""
    numbers = {f.name: getattr(profile, f.name) for f in fields(profile) if f.name not in ("name", "sources")}
    bad = sorted(k for k, v in numbers.items() if not math.isfinite(v))
    if bad:
        raise ValueError(f"{what} {profile.name!r}: {bad} must be finite")
    negative = sorted(k for k, v in numbers.items() if v < 0 and k not in signed)
    if negative:
        raise ValueError(f"{what} {profile.name!r}: {negative} must be >= 0")
    unknown = sorted(set(profile.sources) - set(numbers))
    if unknown:
        raise ValueError(f"{what} {profile.name!r}: sources for unknown fields {unknown}")


def bundled_realities(folder: Path = BUNDLED) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


def load_reality(name_or_path: str) -> RealityProfile:
    """A bundled arm profile by name (``mild``, ``typical``, ``hard``), ``nominal``, or a YAML file's path."""
    return read_reality(RealityProfile, BUNDLED, name_or_path)


def read_reality(kind: type[P], folder: Path, name_or_path: str) -> P:
    """A profile of dataclass ``kind``: ``nominal`` (every default), a bundled one by name (``folder/NAME.yaml``),
    or a YAML file's path; unknown fields fail, naming them."""
    if name_or_path in ("", "nominal"):
        return kind()
    path = Path(name_or_path)
    if not path.suffix:
        path = folder / f"{name_or_path}.yaml"
        if not path.is_file():
            raise ValueError(f"reality: no bundled profile {name_or_path!r} (bundled: {bundled_realities(folder)}, "
                             "or a YAML path)")
    if not path.is_file():
        raise ValueError(f"reality: no file {path}")
    data: Any = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"reality: {path} is not a mapping of fields")
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"reality: {path} has unknown fields {unknown} (known: {sorted(known)})")
    return kind(**{"name": path.stem, **data})
