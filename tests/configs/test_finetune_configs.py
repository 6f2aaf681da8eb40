"""The bundled fine-tuning configs (robot_rl/configs/finetune_*.yaml) are the recipes of the generalist-policies
results page as ``robot-rl train`` jobs: for every ``benchmarks/finetune.py`` command in the page's "recipes" section
and each of its seeds, the TrainConfig finetune.py builds (its own ``train_config``) equals the bundled config loaded
by name with ``--seed N``, field by field, except the fields listed in ``BY_DESIGN``; each config names the page's
``robot-rl train-bc`` command of its base, and the page shows ``robot-rl train <name>`` beside its command. Without
the base, ``robot-rl train <name>`` stops before anything starts with one message naming the base and that command;
with a base made by that command (shrunk to one demo per dataset and two gradient steps), the config passes the whole
preflight."""

from __future__ import annotations

import dataclasses
import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from robot_rl.cli import bundled_configs, resolve_config
from robot_rl.config import ConfigError, parse, replace, to_dict
from robot_rl.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "benchmarks/pages/generalist-policies.md"
SECTION = "## The recipes that meet the targets"
BY_DESIGN = {
    "name": "finetune.py names each run <method>-<seed>; robot-rl train names it <env id>-<date>-<time>",
    "runs_dir": "finetune.py writes into its --runs-dir (a temporary folder by default); robot-rl train into runs/",
    "progress": "finetune.py's runs are child processes writing logs; robot-rl train shows its progress",
    "base_policy.made_by": "only said when the base is missing; finetune.py does not know the base's command",
}


def commands(text: str, start: str = "") -> list[list[str]]:
    """The commands of shell text (continuation lines joined, comments left out) that begin with ``start``, as argv
    lists."""
    lines = [line.strip() for line in re.sub(r"\\\n\s*", " ", text).splitlines()]
    return [shlex.split(line) for line in lines if line.startswith(start) and line and not line.startswith("#")]


def page_blocks() -> list[list[list[str]]]:
    """The commands of each ```bash block of the page's recipes section."""
    section = PAGE.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [commands(block) for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def page_commands() -> list[list[str]]:
    return [argv for block in page_blocks() for argv in block]


def finetune_module() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))  # finetune.py imports its neighbours (common, finetune_tables)
    try:
        return importlib.import_module("finetune")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def recipes() -> dict[str, list[str]]:
    """Bundled config name -> the page's finetune.py arguments (``finetune_<task>_<method>``, one method each)."""
    out = {}
    for argv in page_commands():
        if argv[:2] == ["python", "benchmarks/finetune.py"]:
            args = finetune_module().build_parser().parse_args(argv[2:])
            assert len(args.methods) == 1, f"a recipe is one method: {shlex.join(argv)}"
            out[f"finetune_{args.task.lower()}_{args.methods[0]}"] = argv[2:]
    return out


def base_commands() -> dict[str, list[str]]:
    """The base's folder (train-bc's ``--out``) -> the page's train-bc arguments."""
    out = {}
    for argv in page_commands():
        if argv[:2] == ["robot-rl", "train-bc"]:
            out[argv[argv.index("--out") + 1]] = argv[2:]
    return out


def flat(data: dict, prefix: str = "") -> dict[str, object]:
    """A nested config dict as dotted field -> value."""
    out: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key != "kwargs":  # env.kwargs is one value (a mapping)
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def differences(ours: TrainConfig, theirs: TrainConfig) -> list[str]:
    """The fields (outside BY_DESIGN) where two configs differ, with both values."""
    a, b = flat(to_dict(ours)), flat(to_dict(theirs))
    assert set(BY_DESIGN) <= set(a), set(BY_DESIGN) - set(a)
    return [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in sorted(set(a) | set(b))
            if k not in BY_DESIGN and a.get(k, KeyError) != b.get(k, KeyError)]


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding every recipe's base at its page path (``policies/<base>``), each made by the page's train-bc
    command with one demo per dataset and two gradient steps: the same env kwargs, cameras and spaces, in seconds."""
    from robot_rl.vla.train import TrainBCConfig, train_bc

    root = tmp_path_factory.mktemp("bases")
    for out, argv in base_commands().items():
        cfg = parse(TrainBCConfig, None, argv)
        small = tuple(":".join([*spec.split(":")[:2], "1", *spec.split(":")[3:]]) for spec in cfg.datasets)
        train_bc(dataclasses.replace(cfg, datasets=small, steps=2, warmup_steps=1, batch_size=8, eval_episodes=0,
                                     threads=0, progress=False, out=str(root / out), demo_dir=str(root / "demos")))
    return root


def test_every_recipe_on_the_page_is_a_bundled_config_and_names_its_base() -> None:
    found = recipes()
    assert len(found) == 3, found
    assert sorted(found) == sorted(name for name in bundled_configs() if name.startswith("finetune_"))
    made_by = base_commands()
    for name, argv in found.items():
        cfg = parse(TrainConfig, resolve_config(name), [])
        base = argv[argv.index("--base") + 1]
        assert cfg.base_policy.path == base and base in made_by, (name, base)
        assert shlex.split(cfg.base_policy.made_by) == ["robot-rl", "train-bc", *made_by[base]], name
        header = "\n".join(line[1:] for line in resolve_config(name).read_text().splitlines() if line.startswith("#"))
        assert ["robot-rl", "train-bc", *made_by[base]] in commands(header, "robot-rl train-bc"), name
        assert f"robot-rl train {name} " in header, f"{name}: its header's command"
        block = next(b for b in page_blocks() if ["python", "benchmarks/finetune.py", *argv] in b)
        assert ["robot-rl", "train", name] in block, f"the page shows {name} beside its finetune.py command"


@pytest.mark.parametrize("name", sorted(recipes()))
def test_a_bundled_recipe_is_the_run_finetune_py_makes_of_the_page_command(name, bases, monkeypatch) -> None:
    """Seed by seed: ``robot-rl train <name> --seed N`` runs what ``finetune.py <the page's command>`` runs as seed
    N (the env kwargs finetune.py reads from the base's policy.json included)."""
    monkeypatch.chdir(bases)  # the page's relative base paths resolve here
    finetune = finetune_module()
    args = finetune.build_parser().parse_args(recipes()[name])
    assert args.seeds[0] == 0
    for seed in args.seeds:
        theirs, per_step = finetune.train_config(args, args.methods[0], seed)
        ours = parse(TrainConfig, resolve_config(name), ["--seed", str(seed)])
        assert per_step == 1
        assert not differences(ours, theirs), (name, seed, differences(ours, theirs))
        assert ours.progress and ours.name == "" and ours.runs_dir == "runs"


@pytest.mark.parametrize("name", sorted(recipes()))
def test_without_its_base_a_recipe_is_refused_naming_the_base_and_its_command(name, tmp_path, monkeypatch) -> None:
    from robot_rl.runtime.preflight import check_run

    monkeypatch.chdir(tmp_path)
    cfg = parse(TrainConfig, resolve_config(name), [])
    with pytest.raises(ConfigError) as err:
        check_run(cfg)
    assert str(err.value) == (f"base_policy.path: {cfg.base_policy.path!r} does not exist: it is neither "
                              "ws://HOST:PORT, lerobot:<type>:<folder> nor a saved policy folder (policy.json); "
                              f"make it first with: {cfg.base_policy.made_by}")


def test_robot_rl_train_says_which_command_makes_the_missing_base(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", "finetune_pickcolor_ibrl"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "'policies/pickcolor_off10_os150' does not exist" in proc.stderr
    assert ("make it first with: robot-rl train-bc --datasets scripted:PickColor:150:0.1 --steps 3000 "
            "--demo-env-kwargs '{\"object_state\": true, \"instruction\": true, \"offset_scale\": 0.01}' "
            "--threads 2 --eval-episodes 50 --out policies/pickcolor_off10_os150") in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists() and "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(recipes()))
def test_with_its_base_a_recipe_passes_the_preflight(name, bases, monkeypatch) -> None:
    """The env, the agent, the base (its spaces against the env's), the demos and the training env all check out:
    the config runs once its base exists."""
    from robot_rl.runtime.preflight import check_run

    monkeypatch.chdir(bases)
    check_run(replace(parse(TrainConfig, resolve_config(name), []), {"runs_dir": str(bases / "runs")}))
