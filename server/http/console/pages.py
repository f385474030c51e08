"""Serve the console's files: `/ui` is the page, `/ui/static/NAME` its CSS and scripts.

The files ship as package data (`static/`). They hold no secret, so they are served without
the API key (`public_paths` lists exactly these paths for the key middleware); the page asks
for the key in a login form, keeps it in the tab's sessionStorage, and sends it as
`Authorization: Bearer` on every API call it makes.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

UI_PATH = "/ui"
STATIC_PREFIX = f"{UI_PATH}/static/"
MEDIA_TYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript",
               ".svg": "image/svg+xml"}
# The page is the only thing a browser renders from here: no framing, scripts from this
# origin only (no inline script, no CDN), API calls to this origin only.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


def static_dir() -> Path:
    return Path(str(resources.files("stackroute.server.http.console") / "static"))


def static_files() -> dict[str, Path]:
    """Every shipped file by name (`app.js` → its path); nothing outside the folder."""
    return {p.name: p for p in sorted(static_dir().iterdir())
            if p.is_file() and p.suffix in MEDIA_TYPES}


def public_paths() -> frozenset[str]:
    """The console's URLs, open without the key: the page and its files, nothing else."""
    return frozenset({UI_PATH, f"{UI_PATH}/",
                      *(STATIC_PREFIX + name for name in static_files())})


@router.get(UI_PATH)
def console_page() -> FileResponse:
    return _file("index.html")


@router.get(f"{UI_PATH}/")
def console_page_slash() -> RedirectResponse:
    return RedirectResponse(UI_PATH, status_code=308)


@router.get(STATIC_PREFIX + "{name}")
def console_file(name: str) -> FileResponse:
    return _file(name)


def _file(name: str) -> FileResponse:
    path = static_files().get(name)
    if path is None:
        raise StarletteHTTPException(404, detail=f"no console file {name[:80]!r}; the console "
                                          f"ships {', '.join(static_files())}")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=SECURITY_HEADERS)
