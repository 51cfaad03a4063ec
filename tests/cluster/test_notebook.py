"""The notebook shared across nodes: a tab connected (WebSocket) to one node sees the edits
another tab makes through a second node, and the other way round; a third node reads the
notebook as both left it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.cluster.client import StartCluster, sync_client
from tests.support.cluster import LocalCluster
from tests.support.mock_provider import MockHandle


@contextmanager
def tab(cluster: LocalCluster, node: int, sid: str) -> Iterator[ClientConnection]:
    """A browser tab's WebSocket to one node (through its own HAProxy port)."""
    url = cluster.layout.node_url(node).replace("http://", "ws://") + f"/ws/sessions/{sid}"
    protocols: Any = ["turnstream", f"turnstream.key.{cluster.key}"]
    with connect(url, subprotocols=protocols, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"
        yield ws


def next_change(ws: ClientConnection, change: str) -> dict[str, Any]:
    """The next notebook message of this kind (bounded wait)."""
    while True:
        msg = json.loads(ws.recv(timeout=15))
        if msg["type"] == "notebook" and msg["change"] == change:
            return dict(msg)


def test_notebook_edits_on_one_node_reach_a_tab_on_another(start_cluster: StartCluster,
                                                           mock_provider: MockHandle, scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [{"blocks": [{"type": "text", "text": "ok"}]}]})
    cluster = start_cluster(f"anthropic:{model}")
    nodes = {i: sync_client(cluster.layout.node_url(i), cluster.key) for i in (1, 2, 3)}
    try:
        r = nodes[1].post("/api/sessions", json={"toolset": "notebook"})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        with tab(cluster, 1, sid) as on_1, tab(cluster, 2, sid) as on_2:
            r = nodes[1].post(f"/api/sessions/{sid}/notebook/cells", json={"code": "x = 1"})
            assert r.status_code == 201, r.text
            cell = r.json()["id"]
            seen = next_change(on_2, "cell_created")  # made on node 1, seen on node 2
            assert seen["cell"]["id"] == cell and seen["cell"]["code"] == "x = 1"
            assert next_change(on_1, "cell_created")["cell"]["id"] == cell
            r = nodes[2].patch(f"/api/sessions/{sid}/notebook/cells/{cell}", json={"code": "x = 2"})
            assert r.status_code == 200, r.text
            seen = next_change(on_1, "cell_updated")  # made on node 2, seen on node 1
            assert seen["cell"]["code"] == "x = 2" and seen["version"] > 1
            assert next_change(on_2, "cell_updated")["cell"]["code"] == "x = 2"
        state = nodes[3].get(f"/api/sessions/{sid}/notebook").json()
        assert [(c["id"], c["code"]) for c in state["cells"]] == [(cell, "x = 2")]
    finally:
        for c in nodes.values():
            c.close()
