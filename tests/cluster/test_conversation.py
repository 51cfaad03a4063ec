"""One conversation whose requests land on different nodes: the turn's POST, the SSE follow,
the client tool's result, the approval and the cancel, each sent to a node chosen by its
address (through its own HAProxy port), and the same conversation through the balancer.
Every node serves every session through the database and the bus, so the turn goes on
wherever its next request lands; the client sees every event once, in order."""

from __future__ import annotations

import pytest

from tests.cluster.client import LOCATION, StartCluster, call, sync_client, text
from tests.support.mock_provider import MockHandle
from tests.support.server import Event, sse

SLOW = "This answer streams slowly so that it can be cancelled half way through. " * 6

# which node each request goes to (0: HAProxy's balanced address)
ROUTES = {"by node address": {"post": 1, "follow": 2, "result": 3, "approve": 1, "cancel": 2},
          "through HAProxy": {"post": 0, "follow": 0, "result": 0, "approve": 0, "cancel": 0}}


@pytest.mark.parametrize("route", list(ROUTES))
def test_one_conversation_across_the_nodes(start_cluster: StartCluster, mock_provider: MockHandle,
                                           scenario_name: str, route: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"blocks": [text("Let me ask your browser."), call("get_location", precision="city")]},
        {"blocks": [text("Found you. Now the draft."), call("delete_draft", name="q3")]},
        {"fragment_size": 3, "delay_ms": 40, "blocks": [text(SLOW)]}]})
    cluster = start_cluster(f"anthropic:{model}")
    lay, key = cluster.layout, cluster.key
    urls = {0: lay.lb_url, **{i: lay.node_url(i) for i in (1, 2, 3)}}
    to = {step: sync_client(urls[node], key) for step, node in ROUTES[route].items()}
    try:
        r = to["post"].post("/api/sessions", json={"toolset": "none"})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        with sse(to["post"], "POST", f"/api/sessions/{sid}/turns",
                 json={"message": "where am I?", "client_tools": [LOCATION]}) as s:
            seen: list[Event] = s.rest()
        assert seen[-1].event == "turn_complete" and seen[-1].data["status"] == "awaiting_client"
        tid = seen[0].data["turn_id"]
        asked = next(e for e in seen if e.event == "tool_request")
        with sse(to["follow"], "GET", f"/api/sessions/{sid}/turns/{tid}/events",
                 headers={"Last-Event-ID": seen[-1].id}) as s:
            r = to["result"].post(f"/api/sessions/{sid}/tool-results",
                                  json={"tool_use_id": asked.data["tool_use_id"], "content": "Bergen"})
            assert r.status_code == 200 and r.json()["resumed"] is True, r.text
            seen += s.rest()
        assert seen[-1].data["status"] == "awaiting_client"
        approval = [e for e in seen if e.event == "tool_request"][-1]
        assert approval.data["name"] == "delete_draft" and approval.data["requires_approval"]
        with sse(to["follow"], "GET", f"/api/sessions/{sid}/turns/{tid}/events",
                 headers={"Last-Event-ID": seen[-1].id}) as s:
            r = to["approve"].post(f"/api/sessions/{sid}/tool-results",
                                   json={"tool_use_id": approval.data["tool_use_id"], "approved": True})
            assert r.status_code == 200, r.text
            for ev in s:  # up to the slow answer's first words, then cancel it
                seen.append(ev)
                if ev.event == "block_delta":
                    break
            r = to["cancel"].post(f"/api/sessions/{sid}/turns/{tid}/cancel")
            assert r.status_code == 200, r.text
            seen += s.rest()
        assert seen[-1].event == "turn_complete" and seen[-1].data["status"] == "cancelled"
        ids = [e.n for e in seen if e.id]
        assert ids == sorted(set(ids)), "an event twice or out of order"
        # every node replays the same stored turn, and the client got all of it
        replays = []
        for node in (1, 2, 3):
            with sync_client(urls[node], key) as c, sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as s:
                replays.append([(e.id, e.event) for e in s.rest()])
        assert replays[0] == replays[1] == replays[2]
        assert {i for i, _ in replays[0]} <= {e.id for e in seen}
        results = [e.data["block"]["content"] for e in seen
                   if e.event == "block_stop" and e.data["block"]["type"] == "tool_result"]
        assert results == ["Bergen", "deleted q3"]
    finally:
        for c in to.values():
            c.close()
