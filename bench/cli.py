"""How long the `bzzz` command takes to answer, command by command.

Each command runs as a user runs it: the `bzzz` console script beside this Python, a fresh
process, stdout piped. The bench makes a temporary data directory, starts `bzzz serve` there
(an idle node: embedded nats-server, SQLite) and times, side by side:

- ``bzzz --help`` and ``bzzz <command> --help`` for every command of the parser;
- the read commands against that data directory (token list, keys list, subscriptions list,
  audit list/verify, metrics, ...);
- the changes through the idle running node: ``token create``, ``token revoke``, ``node admit``
  (each run admits a fresh key; the data directory's own key is admitted first, untimed).

Figures are wall-clock seconds per run (median, p90, min, max over ``--runs`` runs) and the
CPU seconds of the command's process (user + system, median): on a shared machine the CPU
figure moves less with the load than the wall clock. With ``--before FILE`` (the JSON of an
earlier run) the earlier medians are printed beside the new.

    .venv/bin/python bench/cli.py [--runs 7] [--json bench/results/cli.json]
                                  [--before bench/results/cli-before.json]

To measure an older version of the code, put its source tree first on the path, e.g.
``git archive <commit> src/bzzz | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src …``. With
``--against /tmp/old/src`` one run measures both, each command's runs alternating between the
two versions, so that both see the same load (the figures land under ``results`` and
``against``; the served node is this version's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchutil import code_version, machine, percentile

NAN = float("nan")
BZZZ = str(Path(sys.executable).parent / "bzzz")
READS = [
    ["token", "list"],
    ["token", "list", "--json"],
    ["keys", "list"],
    ["subscriptions", "list"],
    ["subscriptions", "list", "--json"],
    ["audit", "list"],
    ["audit", "verify"],
    ["metrics"],
    ["metrics", "--json"],
    ["webhooks"],
    ["escalations"],
    ["slurp"],
    ["costs"],
    ["identity"],
    ["peers"],
    ["node", "list"],
    ["config", "show"],
    ["status"],
    ["status", "--json"],
    ["agents"],
    ["agents", "--json"],
    ["threads", "--json"],
    ["tasks", "--json"],
]


def _commands() -> list[str]:
    """Every command of the parser, as `bzzz --help` lists them."""
    done = subprocess.run([BZZZ, "--help"], capture_output=True, text=True, check=True)
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            return line.strip("{}").split(",")
    raise SystemExit("bzzz --help lists no commands")


def _env(data_dir: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env.update(BZZZ_DATA_DIR=str(data_dir), BZZZ_HTTP_PORT=str(port), COLUMNS="120")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _run(env: dict[str, str], args: list[str]) -> tuple[tuple[float, float], str]:
    """((wall seconds, CPU seconds), stdout) of one `bzzz …`, which must succeed."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [BZZZ, *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bzzz {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return (took, _children_cpu() - cpu), done.stdout


def _figures(runs: list[tuple[float, float]]) -> dict[str, float]:
    ordered = sorted(wall for wall, _ in runs)
    return {
        "median": round(statistics.median(ordered), 3),
        "p90": round(percentile(ordered, 90), 3),
        "min": round(ordered[0], 3),
        "max": round(ordered[-1], 3),
        "cpu_median": round(statistics.median(cpu for _, cpu in runs), 3),
        "runs": len(ordered),
    }


@contextlib.contextmanager
def _served(env: dict[str, str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """`bzzz serve` on the data directory, until /healthz answers; stopped (SIGTERM) after."""
    log = open(Path(env["BZZZ_DATA_DIR"]).parent / "serve.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([BZZZ, "serve"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"bzzz serve exited with {proc.returncode}: see {log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("bzzz serve did not answer /healthz in 120 s") from None
                time.sleep(0.2)  # a bench polls a process it does not own the events of
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _public_key(root: Path, n: int) -> str:
    """A fresh node key (``bzzz identity`` of a new data directory)."""
    from bzzz.network.identity import NodeIdentity

    return NodeIdentity.load_or_create(root / f"other-{n}").public_key_b64


Versions = list[dict[str, str]]  # one environment per measured version of the code


def _time(envs: Versions, args: list[str], runs: int) -> list[dict[str, float]]:
    """Figures of `bzzz ARGS` per version, the versions' runs alternating."""
    taken: list[list[tuple[float, float]]] = [[] for _ in envs]
    for _ in range(runs):
        for i, env in enumerate(envs):
            taken[i].append(_run(env, args)[0])
    return [_figures(t) for t in taken]


def _changes(envs: Versions, root: Path, runs: int) -> list[dict[str, dict[str, float]]]:
    created: list[list[tuple[float, float]]] = [[] for _ in envs]
    revoked: list[list[tuple[float, float]]] = [[] for _ in envs]
    admitted: list[list[tuple[float, float]]] = [[] for _ in envs]
    ids: list[list[str]] = [[] for _ in envs]
    for n in range(runs):
        for i, env in enumerate(envs):
            took, out = _run(env, ["token", "create", f"b{i}-{n}", "--project", "bench", "--json"])
            created[i].append(took)
            ids[i].append(json.loads(out.strip().splitlines()[-1])["id"])
    for n in range(runs):
        for i, env in enumerate(envs):
            revoked[i].append(_run(env, ["token", "revoke", ids[i][n]])[0])
    own = _run(envs[0], ["identity", "--json"])[1]
    _run(envs[0], ["node", "admit", json.loads(own)["public_key"]])
    for n in range(runs):
        for i, env in enumerate(envs):
            admitted[i].append(_run(env, ["node", "admit", _public_key(root, n * 10 + i)])[0])
    return [
        {
            "token create": _figures(created[i]),
            "token revoke": _figures(revoked[i]),
            "node admit": _figures(admitted[i]),
        }
        for i in range(len(envs))
    ]


def _versions(env: dict[str, str], against: Path | None) -> Versions:
    if against is None:
        return [env]
    return [env, env | {"PYTHONPATH": str(against)}]


GROUPS = ("help", "reads", "changes")


def measure(
    runs: int, against: Path | None = None, groups: tuple[str, ...] = GROUPS
) -> list[dict[str, Any]]:
    """Every figure of one run of the bench, per version (this one, then ``against``)."""
    results: list[dict[str, Any]] = [
        {"help": {}, "reads": {}, "changes": {}} for _ in _versions({}, against)
    ]
    if "reads" in groups or "changes" in groups:
        _measure_served(results, runs, against, groups)
    if "help" in groups:
        plain = _versions(dict(os.environ), against)
        for words in [["--help"], *([c, "--help"] for c in _commands())]:
            for i, figures in enumerate(_time(plain, words, runs)):
                results[i]["help"][" ".join(words)] = figures
    return results


def _measure_served(
    results: list[dict[str, Any]], runs: int, against: Path | None, groups: tuple[str, ...]
) -> None:
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-cli-") as tmp:
        root = Path(tmp)
        port = _free_port()
        envs = _versions(_env(root / "data", port), against)
        with _served(envs[0], port):
            # Changes first: the reads then see the tokens and the admitted nodes they made.
            if "changes" in groups:
                for i, figures in enumerate(_changes(envs, root, runs)):
                    results[i]["changes"] = figures
            if "reads" in groups:
                for args in READS:
                    for i, figures in enumerate(_time(envs, args, runs)):
                        results[i]["reads"][" ".join(args)] = figures


def _show(results: dict[str, Any], before: dict[str, Any] | None) -> None:
    head = f"{'command':34} {'median':>8} {'p90':>8} {'min':>8} {'max':>8} {'cpu':>8}"
    if before is not None:
        head += f" {'before':>8} {'b. p90':>8} {'b. cpu':>8}"
    for group in GROUPS:
        if not results[group]:
            continue
        print(f"\n{group} (seconds)\n{head}")
        for name, f in results[group].items():
            figures = (f["median"], f["p90"], f["min"], f["max"], f.get("cpu_median", NAN))
            line = f"bzzz {name:29}" + "".join(f" {x:8.3f}" for x in figures)
            then = (before or {}).get(group, {}).get(name)
            if then is not None:
                earlier = (then["median"], then["p90"], then.get("cpu_median", NAN))
                line += "".join(f" {x:8.3f}" for x in earlier)
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (default 7)")
    parser.add_argument("--json", type=Path, default=Path("bench/results/cli.json"))
    parser.add_argument("--before", type=Path, help="an earlier run's JSON, shown beside")
    parser.add_argument("--against", type=Path, help="another version's src/, measured beside")
    parser.add_argument(
        "--groups", default=",".join(GROUPS), help="which of help,reads,changes (default all)"
    )
    args = parser.parse_args()
    before = json.loads(args.before.read_text())["results"] if args.before else None
    load = os.getloadavg()
    groups = tuple(g for g in args.groups.split(",") if g in GROUPS)
    measured = measure(args.runs, args.against, groups)
    results = measured[0]
    if args.against is not None:
        before = measured[1]
    _show(results, before)
    report = {
        "bench": "cli",
        "runs": args.runs,
        "machine": machine(),
        # The machine's load average at the start and the end: a loaded machine slows it all.
        "load": {"start": load, "end": os.getloadavg()},
        "code": code_version(),
        "results": results,
        "against": {"src": str(args.against), "results": before} if args.against else None,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
