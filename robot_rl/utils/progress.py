"""The one progress bar of robot_rl's long jobs (training, demo recording, reward frames): rich, on stderr,
off with ``enabled=False`` (``--no-progress``) or when stderr is not a terminal's."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from robot_rl.utils.log import console


def progress_bar(enabled: bool = True, info: bool = False) -> Progress:
    """A bar with done/total, elapsed and remaining time; with ``info``, a text column fed by
    ``progress.update(task, info="...")`` (the task must be added with ``info=""``)."""
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn()]
    if info:
        columns.append(TextColumn("{task.fields[info]}"))
    return Progress(*columns, console=console(), disable=not enabled)
