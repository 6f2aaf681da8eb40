"""The part of ros2_control's controller manager a driver emulation offers: ``<manager>/list_controllers``
(controller_manager_msgs/srv/ListControllers) listing the emulated driver's controllers, so a profile's
``controller`` check runs against the rehearsal as against a real robot."""

from __future__ import annotations

from typing import Any


def serve_list_controllers(node: Any, manager: str, controllers: dict[str, str],
                           inactive: tuple[str, ...] = ()) -> None:
    """Offers ``<manager>/list_controllers`` on ``node``: ``controllers`` (name -> type) active, those in
    ``inactive`` inactive. Without controller_manager_msgs (scripts/build_ros_msgs.sh) it warns and offers nothing."""
    try:
        # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
        from controller_manager_msgs.msg import ControllerState
        from controller_manager_msgs.srv import ListControllers
    except ImportError:
        node.get_logger().warning("controller_manager_msgs is not installed (scripts/build_ros_msgs.sh): no "
                                  "list_controllers service")
        return
    off = set(inactive)

    def serve(request, response):  # noqa: ANN001, ANN202
        response.controller = [ControllerState(name=n, type=t, state="inactive" if n in off else "active")
                               for n, t in controllers.items()]
        return response

    node.create_service(ListControllers, f"{manager.rstrip('/')}/list_controllers", serve)
