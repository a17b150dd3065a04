"""`bzzz init`: the first run that keeps its lead in.

On a data directory with a running node, or one where no node ran yet, it makes an admin token
for the person running it (every project, every role), prints it once, and prints the client
configurations that carry it: Claude Code's `claude mcp add` line, Cursor's ``.cursor/mcp.json``
and a Python SDK snippet. It says plainly that from then on HTTP callers without a token are
refused: the first credential closes a loopback node that was open (``bzzz.access.service``).
The token goes on the network's log as `bzzz token create` puts it (``cli/log.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out

if TYPE_CHECKING:
    from bzzz.config import Settings

# A bind to every interface is reached from this machine at the loopback address.
_ANY_HOST = {"0.0.0.0", "::", "[::]", ""}
CLOSED = (
    "From now on HTTP callers without a token are refused (401): every MCP client, the "
    "dashboard and curl send 'Authorization: Bearer <token>'."
)
STAYS_OPEN = (
    "auth.required is false (BZZZ_AUTH_REQUIRED) on this node: HTTP callers without a token "
    "are still let in. Unset it, or set it to true, to require a token."
)
AGENT_TOKENS = (
    "This token is an admin of every project: keep it for yourself. Give each agent a token "
    "of its own: bzzz token create NAME --agent AGENT_ID --project P"
)


def add_parser(sub: Any) -> None:
    """The `init` command."""
    init = sub.add_parser(
        "init",
        help="make your admin token and print client configurations (do this first)",
        description="Make an admin token for you (printed once) and print ready-to-paste "
        "configurations for Claude Code, Cursor and the Python MCP SDK. From then on HTTP "
        "callers without a token are refused.",
    )
    init.add_argument(
        "--name", help="who holds the token (default: your login name, 'admin (LOGIN)')"
    )
    init.add_argument("--host", help="the node's HTTP host, if not the settings' (for the URL)")
    init.add_argument("--port", type=int, help="the node's HTTP port, if not the settings'")
    out.json_flag(init, '{"token": ..., "mcp_url": ..., "configs": {...}}')


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz init`."""
    return asyncio.run(_init(args, settings))


async def _init(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.access.service import AccessService
    from bzzz.access.tokens import TokenRegistry
    from bzzz.cli import log as cli_log
    from bzzz.principal import ALL, LOCAL, Scope

    tokens = TokenRegistry()
    async with cli_log.joined(settings) as log:
        log.applied.append(tokens.on_applied)
        access = AccessService(tokens, [], required=False, log=log)
        record, secret = await access.create_token(
            LOCAL, args.name or _default_name(), [ALL], [ALL], Scope.ADMIN, None
        )
    url = mcp_url(settings)
    configs = client_configs(url, secret)
    closed = STAYS_OPEN if settings.auth.required is False else CLOSED
    if args.json:
        shown = {
            "token": secret,
            "token_id": record.id,
            "mcp_url": url,
            "configs": configs,
            "notice": f"{closed} {AGENT_TOKENS}",
        }
        sys.stdout.write(json.dumps(shown) + "\n")
        return 0
    sys.stdout.write(_text(record.id, record.name, secret, closed, configs) + "\n")
    return 0


def _default_name() -> str:
    try:
        return f"admin ({getpass.getuser()[:64]})"
    except (KeyError, OSError):  # no login name for this uid (a container)
        return "admin"


def mcp_url(settings: Settings) -> str:
    """Where MCP clients on this machine reach the node: ``http://HOST:PORT/mcp``."""
    host = settings.node.http_host.strip()
    host = "127.0.0.1" if host in _ANY_HOST else host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address in a URL
    return f"http://{host}:{settings.node.http_port}/mcp"


def client_configs(url: str, secret: str) -> dict[str, Any]:
    """Ready-to-paste configurations carrying ``secret``: Claude Code, Cursor, the Python SDK."""
    header = f"Authorization: Bearer {secret}"
    return {
        "claude_code": f'claude mcp add --transport http bzzz {url} --header "{header}"',
        "cursor": {"mcpServers": {"bzzz": {"url": url, "headers": {"Authorization": header[15:]}}}},
        "python": PYTHON_SNIPPET.format(url=url, secret=secret),
    }


PYTHON_SNIPPET = """\
import asyncio

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = "{url}"
TOKEN = "{secret}"


async def main() -> None:
    http = httpx2.AsyncClient(headers={{"Authorization": f"Bearer {{TOKEN}}"}})
    async with http, Client(streamable_http_client(URL, http_client=http)) as client:
        found = await client.call_tool("bzzz_lookup", {{"semantic_address": "bzzz://*"}})
        print(found.structured_content)


asyncio.run(main())
"""


def _text(token_id: str, name: str, secret: str, closed: str, configs: dict[str, Any]) -> str:
    cursor = json.dumps(configs["cursor"], indent=2)
    return (
        f"Admin token {token_id} ({name}): every project, every role. Store it now: it is not "
        f"shown again.\n\n    {secret}\n\n"
        f"{closed}\n{AGENT_TOKENS}\n\n"
        f"Claude Code:\n\n    {configs['claude_code']}\n\n"
        f"Cursor (.cursor/mcp.json):\n\n{cursor}\n\n"
        f"Python (the MCP SDK):\n\n{configs['python']}"
    )
