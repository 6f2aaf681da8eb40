#!/usr/bin/env bash
# Builds tf2_msgs (TFMessage: /tf, /tf_static) into .venv: scripts/build_ros_msgs.sh for tf2_msgs alone, which
# builds the ROS 2 Jazzy interface packages that have no wheel (see there for how, the checks and the options).
#   scripts/build_tf2_msgs.sh [--force|--uninstall]
exec bash "$(dirname "$0")/build_ros_msgs.sh" "$@" tf2_msgs
