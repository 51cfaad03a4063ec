"""The --mcp-config file and the names MCP tools get."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstream.errors import UsageError
from turnstream.mcp import load_mcp_config, parse_mcp_config, tool_name
from turnstream.mcp.names import NAME_RULE, SERVER_NAME


def test_a_config_in_the_mcp_servers_format_is_read(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "files": {"command": "python", "args": ["server.py"], "env": {"ROOT": "/data"}},
        "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"},
                   "requires_approval": True, "timeout": 5, "tools": ["search"]}}}))
    config = load_mcp_config(path)
    files, search = config.mcpServers["files"], config.mcpServers["search"]
    assert (files.command, files.args, files.env, files.timeout, files.tools) == (
        "python", ["server.py"], {"ROOT": "/data"}, 30.0, None)
    assert (search.url, search.requires_approval, search.timeout, search.tools) == (
        "https://example.com/mcp", True, 5.0, ["search"])


@pytest.mark.parametrize(("doc", "names"), [
    ({"servers": {}}, "mcpServers: Field required"),
    ({"mcpServers": {"a": {}}}, "mcpServers.a: Value error, give either command"),
    ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "mcpServers.a: Value error, give either"),
    ({"mcpServers": {"a": {"command": "x", "timeout": 0}}}, "mcpServers.a.timeout: Input should be greater"),
    ({"mcpServers": {"a": {"command": "x", "tools": "add"}}}, "mcpServers.a.tools: Input should be a valid list"),
    ({"mcpServers": {"a": {"url": "ftp://h"}}}, "mcpServers.a.url: String should match pattern"),
    ({"mcpServers": {"a": {"url": "http://h", "env": {"A": "1"}}}}, "args, env and cwd go with command"),
    ({"mcpServers": {"a": {"command": "x", "retries": 3}}}, "mcpServers.a.retries: Extra inputs"),
    ({"mcpServers": {"my server": {"command": "x"}}}, "an MCP server's name must be"),
    ({"mcpServers": {"a__b": {"command": "x"}}}, "without '__'"),
])
def test_a_config_that_does_not_fit_names_the_field(doc: dict[str, object], names: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_mcp_config(doc, source="--mcp-config x.json")
    assert str(err.value).startswith("--mcp-config x.json: ")
    assert names in str(err.value)


def test_a_file_that_is_not_json_or_not_there_says_so(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read it"):
        load_mcp_config(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_mcp_config(tmp_path / "bad.json")


servers = st.from_regex(SERVER_NAME, fullmatch=True)
remote_names = st.text(min_size=1, max_size=100)


@given(servers, remote_names)
def test_every_tool_name_fits_the_providers_rule(server: str, remote: str) -> None:
    name = tool_name(server, remote)
    assert NAME_RULE.match(name)
    assert name.startswith(server + "__")


@given(servers, servers, remote_names, remote_names)
def test_names_of_different_tools_never_collide(s1: str, s2: str, r1: str, r2: str) -> None:
    if (s1, r1) != (s2, r2):
        assert tool_name(s1, r1) != tool_name(s2, r2)


def test_a_name_that_fits_is_kept_and_one_that_does_not_is_cleaned_and_marked() -> None:
    assert tool_name("files", "read_file") == "files__read_file"
    odd = tool_name("files", "read.file")
    assert odd.startswith("files__read_file_") and len(odd) == len("files__read_file_") + 8
    assert len(tool_name("s", "x" * 100)) == 64
