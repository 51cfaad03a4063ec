"""Where the shared fixtures live: ``$TURNSTREAM_SHARED``, else ``../shared`` beside the repo."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    env = os.environ.get("TURNSTREAM_SHARED")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared", Path("/work/shared")]:
        if (cand / "fixtures" / "streams").is_dir():
            return cand
    raise FileNotFoundError("shared/ (with fixtures/streams) not found beside the repository; set TURNSTREAM_SHARED")


STREAMS = shared_dir() / "fixtures" / "streams"
