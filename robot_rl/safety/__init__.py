"""Command limits shared by the robot env and the ROS 2 safety node (the two safety layers)."""

from robot_rl.safety.limits import (
    ArmLimits,
    CarLimits,
    RejectionCounter,
    check_action,
    filter_arm_target,
    filter_gripper,
    filter_twist,
)

__all__ = ["ArmLimits", "CarLimits", "RejectionCounter", "check_action", "filter_arm_target", "filter_gripper",
           "filter_twist"]
