"""What the web UI needs beyond ``static/`` and the API of SPEC §7.

``/vendor/plotly.min.js``: the Plotly bundle shipped inside the Python ``plotly`` package
(``plotly/package_data/plotly.min.js``), so the page draws the notebook's figures with the
very version that produced them, offline, without a copy in this repository. The page
loads it only when a cell shows a figure. No key is needed: it is a public library file.

``GET /api/config`` (bearer key): ``{"model": "provider:model", "demo": bool}``, the
server's default model and whether it is the offline demo, so the page can say so.

Mount with ``Starlette(routes=[*static_routes.routes, ...])`` (before a catch-all mount).
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ..tools.server_status import ReportsStatus

PLOTLY_PATH = "/vendor/plotly.min.js"


@lru_cache(maxsize=1)
def plotly_js_file() -> Path | None:
    """The bundled ``plotly.min.js`` of the installed ``plotly`` package, or None."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "package_data" / "plotly.min.js"
        if candidate.is_file():
            return candidate
    return None


async def plotly_js(request: Request) -> Response:
    path = plotly_js_file()
    if path is None:
        return JSONResponse({"error": "not_found",
                             "message": "plotly is not installed (pip install 'turnstream[notebook]')"},
                            status_code=404)
    return FileResponse(path, media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})


async def ui_config(request: Request) -> Response:
    """The page's settings: the model, whether it is the demo, and the state of each MCP server
    that was started (``mcp_servers``: name, state ``up``/``retrying``/``stopped``, error, and
    a sentence to show)."""
    state = request.app.state.turnstream
    await state.auth.require(request.headers)
    servers = [s.status() for s in state.mcp_servers if isinstance(s, ReportsStatus)]
    return JSONResponse({"model": state.settings.model, "demo": bool(state.settings.demo),
                         "mcp_servers": [s.to_dict() for s in servers if s is not None]},
                        headers={"Cache-Control": "no-store"})


routes: list[Route] = [
    Route(PLOTLY_PATH, plotly_js, methods=["GET", "HEAD"], name="plotly_js"),
    Route("/api/config", ui_config, methods=["GET"], name="ui_config"),
]

__all__ = ["PLOTLY_PATH", "plotly_js", "plotly_js_file", "routes", "ui_config"]
