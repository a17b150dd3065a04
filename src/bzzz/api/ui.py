"""GET /ui: the dashboard, served from the installed package with a strict security policy.

The page is static (no build step): HTML, plain JavaScript modules and CSS under
``bzzz/ui/static``, read once when the app is built. Only the files found there are served,
by name, so no path reaches outside it. The page holds no data: it reads everything from
/api/v1 (with the token it signs in with, if any), whose routes apply the caller's grants.
``/ui/access.json`` tells it whether the node needs a credential at all, so that a node that
takes callers without one opens straight on the network and one that needs one shows the
sign-in card (without a refused request first).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

UI_PATH = "/ui"
ACCESS_PATH = f"{UI_PATH}/access.json"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# No inline script or style, nothing from elsewhere, no framing, no plugins.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files by name, with their content types."""
    folder = resources.files("bzzz.ui").joinpath("static")
    found = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            found[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    return found


def ui_routes(credential_required: Callable[[], bool]) -> list[Any]:
    """/ui (the page), /ui/ (the same), /ui/access.json and /ui/{name} (scripts and styles)."""
    files = static_files()

    async def access(request: Request) -> Response:
        return JSONResponse(
            {"credential_required": credential_required()}, headers=SECURITY_HEADERS
        )

    def serve(name: str) -> Response:
        if name not in files:
            return PlainTextResponse("not found", status_code=404, headers=SECURITY_HEADERS)
        body, media_type = files[name]
        return Response(body, media_type=media_type, headers=SECURITY_HEADERS)

    async def page(request: Request) -> Response:
        return serve("index.html")

    async def slash(request: Request) -> Response:
        return RedirectResponse(UI_PATH, status_code=308)

    async def asset(request: Request) -> Response:
        return serve(request.path_params["name"])

    return [
        Route(UI_PATH, page, methods=["GET"]),
        Route(f"{UI_PATH}/", slash, methods=["GET"]),
        Route(ACCESS_PATH, access, methods=["GET"]),
        Route(f"{UI_PATH}/{{name}}", asset, methods=["GET"]),
    ]
