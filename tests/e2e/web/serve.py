"""``turnstream serve`` for the browser tests, with the web UI's extra routes mounted.

``turnstream.server.static_routes`` holds ``/vendor/plotly.min.js`` and ``/api/config``.
When ``create_app`` does not mount them itself, this adds them in front of its routes and
then runs the ordinary command line; when it does, this changes nothing.
"""

from __future__ import annotations

import sys
from typing import Any

from turnstream.server import app as app_module
from turnstream.server import static_routes

_create_app = app_module.create_app


def create_app(state: Any) -> Any:
    app = _create_app(state)
    have = {getattr(r, "path", None) for r in app.router.routes}
    missing = [r for r in static_routes.routes if r.path not in have]
    app.router.routes[0:0] = missing
    return app


app_module.create_app = create_app  # type: ignore[assignment]

if __name__ == "__main__":
    from turnstream.cli import main

    sys.exit(main(sys.argv[1:]))
