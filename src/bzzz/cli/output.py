"""What the `bzzz` read commands print: JSON, or tables that never cut an id.

Every read command renders through here, so each one has ``--json`` (a stable object with a
named list) and the same table rules:

- on a terminal a table fits the width: long text wraps inside its column, while ids,
  addresses and URLs ("whole" columns) are never broken or cut. When the whole columns do not
  fit side by side, the records are printed as a list instead, one ``field: value`` per line;
- piped, a table is printed at its natural width (never wrapped) and without colour codes.

Long operations show a progress bar on stderr, and only when stderr is a terminal.

rich is imported by the functions that draw: `bzzz --help` never loads it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# A piped table is as wide as it needs to be: no terminal decides its width.
PIPED_WIDTH = 1_000_000
# The narrowest a wrapping column may get in a table before the list layout reads better.
MIN_WRAP_WIDTH = 12


@dataclass(frozen=True, slots=True)
class Column:
    """A table column; ``whole`` ones (ids, addresses, URLs) are never wrapped or cut."""

    name: str
    whole: bool = False
    justify: str = "left"


def json_flag(parser: argparse.ArgumentParser, shape: str) -> None:
    """The ``--json`` option of a command, its help naming the object it prints."""
    parser.add_argument("--json", action="store_true", help=f"print JSON: {shape}")


def console(file: IO[str] | None = None) -> Console:
    """A console for ``file`` (stdout): colour only on a terminal, unbounded width when piped."""
    from rich.console import Console

    stream = file or sys.stdout
    if stream.isatty():
        return Console(file=stream, highlight=False)
    return Console(file=stream, width=PIPED_WIDTH, color_system=None, highlight=False)


def print_json(data: Any, file: IO[str] | None = None) -> None:
    """Write ``data`` as indented JSON and a newline (ISO times, no colour, nothing else)."""
    (file or sys.stdout).write(json.dumps(data, indent=2, default=str) + "\n")


def _fits(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> bool:
    need = 1 + 3 * len(columns)  # borders and padding
    for i, column in enumerate(columns):
        longest = max([len(column.name), *(_widest_line(row[i]) for row in rows)])
        need += longest if column.whole else min(longest, MIN_WRAP_WIDTH)
    return need <= width


def _widest_line(cell: str) -> int:
    return max((len(line) for line in cell.split("\n")), default=0)


def _table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    for i, column in enumerate(columns):
        if column.whole:
            longest = max([len(column.name), *(_widest_line(row[i]) for row in rows)])
            table.add_column(
                column.name,
                no_wrap=True,
                min_width=longest,
                justify=column.justify,  # type: ignore[arg-type]
            )
        else:
            table.add_column(column.name, overflow="fold", justify=column.justify)  # type: ignore[arg-type]
    for row in rows:
        # Text, not markup: a value holding "[...]" is shown as it is.
        table.add_row(*(Text(cell) for cell in row))
    return table


def _as_list(
    out: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]
) -> None:
    from rich.text import Text

    out.print(Text(title, style="bold"), soft_wrap=True)
    for row in rows:
        out.print("", soft_wrap=True)
        for column, cell in zip(columns, row, strict=True):
            lines = cell.split("\n") if cell else [""]
            out.print(Text(f"{column.name}: {lines[0]}"), soft_wrap=True)
            for line in lines[1:]:
                out.print(Text(f"  {line}"), soft_wrap=True)
    if not rows:
        out.print("(none)", soft_wrap=True)


def print_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    out: Console | None = None,
) -> None:
    """A table that fits, or the same records as a list when the whole columns do not."""
    out = out or console()
    if out.is_terminal and not _fits(columns, rows, out.width):
        _as_list(out, title, columns, rows)
        return
    out.print(_table(title, columns, rows))


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Any]:
    """A progress bar on stderr when it is a terminal; otherwise nothing is shown.

    Yields an ``update(completed, total=None, description=None)`` callable.
    """
    err = sys.stderr
    if not err.isatty():
        yield lambda *_args, **_kwargs: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=err),
        transient=True,
    )
    with bar:
        task = bar.add_task(description, total=total)

        def update(
            completed: int, total: int | None = None, description: str | None = None
        ) -> None:
            changes: dict[str, Any] = {"completed": completed}
            if total is not None:
                changes["total"] = total
            if description is not None:
                changes["description"] = description
            # A new stage is drawn at once: it may be over before the next timed refresh.
            bar.update(task, refresh=description is not None, **changes)

        yield update
