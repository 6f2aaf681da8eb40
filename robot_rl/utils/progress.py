"""The one progress display of robot_rl's long jobs (training, demo recording, reward frames): a rich bar on
stderr when stderr is a terminal; otherwise (nohup, a job scheduler, CI logs) a plain log line every
``every_s`` seconds through the logging module; nothing with ``enabled=False`` (``--no-progress``)."""

from __future__ import annotations

import time
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from robot_rl.utils.log import console, get_logger

log = get_logger("robot_rl.progress")


def _clock(seconds: float) -> str:
    s = int(max(0.0, seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class PlainProgress:
    """The part of rich's ``Progress`` API robot_rl uses (``add_task``, ``update``, a context manager), written as
    one log line per task every ``every_s`` seconds and once at the end: ``train 1500/10000 (15%) elapsed 0:02:01
    left 0:11:26 | <info>``. Lines are never cut to a width."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.tasks: dict[int, dict[str, Any]] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for task in self.tasks.values():
            if task["dirty"]:
                self._emit(task)

    def add_task(self, description: str, total: float | None = None, completed: float = 0.0, **fields: Any) -> int:
        """``completed``: what was done before this process started (a resumed run): the rate and the time left
        count only what is done from here."""
        now = time.monotonic()
        task_id = len(self.tasks)
        self.tasks[task_id] = {"description": description, "total": total, "completed": completed, "base": completed,
                               "fields": fields, "start": now, "last": now, "dirty": False}
        return task_id

    def update(self, task_id: int, *, completed: float | None = None, advance: float | None = None,
               total: float | None = None, description: str | None = None, **fields: Any) -> None:
        task = self.tasks[task_id]
        if completed is not None:
            task["completed"] = completed
        if advance is not None:
            task["completed"] += advance
        if total is not None:
            task["total"] = total
        if description is not None:
            task["description"] = description
        task["fields"].update(fields)
        task["dirty"] = True
        if time.monotonic() - task["last"] >= self.every_s:
            self._emit(task)

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def line(self, task: dict[str, Any]) -> str:
        done, total = task["completed"], task["total"]
        elapsed = time.monotonic() - task["start"]
        text = f"{task['description']} {done:.0f}"
        if total:
            text += f"/{total:.0f} ({100 * done / total:.0f}%)"
        text += f" elapsed {_clock(elapsed)}"
        if total and task["base"] < done < total:
            text += f" left {_clock(elapsed * (total - done) / (done - task['base']))}"
        info = task["fields"].get("info")
        return f"{text} | {info}" if info else text

    def _emit(self, task: dict[str, Any]) -> None:
        task["last"], task["dirty"] = time.monotonic(), False
        log.info("%s", self.line(task))


def progress_bar(enabled: bool = True, info: bool = False, every_s: float = 15.0) -> Progress | PlainProgress:
    """A bar with done/total, elapsed and remaining time; with ``info``, a text column fed by
    ``progress.update(task, info="...")`` (the task must be added with ``info=""``). When stderr is not a
    terminal: :class:`PlainProgress` lines every ``every_s`` seconds instead."""
    if enabled and not console().is_terminal:
        return PlainProgress(every_s)
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn()]
    if info:
        columns.append(TextColumn("{task.fields[info]}"))
    return Progress(*columns, console=console(), disable=not enabled)
