"""The `bzzz` executable: the light commands run here, every other one in ``bzzz.cli``.

`bzzz reservations check …` and `bzzz hooks run …` run before a write (a git hook, an agent
runner's hook), many times a minute: importing the whole CLI (its parser, asyncio, the
settings) would cost most of its time budget, so this entry recognizes them first and imports
only ``bzzz.light``. The global options ``--data-dir`` and ``--config`` may come before them,
as for any command.
"""

from __future__ import annotations

import sys

_GLOBALS = ("--data-dir", "--config")


def _split(argv: list[str]) -> tuple[list[str], dict[str, str]] | None:
    """The words after the global options, and those options (None: an option lacks its value)."""
    options: dict[str, str] = {}
    index = 0
    while index < len(argv):
        word = argv[index]
        name, eq, value = word.partition("=")
        if name not in _GLOBALS:
            break
        if not eq:
            if index + 1 >= len(argv):
                return None
            value = argv[index + 1]
            index += 1
        options[name[2:].replace("-", "_")] = value
        index += 1
    return argv[index:], options


def _light(argv: list[str]) -> tuple[list[str], dict[str, str]] | None:
    """The check's own words and the global options before them; None: not a light command."""
    split = _split(argv)
    if split is None or split[0][:2] != ["reservations", "check"]:
        return None
    return split[0][2:], split[1]


def _hooks(argv: list[str]) -> tuple[list[str], dict[str, str]] | None:
    """`bzzz hooks run`'s own words and the global options; None: not that command."""
    split = _split(argv)
    if split is None or split[0][:2] != ["hooks", "run"]:
        return None
    return split[0][2:], split[1]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bzzz` command."""
    words = sys.argv[1:] if argv is None else argv
    light = _light(words)
    if light is not None:
        from bzzz.light import check

        rest, options = light
        return check.main(rest, data_dir=options.get("data_dir"), config=options.get("config"))
    hook = _hooks(words)
    if hook is not None:
        from bzzz.light import hooks

        rest, options = hook
        return hooks.main(rest, data_dir=options.get("data_dir"), config=options.get("config"))
    from bzzz.cli import main as cli_main

    return cli_main(words)


if __name__ == "__main__":
    sys.exit(main())
