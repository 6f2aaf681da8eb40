"""The transition's fields are declared once (robot_rl/replay/rows.py): no other function of robot_rl takes them as
parameters of its own, and no other module lists them."""

from __future__ import annotations

import ast
from pathlib import Path

from robot_rl.replay.rows import FIELDS, TRANSITION_DEFAULTS

ROOT = Path(__file__).resolve().parents[2] / "robot_rl"
OWNER = ROOT / "replay" / "rows.py"
META = set(TRANSITION_DEFAULTS)
ROW_ONLY = {"next_row", "valid", "stream", "action", "reward", "terminated", "truncated"}


def second_declarations(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == OWNER:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
                if len(names & META) >= 3:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}({sorted(names & META)})")
            elif isinstance(node, ast.Dict | ast.Tuple | ast.List | ast.Set):
                keys = node.keys if isinstance(node, ast.Dict) else node.elts
                listed = {k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                if len(listed & (META | ROW_ONLY)) >= 8:  # a declaration lists them nearly all; a reader picks a few
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} lists {sorted(listed)}")
    return found


def test_the_transition_is_declared_once():
    assert set(TRANSITION_DEFAULTS) - {"base_action"} <= set(FIELDS)
    assert second_declarations() == []


def test_the_check_finds_a_second_declaration(tmp_path):
    """The scan is not blind: a function taking the fields as its own parameters, and a table of them, are found."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "probe.py").write_text(
        "def add(obs, *, source='online', episode_id=0, step=0, policy_version=0):\n    pass\n\n\n"
        "SPECS = {'reward': 1, 'terminated': 1, 'truncated': 1, 'source': 1, 'step': 1, 'episode_id': 1,"
        " 'next_row': 1, 'valid': 1}\n")
    found = second_declarations(tmp_path / "pkg")
    assert len(found) == 2 and "add(" in found[0] and "lists" in found[1]
