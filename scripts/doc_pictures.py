"""The docs' pictures, made by the project's own code and commands:

* ``tasks``: one frame of each task robot_rl ships (the ``robot_rl/<Task>-v0`` sims and the gymnasium tasks of the
  bundled configs), rendered offscreen with MuJoCo through the env pipeline (``robot_rl.envs.make.make_env``) after
  a few steps of the task's scripted expert: ``docs/img/tasks/<task>.png``.
* ``rollouts``: a GIF of the scripted expert on PickCube and on Drive, through the commands a user runs:
  ``robot-rl record-demos TASK -n 1`` and ``robot-rl demos show DATASET --video FILE.gif``.
* ``policy``: a GIF of a trained policy: the default job trained from scratch (``robot-rl train pickcube``, about
  4 minutes on 2 cores) and one deterministic episode of it (``robot-rl eval RUN --episodes 1 --video FILE.gif``),
  every other frame kept and scaled to 192 px: ``docs/img/tasks/pickcube-policy.gif``.
* ``ros2-graph``: the ROS 2 graph of the sim arm (``launch/sim_arm.launch.yaml`` with the robot env of the bundled
  ``pickcube_ros`` config) and of the sim car (``launch/sim_car.launch.yaml``): the launch file is started with the
  project's launcher on a private ROS domain and the live graph is read back (every node's publishers, subscribers
  and services): ``docs/img/ros2-graph-<name>.json``, drawn as ``docs/img/ros2-graph-<name>.svg`` (pure Python, no
  graphviz).
* ``operator-view``: what the live operator view holds, from a recording it saved during a short human-in-the-loop
  run (PickCube with two 96 px cameras, the scripted human as the operator: it presses ready, takes over, gives back
  and labels the episode): the cameras at the takeover, the policy's and the person's actions with who was in
  control, reward and success, and the events: ``docs/img/operator-view.png``. It is a screenshot of rerun's own
  viewer, run headless (``rerun --headless``: no window, no display; a Vulkan adapter, which on a machine without a
  GPU is Mesa's software lavapipe, ``apt-get install mesa-vulkan-drivers``), opened on the recording with the layout
  the view sent, at a frame where the person steers. Where the viewer cannot run, the same streams are drawn with
  matplotlib instead; ``made_by`` in the manifest says which.
* ``curves``: the learning curves of the headline runs, drawn with matplotlib from their stored result files
  (``benchmarks/results/*.json``, nothing is trained): eval success over env steps of each seed of the default
  PickCube job, and of each fine-tuning recipe beside the success of its base alone: ``docs/img/curves/*.png``
  (``CURVES`` says which result files feed which picture).

``bash scripts/gen_docs.sh`` runs ``python scripts/doc_pictures.py``, which re-renders a group only when its inputs
(the files that decide what it shows, this script among them) changed since ``docs/img/pictures.json`` recorded
them, and always redraws the SVGs from their JSON (cheap, deterministic; tests/test_docs_pictures.py checks it).
``--force`` re-renders every group, ``--only GROUP`` one. Rendering needs MuJoCo's offscreen GL (``MUJOCO_GL=egl``,
set here unless set) and the graph needs the ``ros2`` extra; a group whose requirement is missing is skipped with a
message, its pictures kept.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs/img"
MANIFEST = IMG / "pictures.json"
FRAME_SIZE = (400, 300)
"""Width, height of a task frame (rendered at twice this and downscaled: anti-aliased edges)."""

ROLLOUTS = {  # picture -> (task, record-demos flags, demos show flags)
    "pickcube-expert.gif": ("PickCube", ["--noise", "0"], ["--size", "160", "--fps", "10"]),
    "drive-expert.gif": ("Drive", ["--noise", "0"], ["--camera", "front", "--size", "160"]),
}
GRAPHS = {  # name -> (launch file, robot env id or "", env kwargs)
    "arm": ("launch/sim_arm.launch.yaml", "robot_rl.envs.ros_env:robot_rl/RosArm-v0", {"namespace": "/arm"}),
    "car": ("launch/sim_car.launch.yaml", "", {}),
}
GROUP_INPUTS = {  # group -> the files (globs under ROOT) whose content decides its pictures
    "tasks": ["sim/base.py", "sim/arm_env.py", "sim/arm_tasks.py", "sim/car.py", "sim/car_model.py",
              "robot_rl/configs/*.yaml"],
    "rollouts": ["sim/base.py", "sim/arm_env.py", "sim/arm_tasks.py", "sim/car.py", "sim/car_model.py",
                 "robot_rl/datasets/record.py", "robot_rl/datasets/show.py", "robot_rl/utils/video.py"],
    "policy": ["sim/base.py", "sim/arm_env.py", "sim/arm_tasks.py", "robot_rl/configs/pickcube.yaml",
               "robot_rl/agents/sac.py", "robot_rl/agents/critic.py", "robot_rl/agents/config.py"],
    "operator-view": ["robot_rl/view/*.py", "robot_rl/runtime/actor.py", "robot_rl/teleop/intervention.py",
                      "robot_rl/teleop/scripted.py", "sim/arm_env.py", "sim/arm_tasks.py"],
    "ros2-graph": ["launch/sim_arm.launch.yaml", "launch/sim_car.launch.yaml", "robot_rl/configs/pickcube_ros.yaml",
                   "sim/ros_*.py", "controllers/ros_*.py", "robot_rl/envs/ros_env*.py", "robot_rl/ros/*.py"],
}
CURVES = {  # picture under docs/img/curves/ -> (what it shows, the result files benchmarks/results/NAME.json it
    # reads, the target success its page sets or None)
    "pickcube-default.png": ("training", ["pickcube_default"], 0.9),
    "finetune-pickcolor.png": ("finetuning", ["finetune_pickcolor_offset150_ibrl_margin_eval",
                                              "finetune_pickcolor_offset150_ibrl_margin_eval_seeds345"], 0.95),
    "finetune-peginsert.png": ("finetuning", ["finetune_peginsert_offset_residual"], 0.95),
    "finetune-pickcube.png": ("finetuning", ["finetune_pickcube"], None),
}
GROUP_INPUTS["curves"] = sorted({f"benchmarks/results/{name}.json" for _, names, _ in CURVES.values()
                                 for name in names})
CURVE_SIZE = (6.4, 3.6), 100
"""Figure size in inches and dpi of a curve picture: 640 x 360 px."""
METHOD_NAMES = {"ibrl": "IBRL", "residual": "residual RL", "critic_guided": "critic-guided fine-tuning",
                "steer": "latent steering", "rlpd": "RLPD"}
"""A method of ``benchmarks/finetune.py`` as the pictures name it."""


# ----------------------------------------------------------------------------------------------------- the tasks
def slug(env_id: str) -> str:
    """``robot_rl/PickCube-v0`` -> ``pickcube``: the picture's file name."""
    return env_id.rsplit("/", 1)[-1].split("-v")[0].lower()


def task_ids() -> list[str]:
    """The tasks that get a frame: every sim task ``robot_rl_sim`` registers, then the gymnasium ids of the bundled
    configs (a robot env, driven over ROS 2, has its graph instead)."""
    import gymnasium as gym
    import yaml

    import robot_rl_sim  # noqa: F401  (registers the sim tasks)

    sims = sorted(i for i, spec in gym.registry.items()
                  if i.startswith("robot_rl/") and str(spec.entry_point).startswith("robot_rl_sim."))
    configs = []
    for path in sorted((ROOT / "robot_rl/configs").glob("*.yaml")):
        env_id = (yaml.safe_load(path.read_text()).get("env") or {}).get("id", "")
        if env_id and ":" not in env_id and env_id not in sims + configs:
            configs.append(env_id)
    return sims + configs


def _downscale(image: Any, size: tuple[int, int]) -> Any:
    import numpy as np
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS))


def _fill(image: Any, size: tuple[int, int]) -> Any:
    """``image`` cropped around its centre to the aspect of ``size``, then scaled to it."""
    w, h = size
    rows, cols = image.shape[:2]
    if cols * h > rows * w:  # wider than wanted: crop the sides
        keep = round(rows * w / h)
        image = image[:, (cols - keep) // 2:(cols - keep) // 2 + keep]
    else:
        keep = round(cols * h / w)
        image = image[(rows - keep) // 2:(rows - keep) // 2 + keep]
    return _downscale(image[..., :3].copy(), size)


def _sim_view(sim: Any, env_id: str) -> Any:
    """A view of a robot_rl sim from a free camera (the arm from the front left, the car from behind and above),
    shadows on, the empty background light grey instead of black."""
    import mujoco
    import numpy as np

    w, h = FRAME_SIZE[0] * 2, FRAME_SIZE[1] * 2
    model = sim.model
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, w)
    model.vis.global_.offheight = max(model.vis.global_.offheight, h)
    model.vis.quality.offsamples = 0  # supersampled instead: no dark fringe where an edge meets the background
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    if env_id == "robot_rl/Drive-v0":
        car = sim.data.body("car").xpos if _has_body(model, "car") else np.zeros(3)
        cam.lookat[:] = (car[0], car[1], 0.0)
        cam.distance, cam.elevation = 3.2, -38.0
        cam.azimuth = float(np.degrees(_yaw(sim.data.body("car").xquat)) + 180.0) if _has_body(model, "car") else 90
    else:
        cam.lookat[:] = (0.43, 0.0, 0.36)
        cam.distance, cam.azimuth, cam.elevation = 1.28, 160.0, -24.0
    renderer = mujoco.Renderer(model, h, w)
    try:
        renderer.update_scene(sim.data, camera=cam)
        rgb = renderer.render().copy()
        renderer.enable_segmentation_rendering()
        renderer.update_scene(sim.data, camera=cam)
        background = renderer.render()[..., 0] < 0
    finally:
        renderer.close()
    shade = np.linspace(242, 222, h, dtype=np.float32)[:, None, None]
    rgb = np.where(background[..., None], np.broadcast_to(shade, rgb.shape).astype(np.uint8), rgb)
    return _downscale(rgb, FRAME_SIZE)


def _has_body(model: Any, name: str) -> bool:
    import mujoco

    return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name) >= 0


def _yaw(quat: Any) -> float:
    import math

    w, x, y, z = (float(v) for v in quat)
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def render_frame(env_id: str, steps: int = 8) -> Any:
    """uint8 ``[H, W, 3]``: ``env_id`` through robot_rl's env pipeline, reset with seed 0 and stepped ``steps``
    times by its scripted expert (noise 0) where it has one; a robot_rl sim from a free camera, any other task as
    its own ``render()`` draws it."""
    import numpy as np

    from robot_rl.envs.make import EnvConfig, make_env

    env = make_env(EnvConfig(id=env_id), render_mode="rgb_array")
    try:
        sim = env.unwrapped
        env.reset(seed=0)
        expert = getattr(sim, "expert_action", None)
        for _ in range(steps if callable(expert) else 0):
            env.step(expert(0.0))
        if hasattr(sim, "model") and env_id.startswith("robot_rl/"):
            return _sim_view(sim, env_id)
        return _fill(np.asarray(env.render()), FRAME_SIZE)
    finally:
        env.close()


def make_tasks() -> list[Path]:
    from PIL import Image

    out = []
    for env_id in task_ids():
        path = IMG / "tasks" / f"{slug(env_id)}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(render_frame(env_id)).save(path, optimize=True)
        out.append(path)
        print(f"  {env_id} -> {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")
    return out


# -------------------------------------------------------------------------------------------------- the rollouts
def _robot_rl(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "robot_rl.cli", *args], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def make_rollouts() -> list[Path]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (task, record, show) in ROLLOUTS.items():
            data = Path(tmp) / f"{task}.zarr"
            path = IMG / "tasks" / name
            _robot_rl("record-demos", task, "-n", "1", "--seed", "0", "--out", str(data), "--no-progress", *record)
            _robot_rl("demos", "show", str(data), "--video", str(path), *show)
            out.append(path)
            print(f"  {task} -> {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")
    return out


def make_policy() -> list[Path]:
    path = IMG / "tasks" / "pickcube-policy.gif"
    with tempfile.TemporaryDirectory() as tmp:
        run, raw = Path(tmp) / "pickcube", Path(tmp) / "episode.gif"
        _robot_rl("train", "pickcube", "--name", run.name, "--runs-dir", tmp, "--no-progress")
        _robot_rl("eval", str(run), "--episodes", "1", "--video", str(raw))
        _shrink_gif(raw, path, side=192, every=2)
    print(f"  the default job's policy -> {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")
    return [path]


def _shrink_gif(src: Path, dst: Path, side: int, every: int) -> None:
    """``src`` with every ``every``-th frame kept (shown as long, so it plays at the same speed), scaled to
    ``side`` px on its longer edge."""
    from PIL import Image, ImageSequence

    with Image.open(src) as gif:
        duration = gif.info.get("duration", 50) * every
        scale = side / max(gif.size)
        size = (round(gif.width * scale), round(gif.height * scale))
        frames = [f.convert("RGB").resize(size, Image.LANCZOS)
                  for i, f in enumerate(ImageSequence.Iterator(gif)) if i % every == 0]
    frames[0].save(dst, save_all=True, append_images=frames[1:], duration=duration, loop=0, optimize=True)


# ------------------------------------------------------------------------------------------------ the ROS 2 graph
IGNORED_TOPICS = {"/rosout", "/parameter_events"}


def _node_services(services: list[tuple[str, list[str]]], node: str) -> list[str]:
    """A node's own services, less rclpy's parameter and type-description services every node has."""
    skip = ("describe_parameters", "get_parameters", "get_parameter_types", "list_parameters", "set_parameters",
            "set_parameters_atomically", "get_type_description")
    return sorted(s for s, _ in services if s.rsplit("/", 1)[-1] not in skip)


def read_graph(name: str, timeout: float = 90.0) -> dict[str, Any]:
    """Starts ``GRAPHS[name]``'s launch file (and its robot env) on a private ROS domain, waits until every node is
    up and the graph stops changing, and returns what each node publishes, subscribes to and serves."""
    launch_file, env_id, env_kwargs = GRAPHS[name]
    os.environ["ROS_DOMAIN_ID"] = str(150 + os.getpid() % 60)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.pop("ROS_LOCALHOST_ONLY", None)
    from robot_rl.ros.launch import LaunchConfig, load, stop
    from robot_rl.ros.link import RosLink

    procs = load(ROOT / launch_file)
    children = {p.name: subprocess.Popen(p.cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL) for p in procs}
    env = link = None
    try:
        if env_id:
            from robot_rl.envs.make import EnvConfig, make_env

            env = make_env(EnvConfig(id=env_id, kwargs=dict(env_kwargs)))
            env.reset(seed=0)  # connects: the env's node and its subscriptions exist from here
        link = RosLink("doc_pictures_probe")
        probe = link.node
        expected = len(procs) + (1 if env_id else 0)
        deadline, last, stable = time.monotonic() + timeout, None, 0
        while True:
            graph = {}
            for node, ns in probe.get_node_names_and_namespaces():
                if node == probe.get_name():
                    continue
                full = f"{ns.rstrip('/')}/{node}"
                graph[full] = {
                    "publishes": {t: ts[0] for t, ts in probe.get_publisher_names_and_types_by_node(node, ns)
                                  if t not in IGNORED_TOPICS},
                    "subscribes": {t: ts[0] for t, ts in probe.get_subscriber_names_and_types_by_node(node, ns)
                                   if t not in IGNORED_TOPICS},
                    "services": _node_services(probe.get_service_names_and_types_by_node(node, ns), full)}
            stable = stable + 1 if graph == last and len(graph) >= expected else 0
            if stable >= 3:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{launch_file}: the graph did not settle with {expected} nodes in {timeout:.0f} s "
                                   f"(seen: {sorted(graph)})")
            last = graph
            time.sleep(1.0)
    finally:
        if link is not None:
            link.close()
        if env is not None:
            env.close()
        stop(children, LaunchConfig())
    launched = {p.name for p in procs}
    nodes = [{"name": full, "origin": launch_file if full.rsplit("/", 1)[-1] in launched else env_id, **body}
             for full, body in sorted(graph.items())]
    return {"launch": launch_file, "env": env_id, "env_kwargs": env_kwargs, "nodes": nodes}


def make_graphs() -> list[Path]:
    out = []
    for name in GRAPHS:
        path = IMG / f"ros2-graph-{name}.json"
        path.write_text(json.dumps(read_graph(name), indent=1, sort_keys=True) + "\n")
        out.append(path)
        print(f"  {GRAPHS[name][0]} -> {path.relative_to(ROOT)}")
    return out


# ----------------------------------------------------------------------------------------------- the graph's SVG
LANE_W, ROW_H, TOP, HEAD_H = 180, 24, 20, 58
COLOURS = {"forward": "#3949ab", "back": "#00897b", "out": "#757575", "in": "#c62828"}
OUTSIDE = "outside"


def _lanes(graph: dict[str, Any]) -> list[str]:
    """Node order left to right: the robot env (or else the nodes no other node commands) first, then each node one
    lane after the first node that publishes to it (the command path reads left to right), ties in launch order."""
    nodes = [n["name"] for n in graph["nodes"]]
    feeds = {a["name"]: {b["name"] for b in graph["nodes"] if b is not a
                         and set(a["publishes"]) & set(b["subscribes"])} for a in graph["nodes"]}
    env_nodes = [n["name"] for n in graph["nodes"] if n["origin"] == graph["env"]] if graph["env"] else []
    roots = env_nodes or [n for n in nodes if not any(n in feeds[m] for m in nodes)] or nodes[:1]
    level = {r: 0 for r in roots}
    frontier = list(roots)
    while frontier:
        nxt = []
        for a in frontier:
            for b in sorted(feeds[a], key=nodes.index):
                if b not in level:
                    level[b] = level[a] + 1
                    nxt.append(b)
        frontier = nxt
    return sorted(nodes, key=lambda n: (level.get(n, len(nodes)), nodes.index(n)))


def _short(topic: str, namespace: str) -> str:
    return topic[len(namespace) + 1:] if namespace and topic.startswith(namespace + "/") else topic


def _rows(graph: dict[str, Any], lanes: list[str]) -> list[dict[str, Any]]:
    """One row per topic: its publishers' and subscribers' lanes (``len(lanes)`` is the outside lane) and kind."""
    index = {n: i for i, n in enumerate(lanes)}
    topics: dict[str, dict[str, Any]] = {}
    for node in graph["nodes"]:
        for key, side in (("publishes", "pub"), ("subscribes", "sub")):
            for topic, kind in node[key].items():
                row = topics.setdefault(topic, {"topic": topic, "type": kind, "pub": [], "sub": []})
                row[side].append(index[node["name"]])
    rows = []
    for row in topics.values():
        pub, sub = sorted(row["pub"]), sorted(row["sub"])
        if not pub:
            row.update(kind="in", pub=[len(lanes)], sub=sub)
        elif not sub:
            row.update(kind="out", pub=pub, sub=[len(lanes)])
        else:
            row.update(kind="forward" if min(sub) > max(pub) else "back", pub=pub, sub=sub)
        rows.append(row)
    order = {"forward": 0, "back": 1, "out": 2, "in": 3}
    return sorted(rows, key=lambda r: (order[r["kind"]], -r["pub"][0] if r["kind"] == "back" else r["pub"][0],
                                       r["sub"][0], r["topic"]))


def _text(x: float, y: float, text: str, cls: str, anchor: str = "middle") -> str:
    return f'<text x="{x:.0f}" y="{y:.0f}" class="{cls}" text-anchor="{anchor}">{html.escape(text)}</text>'


def render_svg(graph: dict[str, Any]) -> str:
    """The graph as an SVG sequence chart: a lane per node (and one for what is outside the graph), a row per topic
    with an arrow from its publisher to each subscriber, the topic's name and type above the arrow, each node's
    services under its lane. Deterministic: the same JSON gives the same bytes."""
    lanes = _lanes(graph)
    rows = _rows(graph, lanes)
    namespace = graph.get("env_kwargs", {}).get("namespace", "")
    if not namespace:
        spaces = {n["name"].rsplit("/", 1)[0] for n in graph["nodes"]}
        namespace = spaces.pop() if len(spaces) == 1 else ""
    by_name = {n["name"]: n for n in graph["nodes"]}
    width = LANE_W * (len(lanes) + 1)
    body_top = TOP + HEAD_H + 16
    services_y = body_top + ROW_H * len(rows) + 10
    height = services_y + 40 + 40
    x = [LANE_W * (i + 0.5) for i in range(len(lanes) + 1)]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'font-family="-apple-system, BlinkMacSystemFont, \'Segoe UI\', Helvetica, Arial, sans-serif">',
        "<style>"
        ".node{font-size:15px;font-weight:600;fill:#212121}.origin{font-size:11px;fill:#616161}"
        ".topic{font-size:13px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;fill:#212121;"
        "paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}"
        ".type{font-size:11.5px;fill:#616161;paint-order:stroke;stroke:#fff;stroke-width:4px}"
        ".srv{font-size:12px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;fill:#424242}"
        ".legend{font-size:12px;fill:#424242}"
        "</style>",
        '<defs>' + "".join(
            f'<marker id="a-{k}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="{c}"/></marker>'
            for k, c in COLOURS.items()) + "</defs>",
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
    ]
    for i, lane in enumerate([*lanes, OUTSIDE]):
        outside = lane == OUTSIDE
        fill, stroke = ("#fafafa", "#bdbdbd") if outside else ("#e8eaf6", "#3949ab")
        parts.append(f'<line x1="{x[i]:.0f}" y1="{TOP + HEAD_H}" x2="{x[i]:.0f}" y2="{services_y}" stroke="#bdbdbd" '
                     f'stroke-dasharray="4 4"/>')
        parts.append(f'<rect x="{x[i] - LANE_W / 2 + 8:.0f}" y="{TOP}" width="{LANE_W - 16}" height="{HEAD_H}" rx="6" '
                     f'fill="{fill}" stroke="{stroke}"' + (' stroke-dasharray="4 3"' if outside else "") + "/>")
        if outside:
            parts += [_text(x[i], TOP + 24, "outside the graph", "node"),
                      _text(x[i], TOP + 42, "RViz, bags, an e-stop,", "origin"),
                      _text(x[i], TOP + 54, "your own tools", "origin")]
            continue
        node = by_name[lane]
        origin = node["origin"]
        origin_text = (f"{origin.rsplit('/', 1)[-1]}, in the actor" if origin == graph["env"]
                       else origin.removeprefix("launch/"))
        parts += [_text(x[i], TOP + 24, _short(lane, namespace) if namespace else lane, "node"),
                  _text(x[i], TOP + 42, origin_text, "origin"),
                  _text(x[i], TOP + 54, f"namespace {lane.rsplit('/', 1)[0] or '/'}", "origin")]
        services = [_short(s, lane) for s in node["services"]]
        if services:
            parts.append(_text(x[i], services_y + 16, "services", "origin"))
            parts.append(_text(x[i], services_y + 30, ", ".join(services), "srv"))
    for r, row in enumerate(rows):
        y = body_top + ROW_H * r + 16
        colour = COLOURS[row["kind"]]
        ends = row["pub"] + row["sub"]
        left, right = min(ends), max(ends)
        pub = row["pub"][0]
        goes_right = max(row["sub"]) > pub
        anchor, tx = ("start", x[pub] + 8) if goes_right else ("end", x[pub] - 8)
        label = _short(row["topic"], namespace)
        kind = row["type"].rsplit("/", 1)[-1]  # the message's name; its package is in the JSON and on ros2.md
        parts.append(f'<text x="{tx:.0f}" y="{y - 6}" text-anchor="{anchor}"><tspan class="topic">'
                     f'{html.escape(label)}</tspan><tspan class="type" dx="6">{html.escape(kind)}</tspan></text>')
        parts.append(f'<line x1="{x[left]:.0f}" y1="{y}" x2="{x[right]:.0f}" y2="{y}" stroke="{colour}" '
                     'stroke-width="1.6"/>')
        for p in row["pub"]:
            parts.append(f'<circle cx="{x[p]:.0f}" cy="{y}" r="3.5" fill="{colour}"/>')
        for s in row["sub"]:
            towards = 1 if s > pub else -1
            parts.append(f'<line x1="{x[s] - towards * 12:.0f}" y1="{y}" x2="{x[s] - towards * 2:.0f}" y2="{y}" '
                         f'stroke="{colour}" stroke-width="1.6" marker-end="url(#a-{row["kind"]})"/>')
    legend_y = height - 26
    legend = [("forward", "command path"), ("back", "state back"), ("out", "to outside"), ("in", "from outside")]
    lx = 12
    for kind, words in legend:
        parts.append(f'<line x1="{lx}" y1="{legend_y - 4}" x2="{lx + 24}" y2="{legend_y - 4}" '
                     f'stroke="{COLOURS[kind]}" stroke-width="1.6" marker-end="url(#a-{kind})"/>')
        parts.append(_text(lx + 30, legend_y, words, "legend", "start"))
        lx += 46 + 8 * len(words)
    source = graph["launch"] + (f" + the robot env {graph['env']}" if graph["env"] else "")
    parts.append(_text(12, legend_y + 18, f"Read from the live graph of {source} by "
                       "scripts/doc_pictures.py.", "legend", "start"))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def draw_graphs() -> list[Path]:
    out = []
    for path in sorted(IMG.glob("ros2-graph-*.json")):
        svg = path.with_suffix(".svg")
        text = render_svg(json.loads(path.read_text()))
        if not svg.is_file() or svg.read_text() != text:
            svg.write_text(text)
        out.append(svg)
    return out


# ------------------------------------------------------------------------------------------------ the operator view
VIEWER_SIZE = "1400x800"
"""The headless viewer's size in points for its screenshot (one pixel a point): the picture's width x height."""
NOTES: dict[str, str] = {}
"""group -> what made its pictures, when that can differ (``made_by`` in the manifest)."""


def record_operator_view(folder: Path) -> Path:
    """A short human-in-the-loop run whose operator view saves its episodes under ``folder``; the recording of
    the first finished episode in which the (scripted) person took over and labelled a success."""
    from robot_rl.config import from_dict
    from robot_rl.runtime.supervisor import train
    from robot_rl.training.config import TrainConfig
    from robot_rl.view.recording import read_recording

    cfg = from_dict(TrainConfig, {
        "name": "view", "runs_dir": str(folder), "seed": 3, "total_env_steps": 120, "random_steps": 10**6,
        "learning_starts": 10**6, "eval_every": 0, "eval_episodes": 1, "checkpoint_every": 0, "progress": False,
        "env": {"id": "robot_rl/PickCube-v0", "max_episode_steps": 100,
                "kwargs": {"image_size": 96, "terminate_on_success": False}},
        "agent": {"num_critics": 2, "hidden_dims": [32, 32]},
        "replay": {"online_capacity": 1000, "demos_capacity": 10, "interventions_capacity": 1000},
        "runtime": {"processes": False, "spool": False},
        "teleop": {"device": "scripted", "start": "ready",
                   "scripted": {"label": True, "give_up_steps": 90, "max_takeovers": 2, "takeover_steps": 14,
                                "noise": 0.05, "seed": 3}},
        "view": {"enabled": True, "live": "none", "max_queue": 100_000}})
    run_dir, _ = train(cfg)
    for path in sorted((run_dir / "view").glob("episode_*.rrd")):
        rec = read_recording(path)
        events = rec.get("events")
        if events and "the person steers" in events.values and "success (labelled" in events.values[-1]:
            return path
    raise RuntimeError("doc pictures: no episode with a takeover and a success label")


def takeover_frame(path: Path) -> int:
    """The frame the picture shows: three control periods into the person's first takeover (the episode's middle
    without one)."""
    import numpy as np

    from robot_rl.view.recording import read_recording

    person = read_recording(path)["control/person"]
    steer = person.scalars().ravel() > 0
    return int(person.frames[np.argmax(steer)]) + 3 if steer.any() else int(person.frames[len(person) // 2])


def screenshot_operator_view(path: Path, out: Path, timeout_s: float = 60.0) -> str:
    """A screenshot of rerun's own viewer showing the recording at ``path`` at its takeover frame, written to
    ``out``; returns what made it. The viewer runs headless (``rerun --headless``: its offscreen harness, no window
    or display) on a private port; it opens the recording with the layout the view sent (``_blueprint`` in
    ``robot_rl/view/live.py``), is paused at the frame and screenshot through rerun's control API
    (``rerun.experimental.ViewerClient``). Raises when the viewer cannot start (without a Vulkan adapter it panics:
    "Failed to get render context") or does not answer within ``timeout_s``."""
    import contextlib
    import shutil
    import signal
    import socket
    import subprocess

    import rerun
    from PIL import Image
    from rerun.experimental import ViewerClient

    exe = shutil.which("rerun", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if exe is None:
        raise RuntimeError("no rerun executable (the view extra installs it)")
    at = takeover_frame(path)
    with socket.socket() as s:  # a free port: a viewer the user runs on 9876 is left alone
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # RUST_LOG=error: no start-up notices (software rasterizer, adapter) over the views
    env = dict(os.environ, RERUN_APP_ONLY="true", RUST_LOG="error")
    with tempfile.TemporaryFile() as log:
        # a session of its own: the venv's `rerun` is a Python launcher that starts the viewer binary as its child,
        # and both go at the end (signal to the group)
        proc = subprocess.Popen([exe, "--headless", "--bind", "127.0.0.1", "--port", str(port), "--window-size",
                                 VIEWER_SIZE, "--hide-welcome-screen"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

        def failed(why: str) -> RuntimeError:
            log.seek(0)
            lines = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
            said = [line for line in lines if "panicked" in line or "ERROR" in line or "rror:" in line] or lines[-2:]
            return RuntimeError(f"{why}: {' | '.join(said[:2]) or 'no output'}")

        try:
            deadline = time.monotonic() + timeout_s
            viewer = None
            while viewer is None:
                if proc.poll() is not None:
                    raise failed(f"rerun --headless exited ({proc.returncode})")
                if time.monotonic() > deadline:
                    raise failed("rerun --headless did not answer")
                try:
                    viewer = ViewerClient.connect(f"rerun+http://127.0.0.1:{port}/proxy")
                except ConnectionError:
                    time.sleep(0.25)
            viewer.open(str(path))
            while not any(t.name == "frame" and t.end is not None and t.end >= at
                          for r in viewer.get_state().recordings for t in r.timelines):
                if time.monotonic() > deadline:
                    raise failed("the viewer did not load the recording")
                time.sleep(0.25)
            time.sleep(2.0)  # the viewer plays a recording it opens: let it, then seek
            viewer.set_time("frame", sequence=at, play_state="paused")
            time.sleep(2.0)  # a frame or two at the new time
            png = viewer.take_screenshot()
        except ConnectionError as exc:  # the viewer went away: its last words say why
            time.sleep(0.5)
            raise failed(f"the viewer stopped answering ({exc})") from exc
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    # 256 colours: a screenshot of flat panels, ~45 kB instead of ~140 kB (tests/test_docs_pictures.py's limit)
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(out, optimize=True)
    return f"rerun viewer {rerun.__version__} (rerun --headless), frame {at}"


def draw_operator_view(path: Path, out: Path) -> None:
    """The streams of one saved recording as one picture: cameras at the takeover; actions (policy dashed, person
    solid) over frames with the person's control shaded; reward and success; the events."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from robot_rl.view.recording import read_recording

    rec = read_recording(path)
    person = rec["control/person"]
    steer = person.scalars().ravel() > 0
    at = takeover_frame(path)
    fig = plt.figure(figsize=(10, 4.6), dpi=100)
    grid = fig.add_gridspec(3, 3, width_ratios=[1.0, 1.0, 2.6], height_ratios=[1.2, 0.8, 1.0], wspace=0.25,
                            hspace=0.45, left=0.02, right=0.98, top=0.9, bottom=0.08)
    names = {"x": 0, "y": 1, "z": 2, "gripper": 3}
    for col, camera in enumerate(("front", "wrist")):
        series = rec[f"camera/{camera}"]
        ax = fig.add_subplot(grid[0:2, col])
        ax.imshow(series.values[int(np.searchsorted(series.frames, at))])
        ax.set_title(f"camera/{camera} (frame {at})", fontsize=9)
        ax.axis("off")

    def shade(ax) -> None:  # noqa: ANN001 - a matplotlib axis
        for f, on in zip(person.frames, steer, strict=True):
            if on:
                ax.axvspan(f - 0.5, f + 0.5, color="#f2c14e", alpha=0.35, lw=0)
        ax.axvline(at, color="0.4", lw=0.8, ls=":")
        ax.tick_params(labelsize=7)

    ax = fig.add_subplot(grid[0, 2])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for name, dim in names.items():
        for stream, style in (("action/policy", "--"), ("action/person", "-")):
            series = rec[stream]
            ax.plot(series.frames, series.scalars()[:, dim], style, color=colors[dim], lw=1.0,
                    label=name if stream == "action/person" else None)
    shade(ax)
    ax.set_title("actions: policy (dashed), person (solid); shaded: the person steers", fontsize=9)
    ax.legend(fontsize=7, ncol=4, loc="lower left")
    ax = fig.add_subplot(grid[1, 2], sharex=ax)
    for stream, color, style in (("reward", "#3b7dd8", "-"), ("success", "#2a9d5c", "--")):
        ax.step(rec[stream].frames, rec[stream].scalars().ravel(), style, where="mid", color=color, lw=1.2,
                label=stream)
    shade(ax)
    ax.set_title("reward and success", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_xlabel("frame (control period)", fontsize=8)
    ax = fig.add_subplot(grid[2, :])
    ax.axis("off")
    lines = [f"frame {f:>3}:  {text}" for f, text in zip(rec["events"].frames, rec["events"].values, strict=True)]
    ax.text(0.0, 1.0, "events\n" + "\n".join(lines), family="monospace", fontsize=7.5, va="top")
    progress = rec.get("progress/env_steps")
    if progress is not None:
        ax.text(0.55, 1.0, f"run progress at the episode's end: {int(progress.scalars().ravel()[-1])} env steps",
                fontsize=7.5, va="top")
    fig.suptitle("The operator view of one training episode, drawn from its saved recording", fontsize=11)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def make_operator_view() -> list[Path]:
    """rerun's viewer's screenshot of the recording; where the viewer cannot run, the matplotlib drawing."""
    out = IMG / "operator-view.png"
    with tempfile.TemporaryDirectory() as tmp:
        path = record_operator_view(Path(tmp))
        try:
            NOTES["operator-view"] = screenshot_operator_view(path, out)
        except Exception as exc:  # noqa: BLE001 - any failure of the viewer: the drawing instead
            print(f"  rerun's viewer did not run here ({exc}); drawn with matplotlib instead", file=sys.stderr)
            draw_operator_view(path, out)
            NOTES["operator-view"] = f"matplotlib (rerun's viewer did not run: {str(exc)[:200]})"
    print(f"  -> {out.relative_to(ROOT)} ({out.stat().st_size // 1024} KB, {NOTES['operator-view']})")
    return [out]


# ---------------------------------------------------------------------------------------------------- the curves
def _result(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "benchmarks/results" / f"{name}.json").read_text())


def seed_curves(record: dict[str, Any]) -> dict[int, list[tuple[int, float]]]:
    """seed -> ``[(env step, eval success)]`` of a training result whose ``figures.seeds.<seed>.success`` maps the
    env step of each evaluation to its success (``benchmarks/pickcube_default.py``)."""
    return {int(seed): sorted((int(step), float(s)) for step, s in body["success"].items())
            for seed, body in sorted(record["figures"]["seeds"].items(), key=lambda item: int(item[0]))}


def finetune_curves(records: list[dict[str, Any]]) -> tuple[str, str, dict[int, list[tuple[int, float]]], float]:
    """The task, the method, seed -> ``[(env step, eval success)]`` and the base's mean success alone of the runs of
    ``benchmarks/finetune.py`` (one method each; several files are several seeds of the same method)."""
    tasks, methods, curves, bases = set(), set(), {}, []
    for record in records:
        figures = record["figures"]
        tasks.add(figures["task"])
        for entry in figures["methods"]:
            methods.add(entry["method"])
            seeds = entry.get("seeds", figures["seeds"])
            curves |= {int(seed): [(int(step), float(s)) for step, s in curve]
                       for seed, curve in zip(seeds, entry["curves"], strict=True)}
            bases += [float(b) for b in entry["bases"]]
    if len(tasks) != 1 or len(methods) != 1:
        raise ValueError(f"one picture is one task and one method, not {sorted(tasks)} x {sorted(methods)}")
    return tasks.pop(), methods.pop(), dict(sorted(curves.items())), sum(bases) / len(bases)


def _seeds_text(seeds: list[int]) -> str:
    """``[0, 1, 2]`` -> ``seeds 0-2``; ``[0, 2]`` -> ``seeds 0, 2``."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds))


def _curve_axes(title: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    size, dpi = CURVE_SIZE
    fig, ax = plt.subplots(figsize=size, dpi=dpi, layout="constrained")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("env steps", fontsize=9)
    ax.set_ylabel("eval success (%)", fontsize=9)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)
    return fig, ax


def _save(fig: Any, path: Path, last_step: int) -> None:
    """The x axis from 0 to the last evaluation, the legend, and saved without the matplotlib version in its
    metadata: the same data gives the same bytes."""
    import matplotlib.pyplot as plt

    ax = fig.axes[0]
    ax.set_xlim(0, last_step * 1.02)
    ax.legend(fontsize=8, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=CURVE_SIZE[1], metadata={"Software": None})
    plt.close(fig)


def _target(ax: Any, target: float | None) -> None:
    if target is not None:
        ax.axhline(target, color="0.35", ls="--", lw=1.0, label=f"target: {target:.0%}")


def draw_learning_curve(record: dict[str, Any], title: str, target: float | None, path: Path) -> None:
    """One line per seed of eval success over env steps, and the target."""
    fig, ax = _curve_axes(title)
    curves = seed_curves(record)
    for seed, curve in curves.items():
        steps, success = zip(*curve, strict=True)
        ax.plot(steps, success, marker="o", ms=3.5, lw=1.4, label=f"seed {seed}")
    _target(ax, target)
    _save(fig, path, max(curve[-1][0] for curve in curves.values()))


def draw_finetune_curve(records: list[dict[str, Any]], target: float | None, path: Path) -> None:
    """The fine-tuned policy's eval success over env steps, a line per seed, beside its base alone (the mean over
    the seeds' bases, as a horizontal line) and the target."""
    task, method, curves, base = finetune_curves(records)
    name = METHOD_NAMES.get(method, method)
    fig, ax = _curve_axes(f"{task}: fine-tuning the VLA base with {name}, {len(curves)} seeds")
    for i, curve in enumerate(curves.values()):
        steps, success = zip(*curve, strict=True)
        ax.plot(steps, success, color="#1f77b4", marker="o", ms=3, lw=1.1, alpha=0.75,
                label=f"{name}, {_seeds_text(sorted(curves))} (a line each)" if i == 0 else None)
    ax.axhline(base, color="#d62728", ls="-", lw=1.6, label=f"the base alone: {base:.0%} (mean of the seeds)")
    _target(ax, target)
    _save(fig, path, max(curve[-1][0] for curve in curves.values()))


def make_curves() -> list[Path]:
    out = []
    for picture, (kind, names, target) in CURVES.items():
        path = IMG / "curves" / picture
        records = [_result(name) for name in names]
        if kind == "training":
            (record,) = records
            draw_learning_curve(record, "Default PickCube job (robot-rl train pickcube): eval success per seed",
                                target, path)
        else:
            draw_finetune_curve(records, target, path)
        out.append(path)
        print(f"  {', '.join(names)} -> {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")
    return out


# ------------------------------------------------------------------------------------------------------ the runner
GROUPS = {"tasks": make_tasks, "rollouts": make_rollouts, "policy": make_policy, "ros2-graph": make_graphs,
          "operator-view": make_operator_view, "curves": make_curves}


def inputs_hash(group: str) -> str:
    """sha256 over the paths and contents of the group's input files and of this script."""
    files = sorted({p for pattern in GROUP_INPUTS[group] for p in ROOT.glob(pattern)} | {Path(__file__).resolve()})
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _available(group: str) -> str:
    """Why ``group`` cannot be rendered here, or ""."""
    try:
        if group == "curves":
            import matplotlib  # noqa: F401

            return ""
        if group == "ros2-graph":
            import rclpy  # noqa: F401
        if group == "operator-view":
            import rerun  # noqa: F401
        import mujoco  # noqa: F401
    except ImportError as e:
        return f"{e.name} is not installed"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="re-render every group, changed inputs or not")
    parser.add_argument("--only", choices=sorted(GROUPS), action="append", help="only this group (repeatable)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    groups = manifest.setdefault("groups", {})
    for group, make in GROUPS.items():
        if args.only and group not in args.only:
            continue
        digest = inputs_hash(group)
        if not args.force and groups.get(group, {}).get("inputs") == digest:
            continue
        missing = _available(group)
        if missing:
            print(f"doc pictures: {group} not re-rendered ({missing}); its pictures are kept", file=sys.stderr)
            continue
        print(f"doc pictures: {group} ({'forced' if args.force else 'its inputs changed'})")
        files = make()
        groups[group] = {"inputs": digest, "files": sorted(str(p.relative_to(IMG)) for p in files)}
        if group in NOTES:
            groups[group]["made_by"] = NOTES[group]
        MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    draw_graphs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
