"""The run folder ``robot-rl train`` writes to: a new one (never over an earlier run) or the one to resume."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from robot_rl.config import ConfigError, save_yaml
from robot_rl.runtime.checkpoint import NoCompleteCheckpoint, has_checkpoint, intact_checkpoint
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import run_key
from robot_rl.training.config import TrainConfig
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


def prepare_run(cfg: TrainConfig, resume_dir: str | Path | None) -> Path:
    """The run folder: a new one (refusing to overwrite a run) or the one to resume; writes config.yaml."""
    cfg.validate()
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        if not (run_dir / "config.yaml").is_file():
            raise FileNotFoundError(f"cannot resume {run_dir}: not a run folder (no config.yaml)")
        if has_checkpoint(run_dir):
            try:  # sizes against each manifest (no file read): nothing to start when no checkpoint is whole
                intact_checkpoint(run_dir, checksums=False)
            except NoCompleteCheckpoint as exc:
                raise ConfigError(f"{exc}; move the damaged folders away to start the learner fresh from the "
                                  f"actors' spools") from None
        else:
            log.info("resuming %s: no checkpoint yet; the agent starts fresh and the replay is rebuilt from the "
                     "actors' spools", run_dir)
    else:
        name = cfg.name or f"{cfg.env.id.replace('/', '_').replace(':', '_')}-{datetime.now():%Y%m%d-%H%M%S}"
        run_dir = Path(cfg.runs_dir) / name
        if (run_dir / "checkpoints").exists() or (run_dir / "config.yaml").exists():
            raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} or another name")
        run_dir.mkdir(parents=True, exist_ok=True)
        stale = shm.unlink_run_shm(run_key(run_dir))  # of an earlier run in a folder since deleted, killed uncleanly
        if stale:
            log.info("removed %d shared-memory segments an earlier run in %s left behind", len(stale), run_dir)
    save_yaml(cfg, run_dir / "config.yaml")
    return run_dir
