"""robot_rl_controllers: control laws (usable from sims and from ROS 2 nodes), the arm model they control (MJCF and
joint constants, :mod:`robot_rl_controllers.arm_model`, shared with the sims) and the ROS 2 controller nodes."""
