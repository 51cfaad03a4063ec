"""The assistant and the user in one notebook, through a real server: the assistant reads the
user's edits and says when it replaced one it had not seen; the offline demo analyses an
uploaded CSV and its notebook runs in plain Jupyter; a cancel or a crash mid-run leaves no cell
``running``."""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

from tests.support.server import Event, new_session, run_turn, scenario, server_errors, sse, start_server

from .test_notebook_api import CSV, add_cell, cells, nb_url, upload

SLOW_CELL = "import time\nprint('going')\ntime.sleep(120)"


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)  # polling an HTTP route for an observable state, with a deadline


def texts(events: list[Event]) -> str:
    return "".join(e.data["block"]["text"] for e in events
                   if e.event == "block_stop" and e.data["block"]["type"] == "text")


def results(events: list[Event]) -> list[dict[str, Any]]:
    return [e.data["block"] for e in events if e.event == "block_stop" and e.data["block"]["type"] == "tool_result"]


@pytest.fixture(scope="module")
def shared_models(models: dict[str, str]) -> dict[str, str]:
    d = Path(models["echo"].split(":", 1)[1]).parent  # the folder the server takes scenario files from
    return {
        "reader": scenario(d / "reader.json", {"name": "reader", "turns": [
            [{"blocks": [{"type": "tool_use", "name": "get_notebook_state", "input": {}}]},
             {"blocks": [{"type": "text", "text": "I see: {{last.cells[0].code}}"}]}],
            [{"blocks": [{"type": "tool_use", "name": "update_cell",
                          "input": {"cell_id": "{{input}}", "code": "a = 100"}}]},
             {"blocks": [{"type": "text", "text": "note={{last.note}}|replaced={{last.replaced_code}}"}]}]]}),
        "slow": scenario(d / "slow.json", {"name": "slow", "steps": [
            {"blocks": [{"type": "tool_use", "name": "create_cell", "input": {"code": SLOW_CELL}}]},
            {"blocks": [{"type": "tool_use", "name": "run_cell", "input": {"cell_id": "{{last.cell_id}}"}}]},
            {"blocks": [{"type": "text", "text": "finished"}]}]}),
    }


def test_the_assistant_reads_the_users_edits_and_says_when_it_replaced_one(server: Any,
                                                                             shared_models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=shared_models["reader"])
        cell = add_cell(c, sid, "a = 1")
        c.patch(nb_url(sid, f"/cells/{cell['id']}"), json={"code": "a = 2"})
        assert "I see: a = 2" in texts(run_turn(c, sid, "look"))  # the user's edit, read by the assistant
        c.patch(nb_url(sid, f"/cells/{cell['id']}"), json={"code": "a = 3  # mine"})  # after the assistant read
        said = texts(run_turn(c, sid, cell["id"]))
        assert "note=The user changed this cell after you last read the notebook" in said
        assert "replaced=a = 3  # mine" in said
        assert cells(c, sid)[0]["code"] == "a = 100" and cells(c, sid)[0]["edited_by"] == "assistant"
        said = texts(run_turn(c, sid, cell["id"]))  # its own code now: nothing to say
        assert "note=|replaced=" in said


def test_the_demo_model_charts_an_uploaded_csv_and_the_export_runs_in_jupyter(server: Any, tmp_path: Path) -> None:
    with server.client() as c:
        sid = new_session(c, model="scripted:notebook-demo")
        assert upload(c, sid, ("sales.csv", CSV)).status_code == 201
        events = run_turn(c, sid, "Have a look at my data")
        assert events[-1].data["status"] == "complete"
        res = results(events)
        state = json.loads(res[0]["content"])
        assert state["files"][0]["columns"] == ["region", "product", "units", "price"]
        assert "columns [\"region\", \"product\", \"units\", \"price\"]" in texts(events)
        head = json.loads(res[2]["content"])
        assert head["status"] == "success" and head["outputs"][0]["preview"].split()[:4] == [
            "region", "product", "units", "price"]
        chart = json.loads(res[4]["content"])
        assert chart["status"] == "success" and chart["outputs"][0]["type"] == "plotly"
        nb = cells(c, sid)
        assert len(nb) == 2 and "sales.head(10)" in nb[0]["code"]
        figure = nb[1]["outputs"][-1]["figure"]
        layout = figure["layout"]
        assert (layout["xaxis"]["title"]["text"], layout["yaxis"]["title"]["text"]) == ("region", "units")
        assert sorted(figure["data"][0]["x"]) == ["East", "North", "South"]
        exported = c.get(nb_url(sid, ".ipynb")).content
    doc = nbformat.reads(exported.decode(), as_version=4)
    nbformat.validate(doc)
    (tmp_path / "sales.csv").write_bytes(CSV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jupyter_client's own, about its paths
        nbclient.NotebookClient(doc, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    ran = [o for cell in doc.cells for o in cell.outputs]
    assert not [o for o in ran if o["output_type"] == "error"]
    assert any("North" in str(o.get("data", {}).get("text/plain", "")) for o in ran)


def _start_turn(server: Any, sid: str, into: dict[str, Any]) -> threading.Thread:
    def go() -> None:
        with server.client(timeout=60) as c2, sse(c2, "POST", f"/api/sessions/{sid}/turns",
                                                   json={"message": "run it"}) as s:
            into["events"] = s.rest()

    t = threading.Thread(target=go)
    t.start()
    return t


def test_cancelling_a_turn_mid_run_interrupts_the_cell_and_says_it_started(server: Any,
                                                                           shared_models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=shared_models["slow"])
        box: dict[str, Any] = {}
        turn = _start_turn(server, sid, box)
        wait_for(lambda: [x["status"] for x in cells(c, sid)] == ["running"], "the cell to run")
        tid = c.get(f"/api/sessions/{sid}").json()["turns"][-1]["id"]
        started = time.monotonic()
        assert c.post(f"/api/sessions/{sid}/turns/{tid}/cancel").json()["status"] == "cancelled"
        took = time.monotonic() - started
        turn.join(30)
        cell = cells(c, sid)[0]
        assert cell["status"] == "error" and took < 3.0, (cell["status"], took)
        err = cell["outputs"][-1]
        assert err["ename"] == "KeyboardInterrupt" and err["interrupted"] is True
        assert cell["outputs"][0] == {"type": "stdout", "text": "going\n"}
        events = box["events"]
        assert events[-1].data["status"] == "cancelled"
        result = results(events)[-1]
        assert result["is_error"] is True
        assert result["content"].startswith(f"Cell {cell['id']} started running and was interrupted")
        assert "KeyboardInterrupt" in result["content"]


def test_a_server_killed_mid_run_leaves_the_cell_interrupted(tmp_path: Path, models: dict[str, str]) -> None:
    srv = start_server(tmp_path, model=models["echo"])
    with srv.client() as c:
        sid = new_session(c)
        cell = add_cell(c, sid, SLOW_CELL)

        def run() -> None:
            try:
                with srv.client(timeout=60) as c2:
                    c2.post(nb_url(sid, f"/cells/{cell['id']}/run"))
            except Exception:  # the server dies under it
                pass

        runner = threading.Thread(target=run)
        runner.start()
        wait_for(lambda: cells(c, sid)[0]["status"] == "running", "the cell to run")
        srv.proc.kill()
        srv.proc.wait(10)
        runner.join(30)
    srv.stop()
    srv = start_server(tmp_path, model=models["echo"])
    try:
        with srv.client() as c:
            after = cells(c, sid)[0]
            assert after["status"] == "error"
            assert after["outputs"][-1]["interrupted"] is True
            assert "server process running this cell stopped" in after["outputs"][-1]["evalue"]
            c.patch(nb_url(sid, f"/cells/{cell['id']}"), json={"code": "print('again')"})
            rerun = c.post(nb_url(sid, f"/cells/{cell['id']}/run")).json()["cell"]
            assert rerun["status"] == "success" and rerun["outputs"] == [{"type": "stdout", "text": "again\n"}]
    finally:
        srv.stop()
    assert server_errors(srv) == []
