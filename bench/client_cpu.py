"""Client CPU per conversation: turnstream beside the floor and the peer frameworks.

Runs the shared benchmark harness (``../shared/bench/run.py``) with turnstream's own extra
drivers registered, under the bench virtualenv that ``bench/run.py`` prepares. Arguments
are passed through to the harness (``--configs``, ``--reps``, ``--drivers`` …).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    shared = Path(os.environ.get("TURNSTREAM_SHARED", HERE.parent.parent / "shared")) / "bench"
    sys.path.insert(0, str(shared))
    os.environ["TURNSTREAM_BENCH_DRIVERS"] = str(shared / "drivers")
    import run as harness  # the shared run.py

    harness.DRIVERS["turnstream_openai"] = (str(HERE / "drivers" / "turnstream_openai.py"), "openai", True,
                                           "turnstream")
    harness.main()


if __name__ == "__main__":
    main()
