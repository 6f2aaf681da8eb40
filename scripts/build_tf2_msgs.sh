#!/usr/bin/env bash
# Builds the ROS 2 Jazzy interface package tf2_msgs (TFMessage only) into .venv, where the ROS 2 PyPI wheels
# live, because tf2_msgs has no wheel. /tf and /tf_static carry tf2_msgs/msg/TFMessage.
#
# How: the steps rosidl_generate_interfaces() runs in an ament build, called by hand. It uses only the
# rosidl generators the wheels install into .venv and the system gcc/g++. (There is no ament_cmake in .venv,
# and `rosidl generate` stops on the duplicate entry points these wheels register.)
#   1. rosidl_adapter: msg/TFMessage.msg -> msg/TFMessage.idl
#   2. rosidl_generator_type_description: TFMessage.json. This holds the RIHS01 type hash, computed from the
#      geometry_msgs type descriptions in .venv/share, the same way the official build computes it. The script
#      stops if the hash differs from the official Jazzy hash (EXPECTED_HASH).
#   3. rosidl_generator_c, rosidl_typesupport_{c,fastrtps_c,introspection_c}, rosidl_generator_py: C/C++/Python
#      sources, from the same generator arguments the CMake functions write.
#   4. gcc/g++ (nice -n 19, one compile at a time) build the libraries the same way the CMake targets do:
#        .venv/lib/libtf2_msgs__rosidl_{generator_c,typesupport_c,typesupport_fastrtps_c,
#                                        typesupport_introspection_c,generator_py}.so
#        site-packages/tf2_msgs/tf2_msgs_s__rosidl_typesupport_{c,fastrtps_c,introspection_c}.<EXT_SUFFIX>
#   5. It installs the Python package tf2_msgs (msg/_tf_message.py ...) into site-packages, plus headers under
#      .venv/include/tf2_msgs, TFMessage.{msg,idl,json} under .venv/share/tf2_msgs and ament index entries.
#      At run time the libraries are found the same way as every other ROS wheel library: .venv/lib is on the
#      LD_LIBRARY_PATH that ros_wheels_bootstrapper.pth sets. The .so files also carry a RUNPATH to .venv/lib.
#
# Idempotent: it exits 0 at once if tf2_msgs already loads its type support and this script built it against the
# ROS wheel versions installed now. Otherwise it rebuilds from scratch.
#   scripts/build_tf2_msgs.sh [--force|--uninstall]      (env: VENV=.venv, BUILD_DIR=.venv/build/tf2_msgs, CC, CXX)
# Needs: gcc, g++ and the Python headers (Python.h) of .venv's interpreter (Debian: gcc g++ python3-dev).
set -euo pipefail
SCRIPT="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$SCRIPT")/.."

EXPECTED_HASH="RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"  # tf2_msgs/msg/TFMessage, Jazzy
PKG=tf2_msgs
VENV_ARG="${VENV:-.venv}"
VENV="$(cd "$VENV_ARG" 2>/dev/null && pwd)" || { echo "[tf2_msgs] ERROR: no virtual environment at $VENV_ARG" >&2; exit 1; }
PY="$VENV/bin/python"
BUILD_DIR="${BUILD_DIR:-$VENV/build/$PKG}"
CC="${CC:-gcc}"
CXX="${CXX:-g++}"
MODE="${1:-}"
log() { echo "[tf2_msgs] $*"; }
die() { echo "[tf2_msgs] ERROR: $*" >&2; exit 1; }
[ -x "$PY" ] || die "$PY not found (create .venv and install the ros2 extra first)"

# Works when the Python package imports and its C type support loads (the library rclpy hands to rmw).
check_installed() {
  "$PY" - <<'EOF' >/dev/null 2>&1
from tf2_msgs.msg import TFMessage
TFMessage.__class__.__import_type_support__()
assert TFMessage.__class__._TYPE_SUPPORT is not None
EOF
}

SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
MANIFEST="$VENV/share/$PKG/.installed_files"
STAMP_FILE="$VENV/share/$PKG/.build_stamp"
# The build depends on this script and on the ROS wheel versions it compiles against. If either changes
# (upgraded wheels, say), the next run rebuilds.
STAMP="$( { sha256sum "$SCRIPT"; "$PY" -c 'import importlib.metadata as md
for d in ("ros-geometry-msgs", "ros-std-msgs", "ros-builtin-interfaces", "ros-rosidl-runtime-c", "ros-rosidl-typesupport-c",
          "ros-rosidl-typesupport-fastrtps-c", "ros-rosidl-typesupport-introspection-c", "ros-rosidl-generator-py",
          "ros-fastcdr", "ros-rclpy"):
    try:
        print(d, md.version(d))
    except md.PackageNotFoundError:
        print(d, "-")' 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)"
uninstall() {
  if [ -f "$MANIFEST" ]; then
    while IFS= read -r f; do rm -f "$VENV/$f"; done < "$MANIFEST"
    rm -f "$MANIFEST"
  fi
  rm -rf "$SITE/$PKG" "$VENV/include/$PKG" "$VENV/share/$PKG"
}
case "$MODE" in
  --uninstall) uninstall; log "removed from $VENV"; exit 0 ;;
  --force) ;;
  "") if [ "$(cat "$STAMP_FILE" 2>/dev/null)" = "$STAMP" ] && check_installed; then
        log "already installed in $VENV"; exit 0
      fi ;;
  *) die "unknown argument '$MODE' (use --force or --uninstall)" ;;
esac

# ---- tools ------------------------------------------------------------------------------------------------------
command -v "$CC" >/dev/null || die "C compiler '$CC' not found (apt-get install gcc)"
command -v "$CXX" >/dev/null || die "C++ compiler '$CXX' not found (apt-get install g++)"
"$PY" - <<'EOF' || die "the rosidl Python tools are missing from $VENV (install the ros2 extra: pip install -e '.[ros2]')"
import importlib, sys
missing = []
for m in ("rosidl_adapter", "rosidl_parser", "rosidl_pycommon", "rosidl_generator_type_description",
          "rosidl_generator_c", "rosidl_generator_py", "rosidl_typesupport_c", "rosidl_typesupport_fastrtps_c",
          "rosidl_typesupport_introspection_c", "numpy", "em", "lark", "rclpy", "geometry_msgs.msg"):
    try:
        importlib.import_module(m)
    except Exception as e:
        missing.append(f"{m} ({e})")
if missing:
    print("[tf2_msgs] missing Python modules: " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
EOF
PY_INC="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
NP_INC="$("$PY" -c 'import numpy; print(numpy.get_include())')"
EXT_SUFFIX="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
[ -f "$PY_INC/Python.h" ] || die "Python.h not found in $PY_INC (apt-get install python3-dev, or the -dev package of the Python that made .venv)"
for f in share/geometry_msgs/msg/TransformStamped.json share/geometry_msgs/msg/TransformStamped.idl \
         lib/libgeometry_msgs__rosidl_generator_py.so lib/libgeometry_msgs__rosidl_typesupport_fastrtps_c.so \
         lib/librosidl_typesupport_c.so lib/librosidl_typesupport_fastrtps_c.so lib/libfastcdr.so \
         include/rosidl_runtime_c/rosidl_runtime_c/message_type_support_struct.h; do
  [ -e "$VENV/$f" ] || die "$VENV/$f is missing (the ROS 2 Jazzy wheels of the ros2 extra are not complete)"
done
for d in rosidl_generator_c rosidl_generator_py rosidl_typesupport_c rosidl_typesupport_fastrtps_c \
         rosidl_typesupport_introspection_c; do
  [ -d "$VENV/share/$d/resource" ] || die "$VENV/share/$d/resource (generator templates) is missing"
done

rm -rf "$BUILD_DIR"
mkdir -p "$BUILD_DIR/src/msg"
B="$BUILD_DIR"
export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"

# ---- 1-3: generate ------------------------------------------------------------------------------------------------
# The message, byte for byte as in ros2/geometry2 (jazzy) tf2_msgs/msg/TFMessage.msg: the raw text is embedded in
# the generated type description sources (not in the hash).
printf 'geometry_msgs/TransformStamped[] transforms\n' > "$B/src/msg/TFMessage.msg"
cat > "$B/src/package.xml" <<'EOF'
<?xml version="1.0"?>
<?xml-model href="http://download.ros.org/schema/package_format3.xsd" schematypens="http://www.w3.org/2001/XMLSchema"?>
<package format="3">
  <name>tf2_msgs</name>
  <version>0.36.4</version>
  <description>tf2_msgs (TFMessage only), built into the robot_rl venv by scripts/build_tf2_msgs.sh</description>
  <maintainer email="noreply@example.com">robot_rl</maintainer>
  <license>BSD</license>
  <buildtool_depend>ament_cmake</buildtool_depend>
  <buildtool_depend>rosidl_default_generators</buildtool_depend>
  <depend>builtin_interfaces</depend>
  <depend>geometry_msgs</depend>
  <exec_depend>rosidl_default_runtime</exec_depend>
  <member_of_group>rosidl_interface_packages</member_of_group>
  <export><build_type>ament_cmake</build_type></export>
</package>
EOF

log "generating sources in $B"
nice -n 19 "$PY" - "$B" "$VENV" "$PKG" "$EXPECTED_HASH" <<'EOF'
import json, pathlib, subprocess, sys
B, VENV, PKG, EXPECTED = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
share = VENV / "share"
deps = ["builtin_interfaces", "geometry_msgs"]  # DEPENDENCIES of tf2_msgs' rosidl_generate_interfaces()
msg_file = B / "src/msg/TFMessage.msg"

def write_args(name, **kw):
    p = B / f"{name}__arguments.json"
    p.write_text(json.dumps(kw, indent=2))
    return str(p)

def run(script, *args):
    subprocess.run([sys.executable, str(VENV / "lib" / script / script), *args], check=True)

# 1. .msg -> .idl (python -m rosidl_adapter, what rosidl_adapt_interfaces() runs)
adapter_args = write_args("rosidl_adapter", package_name=PKG, non_idl_tuples=[f"{B}/src:msg/TFMessage.msg"])
subprocess.run([sys.executable, "-m", "rosidl_adapter", "--package-name", PKG, "--arguments-file", adapter_args,
                "--output-dir", str(B / "rosidl_adapter"), "--output-file", str(B / "rosidl_adapter__idl_tuples.txt")],
               check=True, stdout=subprocess.DEVNULL)
idl_tuples = [f"{B}/rosidl_adapter:msg/TFMessage.idl"]
dep_idls = [f"{d}:{p}" for d in deps for p in sorted((share / d).glob("*/*.idl"))]

# 2. type description + RIHS01 hash; dependency descriptions come from <share>/<dep>/msg/*.json
out_td = B / "rosidl_generator_type_description" / PKG
run("rosidl_generator_type_description", "--generator-arguments-file",
    write_args("rosidl_generator_type_description", package_name=PKG, idl_tuples=idl_tuples, output_dir=str(out_td),
               include_paths=[f"{d}:{share / d}" for d in deps]))
td_json = out_td / "msg/TFMessage.json"
got = json.loads(td_json.read_text())["type_hashes"][0]
assert got["type_name"] == f"{PKG}/msg/TFMessage", got
print(f"[tf2_msgs] type hash {got['hash_string']}")
if got["hash_string"] != EXPECTED:
    sys.exit(f"[tf2_msgs] ERROR: type hash {got['hash_string']} != official Jazzy {EXPECTED}: the geometry_msgs in "
             "this venv does not match Jazzy, so this TFMessage would not match a ROS 2 Jazzy system's")

# 3. code generators
def gen(name, extra_cli=(), **extra):
    out = B / name / PKG
    args = write_args(name, package_name=PKG, idl_tuples=idl_tuples, ros_interface_dependencies=dep_idls,
                      output_dir=str(out), template_dir=str(share / name / "resource"), target_dependencies=[], **extra)
    run(name, "--generator-arguments-file", args, *extra_cli)
    return out

def visibility_header(name, out):
    from rosidl_cli.command.helpers import generate_visibility_control_file
    generate_visibility_control_file(package_name=PKG, template_path=share / name / "resource" / f"{name}__visibility_control.h.in",
                                     output_path=out / "msg" / f"{name}__visibility_control.h")

out = gen("rosidl_generator_c", type_description_tuples=[f"msg/TFMessage.idl:{td_json}"], ros_interface_files=[str(msg_file)])
visibility_header("rosidl_generator_c", out)
impls = ["rosidl_typesupport_fastrtps_c", "rosidl_typesupport_introspection_c"]
gen("rosidl_typesupport_c", ["--typesupports", *impls])
visibility_header("rosidl_typesupport_fastrtps_c", gen("rosidl_typesupport_fastrtps_c"))
visibility_header("rosidl_typesupport_introspection_c", gen("rosidl_typesupport_introspection_c"))
out = gen("rosidl_generator_py", ["--typesupport-impls", ";".join(impls + ["rosidl_typesupport_c"])])
(out / "__init__.py").write_text("")  # as rosidl_generator_py_generate_interfaces.cmake does
EOF

# ---- 4: compile -------------------------------------------------------------------------------------------------
INC=(-I"$B/rosidl_generator_c" -I"$B/rosidl_typesupport_fastrtps_c" -I"$B/rosidl_typesupport_introspection_c"
     -I"$B/rosidl_generator_py" -I"$VENV/include")
for d in "$VENV"/include/*/; do d="${d%/}"; [ -d "$d/$(basename "$d")" ] && INC+=(-I"$d"); done
OBJ="$B/obj"; LIBOUT="$B/lib"; mkdir -p "$OBJ" "$LIBOUT" "$B/py"
SITE_REL_LIB="$("$PY" -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$VENV/lib" "$SITE/$PKG")"
CFLAGS=(-O2 -fPIC -Wall)
CXXFLAGS=(-O2 -fPIC -std=c++17 -Wall)
LDFLAGS=(-shared -L"$LIBOUT" -L"$VENV/lib" -Wl,--as-needed)
RPATH_LIB=(-Wl,-rpath,'$ORIGIN')
RPATH_MOD=(-Wl,-rpath,"\$ORIGIN/$SITE_REL_LIB")

cc() { log "  cc  $(basename "$2")"; nice -n 19 "$CC" "${CFLAGS[@]}" "${INC[@]}" "${@:3}" -c "$2" -o "$OBJ/$1.o"; }
cxx() { log "  c++ $(basename "$2")"; nice -n 19 "$CXX" "${CXXFLAGS[@]}" "${INC[@]}" "${@:3}" -c "$2" -o "$OBJ/$1.o"; }
link() { local out="$1" linker="$2"; shift 2; log "  ld  $(basename "$out")"; nice -n 19 "$linker" "${LDFLAGS[@]}" -o "$out" "$@"; }

G="$B/rosidl_generator_c/$PKG/msg/detail"
log "compiling (nice -n 19, one job)"
for s in description functions type_support; do cc "gen_c_$s" "$G/tf_message__$s.c" -DROSIDL_GENERATOR_C_BUILDING_DLL_$PKG; done
link "$LIBOUT/lib${PKG}__rosidl_generator_c.so" "$CC" "$OBJ"/gen_c_*.o "${RPATH_LIB[@]}" \
  -Wl,-soname,lib${PKG}__rosidl_generator_c.so \
  -lgeometry_msgs__rosidl_generator_c -lstd_msgs__rosidl_generator_c -lbuiltin_interfaces__rosidl_generator_c \
  -lrosidl_runtime_c -lrcutils

cxx ts_fastrtps_c "$B/rosidl_typesupport_fastrtps_c/$PKG/msg/detail/tf_message__type_support_c.cpp" \
  -DROSIDL_TYPESUPPORT_FASTRTPS_C_BUILDING_DLL_$PKG
link "$LIBOUT/lib${PKG}__rosidl_typesupport_fastrtps_c.so" "$CXX" "$OBJ/ts_fastrtps_c.o" "${RPATH_LIB[@]}" \
  -Wl,-soname,lib${PKG}__rosidl_typesupport_fastrtps_c.so -l${PKG}__rosidl_generator_c \
  -lgeometry_msgs__rosidl_typesupport_fastrtps_c -lgeometry_msgs__rosidl_generator_c \
  -lrosidl_typesupport_fastrtps_c -lrosidl_typesupport_fastrtps_cpp -lrosidl_dynamic_typesupport -lfastcdr -lrmw \
  -lrosidl_runtime_c -lrcutils

cc ts_introspection_c "$B/rosidl_typesupport_introspection_c/$PKG/msg/detail/tf_message__type_support.c" \
  -DROSIDL_TYPESUPPORT_INTROSPECTION_C_BUILDING_DLL_$PKG
link "$LIBOUT/lib${PKG}__rosidl_typesupport_introspection_c.so" "$CC" "$OBJ/ts_introspection_c.o" "${RPATH_LIB[@]}" \
  -Wl,-soname,lib${PKG}__rosidl_typesupport_introspection_c.so -l${PKG}__rosidl_generator_c \
  -lgeometry_msgs__rosidl_typesupport_introspection_c -lgeometry_msgs__rosidl_generator_c \
  -lrosidl_typesupport_introspection_c -lrosidl_runtime_c -lrcutils

cxx ts_c "$B/rosidl_typesupport_c/$PKG/msg/tf_message__type_support.cpp" -DROSIDL_GENERATOR_C_BUILDING_DLL_$PKG
link "$LIBOUT/lib${PKG}__rosidl_typesupport_c.so" "$CXX" "$OBJ/ts_c.o" "${RPATH_LIB[@]}" \
  -Wl,-soname,lib${PKG}__rosidl_typesupport_c.so -l${PKG}__rosidl_generator_c \
  -lgeometry_msgs__rosidl_typesupport_c -lrosidl_typesupport_c -lrosidl_runtime_c -lrcpputils -lrcutils

cc gen_py "$B/rosidl_generator_py/$PKG/msg/_tf_message_s.c" -I"$PY_INC" -I"$NP_INC"
link "$LIBOUT/lib${PKG}__rosidl_generator_py.so" "$CC" "$OBJ/gen_py.o" "${RPATH_LIB[@]}" \
  -Wl,-soname,lib${PKG}__rosidl_generator_py.so -l${PKG}__rosidl_generator_c -l${PKG}__rosidl_typesupport_c \
  -lgeometry_msgs__rosidl_generator_py -lgeometry_msgs__rosidl_generator_c -lrosidl_runtime_c -lrcutils

for ts in rosidl_typesupport_c rosidl_typesupport_fastrtps_c rosidl_typesupport_introspection_c; do
  cc "py_ep_$ts" "$B/rosidl_generator_py/$PKG/_${PKG}_s.ep.$ts.c" -I"$PY_INC" -I"$NP_INC"
  tslib=(-l${PKG}__$ts); [ "$ts" = rosidl_typesupport_c ] || tslib+=(-l${PKG}__rosidl_typesupport_c)
  link "$B/py/${PKG}_s__$ts$EXT_SUFFIX" "$CC" "$OBJ/py_ep_$ts.o" "${RPATH_MOD[@]}" \
    -l${PKG}__rosidl_generator_py "${tslib[@]}" -l${PKG}__rosidl_generator_c \
    -lrosidl_typesupport_c -lrosidl_runtime_c -lrcutils
done

# ---- 5: install -------------------------------------------------------------------------------------------------
log "installing into $VENV"
uninstall
mkdir -p "$VENV/share/$PKG/msg" "$VENV/include/$PKG/$PKG" "$VENV/share/ament_index/resource_index/packages" \
         "$VENV/share/ament_index/resource_index/rosidl_interfaces"
installed=()
for l in "$LIBOUT"/lib${PKG}__*.so; do
  install -m 0755 "$l" "$VENV/lib/"; installed+=("lib/$(basename "$l")")
done
cp "$B/src/msg/TFMessage.msg" "$B/rosidl_adapter/msg/TFMessage.idl" \
   "$B/rosidl_generator_type_description/$PKG/msg/TFMessage.json" "$VENV/share/$PKG/msg/"
cp "$B/src/package.xml" "$VENV/share/$PKG/"
for g in rosidl_generator_c rosidl_typesupport_fastrtps_c rosidl_typesupport_introspection_c; do
  (cd "$B/$g/$PKG" && find . -name '*.h' -exec install -D -m 0644 {} "$VENV/include/$PKG/$PKG/{}" \;)
done
: > "$VENV/share/ament_index/resource_index/packages/$PKG"
printf 'msg/TFMessage.idl\nmsg/TFMessage.msg\n' > "$VENV/share/ament_index/resource_index/rosidl_interfaces/$PKG"
installed+=("share/ament_index/resource_index/packages/$PKG" "share/ament_index/resource_index/rosidl_interfaces/$PKG")
# The Python package goes last: until it is there, check_installed() fails and a rerun rebuilds.
STAGE="$SITE/.$PKG.tmp"; rm -rf "$STAGE"; mkdir -p "$STAGE/msg"
cp "$B/rosidl_generator_py/$PKG/__init__.py" "$STAGE/"
cp "$B/rosidl_generator_py/$PKG/msg/__init__.py" "$B/rosidl_generator_py/$PKG/msg/_tf_message.py" "$STAGE/msg/"
install -m 0755 "$B/py/"*"$EXT_SUFFIX" "$STAGE/"
mv "$STAGE" "$SITE/$PKG"
printf '%s\n' "${installed[@]}" > "$MANIFEST"

check_installed || die "installed, but 'from tf2_msgs.msg import TFMessage' cannot load its type support; run: $PY -c 'import logging; logging.basicConfig(level=logging.DEBUG); from tf2_msgs.msg import TFMessage; TFMessage.__class__.__import_type_support__()'"
"$PY" - <<'EOF'
from rclpy.serialization import deserialize_message, serialize_message
from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage
t = TransformStamped(child_frame_id="base_link"); t.header.frame_id = "odom"; t.transform.rotation.w = 1.0
m = deserialize_message(serialize_message(TFMessage(transforms=[t])), TFMessage)
assert m.transforms[0].child_frame_id == "base_link" and m.transforms[0].header.frame_id == "odom"
EOF
echo "$STAMP" > "$STAMP_FILE"
log "built and installed in ${SECONDS} s ($(du -sh "$SITE/$PKG" | cut -f1) python package + $(du -ch "$VENV"/lib/lib${PKG}__*.so | tail -1 | cut -f1) libraries)"
