"""Nested state (dicts/lists of tensors, arrays and plain values) <-> one safetensors file, atomically.

Tensors go into the safetensors payload; the tree structure and the non-tensor leaves go into its JSON
metadata. Nothing is pickled, so loading a file from an untrusted source cannot run code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from robot_rl.utils.disk import naming


def _encode(node: Any, tensors: dict[str, torch.Tensor], path: str) -> Any:
    if isinstance(node, torch.Tensor):
        tensors[path] = node.detach().cpu().contiguous()
        return {"__t__": path}
    if isinstance(node, np.ndarray):
        tensors[path] = torch.from_numpy(np.ascontiguousarray(node))
        return {"__np__": path}
    if isinstance(node, dict):
        return {"__d__": [[_key(k), _encode(v, tensors, f"{path}/{k}")] for k, v in node.items()]}
    if isinstance(node, (list, tuple)):
        return {"__l__": [_encode(v, tensors, f"{path}/{i}") for i, v in enumerate(node)]}
    if isinstance(node, (np.integer, np.floating, np.bool_)):
        return node.item()
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    raise TypeError(f"cannot store {type(node).__name__} at {path!r}")


def _key(k: Any) -> Any:
    if not isinstance(k, (str, int)):
        raise TypeError(f"dict keys must be str or int, got {k!r}")
    return k


def _decode(node: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(node, dict):
        if "__t__" in node:
            return tensors[node["__t__"]]
        if "__np__" in node:
            return tensors[node["__np__"]].numpy()
        if "__d__" in node:
            return {k: _decode(v, tensors) for k, v in node["__d__"]}
        if "__l__" in node:
            return [_decode(v, tensors) for v in node["__l__"]]
    return node


def atomic_write(path: Path, write: Any) -> None:
    """Calls ``write(tmp_path)``, fsyncs, then renames over ``path`` so readers see old or new, never half (also
    after a power loss); a failed write (e.g. a full disk) leaves no temporary file behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming(path):
            write(tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def fsync_tree(root: Path) -> None:
    """fsyncs every file and folder under ``root`` (a checkpoint before it is renamed into place: after a power
    loss, the checkpoint ``latest`` names holds what was written, and the spool chunks it replaced are not needed)."""
    for folder, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_state(path: str | Path, state: Any) -> None:
    """Writes a nested state to ``path`` (safetensors) atomically."""
    tensors: dict[str, torch.Tensor] = {}
    tree = _encode(state, tensors, "")
    atomic_write(Path(path), lambda tmp: save_file(tensors, str(tmp), metadata={"tree": json.dumps(tree)}))


def load_state(path: str | Path) -> Any:
    """Reads a state written by :func:`save_state`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no state file at {path}")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if "tree" not in meta:
        raise ValueError(f"{path} is a safetensors file without robot_rl state metadata")
    return _decode(json.loads(meta["tree"]), load_file(str(path)))
