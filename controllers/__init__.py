"""robot_rl_controllers: control laws (usable from sims and from ROS 2 nodes) and the ROS 2 controller nodes."""
