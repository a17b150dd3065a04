"""`bzzz reservations check PATH… --agent ID [--json] [--enforce] [--source S]`.

Asks the running node (``POST /api/v1/reservations/check``) whether the agent may write each
path now. Exit status: 0 when every path is allowed, 1 when one is refused (another agent
holds it exclusively), 2 when the node cannot be reached (or answers as no node would) or the
input is bad before anything is sent, 3 when the node answered but would not check (a
credential it refuses or that may not check as that agent, an agent it does not know, a path
it refuses): a guard refuses on 3 whatever its offline setting, since a node that is there
has said no.

Paths are relative to the repository: inside a git work tree (found from the working
directory, or ``--root``) a path is taken from the working directory as git takes it, and an
absolute path inside the tree is made relative to its root; elsewhere paths are sent as given.
"""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

from bzzz.light import http

TYPE_CHECKING = False  # `typing` itself costs a hook's start time
if TYPE_CHECKING:
    import argparse
    from typing import Any

    Args = argparse.Namespace | SimpleNamespace

EXIT_ALLOWED = 0
EXIT_REFUSED = 1
EXIT_ERROR = 2
EXIT_NOT_CHECKED = 3
SOURCES = ("guard", "hook", "cli", "api")
# The node's bound on one check (reservations.check.MAX_PATHS): larger sets go in batches.
BATCH = 256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The check's arguments (shared by the light entry and `bzzz reservations check`)."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="paths the agent will write")
    parser.add_argument("--agent", required=True, help="the agent that will write them")
    parser.add_argument("--json", action="store_true", help="print the node's answer as JSON")
    parser.add_argument(
        "--enforce",
        action="store_true",
        help="record a reservation_refused event when a path is refused (needs 'write')",
    )
    parser.add_argument("--source", choices=SOURCES, default="cli", help="who asks (default cli)")
    parser.add_argument("--url", help="the node's URL (or BZZZ_URL; default: the running node)")
    parser.add_argument("--token", help="the agent's bearer token (or BZZZ_TOKEN)")
    parser.add_argument(
        "--root", help="the repository's root (default: the git work tree of the directory)"
    )
    parser.add_argument(
        "--timeout", type=float, default=http.TIMEOUT, help="seconds to wait for the node"
    )


def parser() -> argparse.ArgumentParser:
    """The check's own parser (the light entry's: for help and mistakes)."""
    import argparse

    made = argparse.ArgumentParser(
        prog="bzzz reservations check",
        description="May an agent write these paths now? Exit 0: all allowed, 1: one refused, "
        "2: the node cannot be reached or refused the request.",
    )
    add_arguments(made)
    return made


def main(argv: list[str], *, data_dir: str | None = None, config: str | None = None) -> int:
    """Run the check from the command line's words (the light entry's path)."""
    quick = quick_parse(argv)
    if quick is not None:
        return run(quick, data_dir=data_dir, config=config)
    # Help, a mistake, an unusual spelling: argparse says it as for every command.
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_ERROR if exc.code not in (0, None) else 0
    return run(args, data_dir=data_dir, config=config)


_VALUED = {"--agent", "--source", "--url", "--token", "--root", "--timeout"}
_FLAGS = {"--json", "--enforce"}


def quick_parse(argv: list[str]) -> SimpleNamespace | None:
    """The arguments of a well-formed check, read without building argparse's parser (a
    hook's start time); None for anything else (help, an unknown option, a missing value),
    which argparse then reads and answers."""
    values: dict[str, object] = {"json": False, "enforce": False, "source": "cli", "url": None,
                                 "token": None, "root": None, "timeout": http.TIMEOUT}  # fmt: skip
    paths: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            paths.extend(words)
            break
        name, eq, value = word.partition("=")
        if name in _FLAGS and not eq:
            values[name[2:]] = True
        elif name in _VALUED:
            if not eq:
                value = next(words, None)  # type: ignore[assignment]  # None: missing
                if value is None or value.startswith("-"):
                    return None
            values[name[2:]] = value
        elif word.startswith("-"):
            return None
        else:
            paths.append(word)
    if not paths or "agent" not in values or values["source"] not in SOURCES:
        return None
    try:
        values["timeout"] = float(str(values["timeout"]))
    except ValueError:
        return None
    return SimpleNamespace(paths=paths, **values)


def run(args: Args, *, data_dir: str | None, config: str | None) -> int:
    """Ask the node and print its answer; the exit status (2, with one line, whatever fails:
    a hook or a guard reads the status, never a traceback)."""
    try:
        return _run(args, data_dir=data_dir, config=config)
    except KeyboardInterrupt:
        return _fail(args.json, "INTERRUPTED", "interrupted")
    except Exception as exc:  # the command's boundary: a git hook must read a status, not a trace
        return _fail(args.json, "INTERNAL_ERROR", f"the check failed: {type(exc).__name__}: {exc}")


def _run(args: Args, *, data_dir: str | None, config: str | None) -> int:
    try:
        paths = repository_paths(args.paths, args.root)
        base = http.node_url(args.url, data_dir, config)
        answers = [
            http.post_json(
                base,
                "/api/v1/reservations/check",
                {
                    "agent": args.agent,
                    "paths": paths[start : start + BATCH],
                    "enforce": args.enforce,
                    "source": args.source,
                },
                http.node_token(args.token),
                timeout=args.timeout,
            )
            for start in range(0, len(paths), BATCH)
        ]
    except ValueError as exc:
        return _fail(args.json, "INVALID_PARAMETERS", str(exc))
    except http.Refused as exc:
        code = str(exc.answer.get("code") or f"HTTP_{exc.status}")
        # A node's own failure (5xx) is a node away; a 4xx is the node saying no.
        status = EXIT_ERROR if exc.status >= 500 else EXIT_NOT_CHECKED
        return _fail(args.json, code, str(exc), exc.answer.get("details"), status)
    except http.Unreachable as exc:
        return _fail(args.json, "NETWORK_ERROR", str(exc))
    if not all(isinstance(a.get("paths"), list) and isinstance(a.get("allowed"), bool)
               for a in answers):  # fmt: skip
        return _fail(args.json, "NETWORK_ERROR", "the node's answer is not a check's answer")
    answer = dict(answers[0])
    answer["paths"] = [item for part in answers for item in part.get("paths", [])]
    answer["allowed"] = all(part.get("allowed") is True for part in answers)
    if args.json:
        sys.stdout.write(json.dumps(answer) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in describe(answer)))
    return EXIT_ALLOWED if answer["allowed"] else EXIT_REFUSED


def _fail(
    as_json: bool, code: str, message: str, details: Any = None, status: int = EXIT_ERROR
) -> int:
    if as_json:
        shown = {"success": False, "code": code, "error": message, "details": details or {}}
        sys.stdout.write(json.dumps(shown) + "\n")
    sys.stderr.write(f"bzzz: {message}\n")
    return status


def work_tree(start: str) -> str | None:
    """The git work tree holding ``start`` (the nearest folder up with a ``.git``)."""
    here = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def repository_paths(paths: list[str], root: str | None) -> list[str]:
    """The paths relative to the repository's root (ValueError for one outside it)."""
    cwd = os.getcwd()
    top = os.path.abspath(root) if root else work_tree(cwd)
    if top is None:
        return list(paths)
    found = []
    for path in paths:
        if not os.path.isabs(path) and root is None and cwd == top:
            found.append(path)
            continue
        full = os.path.normpath(os.path.join(cwd, path))
        relative = _inside(full, top)
        if relative is None:
            # A symlinked spelling of the same tree (/tmp -> /private/tmp) is still inside.
            relative = _inside(os.path.realpath(full), os.path.realpath(top))
        if relative is None:
            raise ValueError(f"'{path}' is outside the repository {top}")
        found.append(relative)
    return found


def _inside(full: str, top: str) -> str | None:
    relative = os.path.relpath(full, top)
    if relative == os.curdir or relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return None
    return relative.replace(os.sep, "/")


def describe(answer: dict[str, Any]) -> list[str]:
    """The answer as lines a person (or an agent reading a hook's output) reads."""
    agent = answer.get("agent")
    lines = []
    for item in answer.get("paths", []):
        lines.append(_line(agent, item))
        end = item.get("ended")
        if end:
            lines.append(
                f"  note: your reservation {end['reservation_id']} (fencing token "
                f"{end['fencing_token']}) of this path ended: {end['reason']} at {end['ended_at']}"
            )
    refused = sum(1 for item in answer.get("paths", []) if not item.get("allowed"))
    if refused:
        lines.append(
            f"{refused} path(s) refused to agent '{agent}': ask the holder to release them "
            "(bzzz_post to its address), or wait for their expiry"
        )
    return lines


def _line(agent: Any, item: dict[str, Any]) -> str:
    path, holder = item["path"], item.get("holder")
    if not item.get("allowed"):
        assert holder is not None
        return (
            f"REFUSED {path}: held exclusively by agent '{holder['agent']}' (reservation "
            f"{holder['reservation_id']}, fencing token {holder['fencing_token']}, until "
            f"{holder['expires_at']}; its paths: {', '.join(holder['paths'])})"
        )
    if item.get("fencing_token") is not None:
        return (
            f"ok {path}: reserved by '{agent}' (reservation {item['reservation_id']}, fencing "
            f"token {item['fencing_token']}, until {item['expires_at']})"
        )
    if holder is not None:
        return f"ok {path}: shared with agent '{holder['agent']}' (not reserved by '{agent}')"
    return f"ok {path}: not reserved by anyone"
