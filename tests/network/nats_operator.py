"""A nats-server in operator (JWT) mode, and a NATS creds file for one user of its account.

The operator, account and user keys are nkeys made here; the JWTs are signed as ``nsc`` signs
them, so the creds file is one a real deployment would hand a node.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nkeys
from ports import free_port

from bzzz.network.embedded import nats_server_binary

_UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
              "wildcards": True, "conn": -1, "leaf": -1}  # fmt: skip
_JETSTREAM = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _key(prefix: int) -> tuple[bytes, Any]:
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return seed, nkeys.from_seed(bytearray(seed))


def _public(pair: Any) -> str:
    return str(pair.public_key.decode())


def _jwt(signer: Any, subject: str, name: str, nats: dict[str, Any]) -> str:
    """A NATS JWT (v2) for ``subject`` signed by ``signer`` (an nkeys KeyPair)."""
    claims: dict[str, Any] = {
        "iat": int(time.time()), "iss": _public(signer), "sub": subject, "name": name,
        "nats": {**nats, "version": 2}, "jti": "",
    }  # fmt: skip
    digest = hashlib.new("sha512_256", json.dumps(claims, separators=(",", ":")).encode())
    claims["jti"] = base64.b32encode(digest.digest()).decode().rstrip("=")
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{head}.{body}.{_b64(signer.sign(f'{head}.{body}'.encode()))}"


@dataclass(frozen=True, slots=True)
class OperatorServer:
    """A running operator-mode server: its plain URL and a creds file of its account."""

    url: str
    creds: Path


def _write_config(directory: Path, port: int) -> None:
    """The server config and ``node.creds`` (a user of account BZZZ, JetStream on)."""
    directory.mkdir(parents=True, exist_ok=True)
    _, operator = _key(nkeys.PREFIX_BYTE_OPERATOR)
    _, account = _key(nkeys.PREFIX_BYTE_ACCOUNT)
    _, system = _key(nkeys.PREFIX_BYTE_ACCOUNT)
    user_seed, user = _key(nkeys.PREFIX_BYTE_USER)
    op_pub, acc_pub, sys_pub = _public(operator), _public(account), _public(system)
    operator_jwt = _jwt(operator, op_pub, "op", {"type": "operator", "system_account": sys_pub})
    limits = {"limits": _UNLIMITED | _JETSTREAM, "type": "account"}
    account_jwt = _jwt(operator, acc_pub, "BZZZ", limits)
    system_jwt = _jwt(operator, sys_pub, "SYS", {"limits": _UNLIMITED, "type": "account"})
    user_nats = {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user"}
    user_jwt = _jwt(account, _public(user), "node", user_nats)
    (directory / "nats.conf").write_text(
        "\n".join(
            [
                f"listen: 127.0.0.1:{port}",
                f"operator: {operator_jwt}",
                f"system_account: {sys_pub}",
                "resolver: MEMORY",
                f"resolver_preload: {{\n  {acc_pub}: {account_jwt}\n  {sys_pub}: {system_jwt}\n}}",
                f'jetstream {{\n  store_dir: "{directory}"\n}}',
                "",
            ]
        ),
        encoding="utf-8",
    )
    (directory / "node.creds").write_text(
        f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{user_seed.decode()}\n------END USER NKEY SEED------\n",
        encoding="utf-8",
    )


async def _wait_listening(port: int, within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            return


@contextlib.asynccontextmanager
async def operator_server(directory: Path) -> AsyncIterator[OperatorServer]:
    """Start an operator-mode nats-server in ``directory``; stop it on exit."""
    port = free_port()
    _write_config(directory, port)
    with (directory / "nats.log").open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            str(nats_server_binary()), "-c", str(directory / "nats.conf"),
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )  # fmt: skip
    try:
        await _wait_listening(port)
        yield OperatorServer(f"nats://127.0.0.1:{port}", directory / "node.creds")
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await proc.wait()
