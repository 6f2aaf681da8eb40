"""Robots by config: profiles of ROS 2 drivers (:mod:`robot_rl.robots.profile`), URDF kinematics
(:mod:`robot_rl.robots.kinematics`) and rigid transforms. No ROS imports here."""
