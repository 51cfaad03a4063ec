"""Where the test fixtures live, inside the repository."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
STREAMS = FIXTURES / "streams"
"""The recorded provider streams (tests/fixtures/streams/README.md)."""
