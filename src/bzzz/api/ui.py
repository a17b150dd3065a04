"""GET /ui: the dashboard, served from the installed package with a strict security policy.

The page is static (no build step): HTML, plain JavaScript modules and CSS under
``bzzz/ui/static``, read once when the app is built. Only the files found there are served,
by name, so no path reaches outside it. The page holds no data: it signs in with a token and
reads everything from /api/v1, whose routes apply the token's grants.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

UI_PATH = "/ui"
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


def ui_routes() -> list[Any]:
    """/ui (the page), /ui/ (the same) and /ui/{name} (its scripts and styles)."""
    files = static_files()

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
        Route(f"{UI_PATH}/{{name}}", asset, methods=["GET"]),
    ]
