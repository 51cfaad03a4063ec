"""The web chat's turn footer for usage (``static/turn.js``, ``usageParts``), run in Node on
the module the page loads: a server that sent no token counts is said to have, not shown
as 0 tokens or left out. (The browser suite's footer test covers known usage.)"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e]

TURN_JS = Path(__file__).resolve().parents[3] / "turnstream" / "server" / "static" / "turn.js"


def usage_parts(usage: dict[str, Any], cost_nano: int = 0) -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed; the web tests need Node.js 20+ (build-time only)")
    script = (f"import({json.dumps(TURN_JS.as_uri())}).then((m) => "
              f"console.log(JSON.stringify(m.usageParts({json.dumps(usage)}, {cost_nano}))))")
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True,
                          timeout=60, check=True)
    parts: list[str] = json.loads(done.stdout)
    return parts


def test_unknown_usage_is_said() -> None:
    assert usage_parts({"input_tokens": 0, "output_tokens": 0, "unknown": True}) == ["usage unknown"]
    assert usage_parts({"input_tokens": 7, "output_tokens": 3, "unknown": True}) == [
        "7 in · 3 out tokens", "usage of some steps unknown"]


def test_known_usage_keeps_its_form() -> None:
    assert usage_parts({"input_tokens": 300, "output_tokens": 60, "cache_read_input_tokens": 150,
                        "cache_creation_input_tokens": 30}, 500_000) == [
        "300 in · 60 out tokens", "cache 150 read · 30 written", "$0.0005"]
