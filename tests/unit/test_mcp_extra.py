"""Without the ``mcp`` extra, the MCP example's first line says what to install instead of
failing with a bare ``ModuleNotFoundError: No module named 'mcp_types'``."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

WITHOUT_SDK = """
import sys
sys.modules["mcp"] = None  # as if the extra were not installed
sys.modules["mcp_types"] = None
try:
    from turnstream.mcp import MCPToolset
except ImportError as exc:
    print(type(exc).__name__, "|", exc)
"""


def test_importing_mcp_without_the_extra_says_how_to_install_it() -> None:
    out = subprocess.run([sys.executable, "-c", WITHOUT_SDK], cwd=REPO, capture_output=True, text=True, timeout=60,
                         check=True).stdout.strip()
    assert out == ("MissingExtraError | The MCP SDK (the mcp package) is needed for this; install it with: "
                   "pip install 'turnstream[mcp]'"), out


def test_with_the_extra_it_imports() -> None:
    from turnstream.mcp import MCPToolset

    assert MCPToolset.__name__ == "MCPToolset"
