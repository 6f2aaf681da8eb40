"""ROS 2 glue shared by the nodes (sim hardware, controllers, safety) and the robot env: dataclass configs as
ROS 2 parameters, numpy <-> standard message conversions and the node runner. Imports rclpy: only the ROS 2
modules import this package (ROS 2 stays an optional dependency, the ``ros2`` extra)."""
