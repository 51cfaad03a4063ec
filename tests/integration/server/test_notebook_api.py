"""The notebook routes of a real server: cells, runs, interrupts, data files, .ipynb; the same
ownership, validation and error shapes as every other route."""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import nbformat
import pytest

from tests.support.server import Server, new_session, server_errors, start_server

CSV = b"region,product,units,price\nNorth,A,120,9.5\nSouth,A,80,9.5\nNorth,B,60,14.0\nEast,B,30,14.0\n"


def nb_url(sid: str, tail: str = "") -> str:
    return f"/api/sessions/{sid}/notebook{tail}"


def add_cell(c: httpx.Client, sid: str, code: str, **body: Any) -> dict[str, Any]:
    r = c.post(nb_url(sid, "/cells"), json={"code": code, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


def cells(c: httpx.Client, sid: str) -> list[dict[str, Any]]:
    r = c.get(nb_url(sid))
    assert r.status_code == 200, r.text
    return list(r.json()["cells"])


def upload(c: httpx.Client, sid: str, *files: tuple[str, bytes]) -> httpx.Response:
    return c.post(nb_url(sid, "/files"), files=[("files", (name, data, "application/octet-stream"))
                                                 for name, data in files])


def wait_for(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)  # polling an HTTP route for an observable state, with a deadline


def test_the_routes_are_in_openapi(server: Server) -> None:
    with server.client() as c:
        paths = c.get("/openapi.json").json()["paths"]
    base = "/api/sessions/{session_id}/notebook"
    want = {base: {"get"}, base + "/cells": {"post"}, base + "/cells/{cell_id}": {"patch", "delete"},
            base + "/cells/{cell_id}/run": {"post"}, base + "/cells/{cell_id}/interrupt": {"post"},
            base + "/restart": {"post"},
            base + "/files": {"post", "get"}, base + "/files/{name}": {"delete"},
            "/api/sessions/{session_id}/notebook.ipynb": {"get", "post"}}
    for path, methods in want.items():
        assert set(paths[path]) >= methods, path
    upload_op = paths[base + "/files"]["post"]
    assert "multipart/form-data" in upload_op["requestBody"]["content"]
    assert {"201", "413", "422", "404"} <= set(upload_op["responses"])
    assert "409" in paths[base + "/cells/{cell_id}"]["patch"]["responses"]


def test_cells_are_added_moved_changed_and_deleted_in_order(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        assert cells(c, sid) == []
        a = add_cell(c, sid, "x = 2")
        b = add_cell(c, sid, "SELECT 1 AS one", language="sql")
        first = add_cell(c, sid, "import math", index=0)
        assert [x["id"] for x in cells(c, sid)] == [first["id"], a["id"], b["id"]]
        assert a["edited_by"] == "user" and a["status"] == "idle" and a["outputs"] == []
        got = cells(c, sid)
        for key in ("id", "language", "code", "status", "outputs", "execution_count", "stale", "depends_on"):
            assert key in got[1]
        r = c.patch(nb_url(sid, f"/cells/{b['id']}"), json={"index": 0, "language": "python", "code": "y = 3"})
        assert r.status_code == 200, r.text
        assert (r.json()["language"], r.json()["code"]) == ("python", "y = 3")
        assert [x["id"] for x in cells(c, sid)] == [b["id"], first["id"], a["id"]]
        assert c.delete(nb_url(sid, f"/cells/{first['id']}")).json() == {"deleted": True}
        assert [x["id"] for x in cells(c, sid)] == [b["id"], a["id"]]
        for method, tail in (("PATCH", "/cells/nope"), ("DELETE", "/cells/nope"), ("POST", "/cells/nope/run"),
                             ("POST", "/cells/nope/interrupt")):
            r = c.request(method, nb_url(sid, tail), json={"code": "1"} if method == "PATCH" else None)
            assert r.status_code == 404 and r.json()["error"] == "not_found", (method, tail, r.text)


def test_an_edit_from_stale_code_is_a_conflict_with_the_current_cell(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        cell = add_cell(c, sid, "total = 1")
        url = nb_url(sid, f"/cells/{cell['id']}")
        assert c.patch(url, json={"code": "total = 2", "base_code": "total = 1"}).status_code == 200
        r = c.patch(url, json={"code": "total = 3", "base_code": "total = 1"})  # another tab's stale copy
        assert r.status_code == 409
        assert r.json()["error"] == "edit_conflict" and r.json()["cell"]["code"] == "total = 2"
        assert cells(c, sid)[0]["code"] == "total = 2"
        assert c.patch(url, json={"code": "total = 4"}).json()["code"] == "total = 4"  # no base: last writer wins


def test_another_users_session_is_404_on_every_route(server: Server, other_key: str) -> None:
    with server.client() as c:
        sid = new_session(c)
        cell = add_cell(c, sid, "x = 1")
    with server.client(other_key) as bob:
        for method, tail in (("GET", ""), ("POST", "/cells"), ("PATCH", f"/cells/{cell['id']}"),
                             ("DELETE", f"/cells/{cell['id']}"), ("POST", f"/cells/{cell['id']}/run"),
                             ("POST", f"/cells/{cell['id']}/interrupt"), ("GET", "/files"),
                             ("DELETE", "/files/a.csv"), ("GET", ".ipynb")):
            body = {"code": "y"} if method in ("POST", "PATCH") and "/run" not in tail else None
            r = bob.request(method, nb_url(sid, tail), json=body)
            assert r.status_code == 404, (method, tail, r.text)
        assert upload(bob, sid, ("a.csv", CSV)).status_code == 404
        assert bob.post(nb_url(sid, ".ipynb"), content=b"{}").status_code == 404
    with server.client() as c:
        assert cells(c, sid)[0]["code"] == "x = 1"
        assert c.get(nb_url(sid, "/files")).json() == {"files": []}


@pytest.mark.parametrize(("body", "field"), [
    ({"code": "1", "language": "ruby"}, "language"), ({"code": 5}, "code"), ({"code": "1", "index": -1}, "index"),
    ({"code": "1", "index": "2"}, "index"), ({"code": "1", "color": "red"}, "color"), ({"code": "a\x00b"}, "code")])
def test_bad_cell_bodies_are_422_naming_the_field(server: Server, body: dict[str, Any], field: str) -> None:
    with server.client() as c:
        sid = new_session(c)
        r = c.post(nb_url(sid, "/cells"), json=body)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"][:2] == ["body", field]
        cell = add_cell(c, sid, "x = 1")
        r = c.patch(nb_url(sid, f"/cells/{cell['id']}"), json=body)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][:2] == ["body", field]


def test_a_run_runs_stale_upstream_cells_first(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        a = add_cell(c, sid, "x = 2")
        b = add_cell(c, sid, "y = x * 10\ny")
        r = c.post(nb_url(sid, f"/cells/{b['id']}/run"))
        assert r.status_code == 200, r.text
        run = r.json()
        assert run["ran_upstream"] == [a["id"]] and run["cell"]["status"] == "success"
        assert run["cell"]["outputs"] == [{"type": "text", "text": "20"}]
        assert [x["status"] for x in cells(c, sid)] == ["success", "success"]


def test_interrupt_stops_a_running_cell_and_the_kernel_keeps_its_variables(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        keep = add_cell(c, sid, "kept = 41")
        assert c.post(nb_url(sid, f"/cells/{keep['id']}/run")).json()["cell"]["status"] == "success"
        slow = add_cell(c, sid, "import time\nprint('started')\ntime.sleep(120)")
        assert c.post(nb_url(sid, f"/cells/{slow['id']}/interrupt")).json()["status"] == "not_running"
        outcome: dict[str, Any] = {}

        def run() -> None:
            with server.client(timeout=60) as c2:
                outcome["run"] = c2.post(nb_url(sid, f"/cells/{slow['id']}/run")).json()

        runner = threading.Thread(target=run)
        runner.start()
        wait_for(lambda: cells(c, sid)[1]["status"] == "running", "the cell to run")
        started = time.monotonic()
        r = c.post(nb_url(sid, f"/cells/{slow['id']}/interrupt"))
        took = time.monotonic() - started
        runner.join(30)
        assert r.json() == {"cell_id": slow["id"], "status": "interrupted"}
        assert took < 2.0, took  # a sleeping cell stops at once, not after the grace period
        cell = outcome["run"]["cell"]
        assert cell["status"] == "error"
        assert cell["outputs"][0] == {"type": "stdout", "text": "started\n"}
        err = cell["outputs"][-1]
        assert err["ename"] == "KeyboardInterrupt" and err["interrupted"] is True
        assert "Interrupted by the user" in err["evalue"] and "kept its variables" in err["evalue"]
        assert [x["status"] for x in cells(c, sid)] == ["success", "error"]
        check = add_cell(c, sid, "kept + 1")
        assert c.post(nb_url(sid, f"/cells/{check['id']}/run")).json()["cell"]["outputs"] == [
            {"type": "text", "text": "42"}]


def test_a_cell_that_ignores_the_interrupt_is_stopped_by_a_kernel_restart(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        # SIGINT is ignored by a cell that has ended, so the stubborn cell ignores the interrupt from
        # its first instruction on (set in the same cell, the interrupt could come first).
        deaf = add_cell(c, sid, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)")
        assert c.post(nb_url(sid, f"/cells/{deaf['id']}/run")).json()["cell"]["status"] == "success"
        stubborn = add_cell(c, sid, "import time\ntime.sleep(120)")
        outcome: dict[str, Any] = {}

        def run() -> None:
            with server.client(timeout=60) as c2:
                outcome["run"] = c2.post(nb_url(sid, f"/cells/{stubborn['id']}/run")).json()

        runner = threading.Thread(target=run)
        runner.start()
        wait_for(lambda: cells(c, sid)[1]["status"] == "running", "the cell to run")
        started = time.monotonic()
        assert c.post(nb_url(sid, f"/cells/{stubborn['id']}/interrupt")).json()["status"] == "interrupted"
        took = time.monotonic() - started
        runner.join(30)
        assert 1.5 < took < 10, took  # the grace period (2 s), then the kill
        err = outcome["run"]["cell"]["outputs"][-1]
        assert err["interrupted"] is True and "kernel was restarted" in err["evalue"]
        assert cells(c, sid)[1]["status"] == "error"


def test_a_csv_is_uploaded_listed_loaded_on_use_queried_in_sql_and_deleted(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        r = upload(c, sid, ("sales.csv", CSV))
        assert r.status_code == 201, r.text
        info = r.json()["files"][0]
        assert {k: info[k] for k in ("name", "variable", "format", "bytes", "rows", "columns", "numeric_columns")} == {
            "name": "sales.csv", "variable": "sales", "format": "csv", "bytes": len(CSV), "rows": 4,
            "columns": ["region", "product", "units", "price"], "numeric_columns": ["units", "price"]}
        assert c.get(nb_url(sid, "/files")).json()["files"] == [info]
        assert c.get(nb_url(sid)).json()["files"] == [info]
        py = add_cell(c, sid, "int(sales.units.sum())")
        assert c.post(nb_url(sid, f"/cells/{py['id']}/run")).json()["cell"]["outputs"] == [
            {"type": "text", "text": "290"}]
        sql = add_cell(c, sid, "SELECT region, SUM(units) AS units FROM sales GROUP BY region ORDER BY units DESC",
                       language="sql")
        out = c.post(nb_url(sid, f"/cells/{sql['id']}/run")).json()["cell"]["outputs"][-1]
        assert out["type"] == "table" and out["rows"] == 3 and out["text"].split()[:4] == ["region", "units", "0",
                                                                                           "North"]
        raw = add_cell(c, sid, "open('sales.csv').read().splitlines()[0]")  # in the working directory, by name
        assert c.post(nb_url(sid, f"/cells/{raw['id']}/run")).json()["cell"]["outputs"] == [
            {"type": "text", "text": "'region,product,units,price'"}]
        assert c.delete(nb_url(sid, "/files/sales.csv")).json() == {"deleted": True}
        assert c.get(nb_url(sid, "/files")).json() == {"files": []}
        assert c.delete(nb_url(sid, "/files/sales.csv")).status_code == 404
        again = c.post(nb_url(sid, f"/cells/{raw['id']}/run")).json()["cell"]
        assert again["status"] == "error" and again["outputs"][-1]["ename"] == "FileNotFoundError"


def test_each_format_is_checked_by_its_content(server: Server, tmp_path: Path) -> None:
    from .test_notebook_formats import parquet, xlsx

    real_parquet, real_xlsx = parquet(tmp_path), xlsx()
    fake_xlsx = io.BytesIO()
    with zipfile.ZipFile(fake_xlsx, "w") as z:  # the right part names, but no sheet
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", "<workbook/>")
    other_zip = io.BytesIO()
    with zipfile.ZipFile(other_zip, "w") as z:
        z.writestr("word/document.xml", "<document/>")
    good = [("a.tsv", b"k\tv\nx\t1\n"), ("b.json", b'[{"k": "x", "v": 1}]'), ("c.parquet", real_parquet),
            ("d.xlsx", real_xlsx)]
    lies = [("png.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
            ("text.parquet", CSV, "Parquet"), ("broken.json", b'{"a": [1, 2', "not a JSON table"),
            ("marks.parquet", b"PAR1" + b"\0" * 8 + b"PAR1", "not a Parquet file"),  # its marks, no footer
            ("scalar.json", b"42", "not a JSON table"), ("doc.xlsx", other_zip.getvalue(), "not an Excel workbook"),
            ("nosheet.xlsx", fake_xlsx.getvalue(), "no worksheet"),
            ("csv.xlsx", CSV, "not an Excel workbook"), ("ragged.csv", b"a,b\n1,2\n1,2,3,4\n", "saw 4"),
            ("latin.csv", "name\ncaf\u00e9\n".encode("latin-1"), "UTF-8")]
    with server.client() as c:
        sid = new_session(c)
        r = upload(c, sid, *good)
        assert r.status_code == 201, r.text
        assert [f["format"] for f in r.json()["files"]] == ["tsv", "json", "parquet", "xlsx"]
        assert [f["rows"] for f in r.json()["files"]] == [1, 1, 4, 4]
        for name, data, why in lies:
            r = upload(c, sid, (name, data))
            assert r.status_code == 422, (name, r.text)
            assert r.json()["detail"][0]["loc"] == ["body", "files[0]"] and why in r.json()["message"], r.text
        r = upload(c, sid, ("fine.csv", CSV), ("png.csv", lies[0][1]))  # one bad file: nothing is stored
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "files[1]"]
        assert [f["name"] for f in c.get(nb_url(sid, "/files")).json()["files"]] == [n for n, _ in good]
        r = upload(c, sid, ("b.csv", CSV))  # b.json is loaded as b already
        assert r.status_code == 409 and "b.json" in r.json()["message"]


@pytest.mark.parametrize("name", ["../escape.csv", "a/b.csv", "..\\x.csv", ".hidden.csv", "sales.exe", "sales",
                                  "x" * 200 + ".csv", "a..b.csv", "/etc/passwd.csv", "-flag.csv"])
def test_file_names_that_could_escape_or_hide_are_refused(server: Server, name: str) -> None:
    with server.client() as c:
        sid = new_session(c)
        r = upload(c, sid, (name, CSV))
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "files", 0, "filename"]
        assert c.get(nb_url(sid, "/files")).json() == {"files": []}


def test_deleting_by_a_bad_name_is_refused(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        assert upload(c, sid, ("sales.csv", CSV)).status_code == 201
        for name in (".sales.csv", "sales.csv.bak", "..%2Fsales.csv"):
            r = c.delete(nb_url(sid, f"/files/{name}"))
            assert r.status_code in (404, 422), (name, r.text)
        r = c.delete(nb_url(sid, "/files/.sales.csv"))
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["path", "name"]
        assert [f["name"] for f in c.get(nb_url(sid, "/files")).json()["files"]] == ["sales.csv"]


def test_uploads_that_are_not_multipart_files_are_422(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        assert c.post(nb_url(sid, "/files"), json={"files": []}).status_code == 422
        r = c.post(nb_url(sid, "/files"), data={"note": "hi"}, files=[("files", ("a.csv", CSV, "text/csv"))])
        assert r.status_code == 422 and "form field" in r.json()["message"]
        r = c.post(nb_url(sid, "/files"), files=[("files", ("a.csv", CSV, "text/csv")),
                                                  ("files", ("a.csv", CSV, "text/csv"))])
        assert r.status_code == 422 and "twice" in r.json()["message"]


def test_the_notebook_exports_as_a_valid_ipynb_and_imports_into_an_empty_one(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c, title="Sales: a look")
        assert upload(c, sid, ("sales.csv", CSV)).status_code == 201
        a = add_cell(c, sid, "-- name: big\nSELECT * FROM sales WHERE units >= {{cut}}", language="sql")
        add_cell(c, sid, "cut = 60", index=0)
        c.post(nb_url(sid, f"/cells/{a['id']}/run"))
        r = c.get(nb_url(sid, ".ipynb"))
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/x-ipynb+json")
        assert 'filename="Sales-a-look.ipynb"' in r.headers["content-disposition"]
        nb = nbformat.reads(r.text, as_version=4)
        nbformat.validate(nb)
        assert [cell.metadata["turnstream"].get("language") for cell in nb.cells] == [None, "python", "sql"]
        assert "sales = pd.read_csv('sales.csv')" in nb.cells[0].source
        assert "duckdb.execute(" in nb.cells[2].source and ", [cut]).df()" in nb.cells[2].source
        assert nb.cells[2].outputs[-1]["output_type"] == "execute_result"
        other = new_session(c)
        r = c.post(nb_url(other, ".ipynb"), content=r.content, headers={"Content-Type": "application/x-ipynb+json"})
        assert r.status_code == 201, r.text
        imported = cells(c, other)
        assert [(x["language"], x["code"]) for x in imported] == [("python", "cut = 60"), ("sql", a["code"])]
        assert imported[1]["outputs"][-1]["type"] == "text"  # the table's text came along
        assert c.post(nb_url(other, ".ipynb"), content=r.request.content).status_code == 409
        bad = c.post(nb_url(new_session(c), ".ipynb"), content=b'{"cells": "no"}')
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "notebook", "cells"]


def test_an_ipynb_over_16_mib_is_413_and_imports_nothing(server: Server) -> None:
    cell = {"id": "c1", "cell_type": "code", "source": "x = 1", "metadata": {}, "outputs": [], "execution_count": None}
    doc = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"padding": "p" * (16 * 1024 * 1024)}, "cells": [cell]}
    body = json.dumps(doc).encode()
    assert len(body) > 16 * 1024 * 1024
    with server.client(timeout=60) as c:
        sid = new_session(c)
        r = c.post(nb_url(sid, ".ipynb"), content=body, headers={"Content-Type": "application/x-ipynb+json"})
        assert r.status_code == 413 and r.json()["error"] == "too_large", r.text[:300]

        def chunks() -> Any:  # no Content-Length: cut off as it arrives
            for i in range(0, len(body), 1 << 20):
                yield body[i:i + (1 << 20)]

        r = c.post(nb_url(sid, ".ipynb"), content=chunks(), headers={"Content-Type": "application/x-ipynb+json"})
        assert r.status_code == 413 and r.json()["error"] == "too_large", r.text[:300]
        assert cells(c, sid) == []
        doc["metadata"] = {}  # the same notebook under the limit imports
        r = c.post(nb_url(sid, ".ipynb"), content=json.dumps(doc).encode())
        assert r.status_code == 201, r.text
        assert [x["code"] for x in cells(c, sid)] == ["x = 1"]


def test_a_user_edit_reaches_another_tab_over_the_websocket(server: Server) -> None:
    from tests.integration.server.test_ws import tab

    with server.client() as c:
        sid = new_session(c)
        cell = add_cell(c, sid, "a = 1")
        with tab(server, sid) as ws:
            hello = json.loads(ws.recv(timeout=10))
            assert [x["code"] for x in hello["notebook"]["cells"]] == ["a = 1"]
            c.patch(nb_url(sid, f"/cells/{cell['id']}"), json={"code": "a = 2"})
            upload(c, sid, ("sales.csv", CSV))
            msgs = [json.loads(ws.recv(timeout=10)) for _ in range(2)]
        change, files = msgs
        assert change["change"] == "cell_updated" and change["cell"]["code"] == "a = 2"
        assert change["cell"]["edited_by"] == "user"
        assert files["type"] == "notebook_files" and files["files"][0]["name"] == "sales.csv"


def test_uploads_over_the_limits_are_413_and_store_nothing(tmp_path: Path, models: dict[str, str]) -> None:
    srv = start_server(tmp_path, model=models["echo"], env={"TURNSTREAM_NOTEBOOK_FILE_MB": "1",
                                                             "TURNSTREAM_NOTEBOOK_FILES_MB": "2"})
    try:
        row = b"North,A,120,9.5\n"
        big = CSV + row * (1024 * 1024 // len(row) + 1)  # just over 1 MiB
        fits = CSV + row * (700 * 1024 // len(row))  # about 0.7 MiB
        with srv.client() as c:
            sid = new_session(c)
            r = upload(c, sid, ("big.csv", big))
            assert r.status_code == 413 and r.json()["error"] == "too_large", r.text
            assert r.json()["message"].startswith("files[0]: big.csv is "), r.text  # the refusal names the file
            r = upload(c, sid, ("a.csv", fits), ("b.csv", fits), ("c.csv", fits))  # 2.1 MiB together
            assert r.status_code == 413, r.text
            assert c.get(nb_url(sid, "/files")).json() == {"files": []}
            assert upload(c, sid, ("a.csv", fits), ("b.csv", fits)).status_code == 201
            assert upload(c, sid, ("c.csv", fits)).status_code == 413  # with the two stored ones
            assert upload(c, sid, ("a.csv", CSV)).status_code == 201  # replacing one counts its new size only
            # A body larger than any upload may be is cut off as it arrives (no Content-Length to trust).
            def chunks() -> Any:
                yield b"--x\r\nContent-Disposition: form-data; name=\"files\"; filename=\"h.csv\"\r\n\r\n"
                for _ in range(64):
                    yield b"a" * 65536
            r = c.post(nb_url(sid, "/files"), content=chunks(),
                       headers={"Content-Type": "multipart/form-data; boundary=x"})
            assert r.status_code == 413, r.text
            assert sorted(f["name"] for f in c.get(nb_url(sid, "/files")).json()["files"]) == ["a.csv", "b.csv"]
    finally:
        srv.stop()
    assert server_errors(srv) == []


def test_restart_marks_the_cells_that_ran_and_restart_and_run_all_runs_them(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        first = add_cell(c, sid, "a = 20")
        second = add_cell(c, sid, "a * 2 + 2")
        assert c.post(nb_url(sid, f"/cells/{second['id']}/run")).json()["cell"]["status"] == "success"
        r = c.post(nb_url(sid, "/restart"), json={"run_all": "yes please"})
        assert r.status_code == 422 and "run_all" in r.text
        r = c.post(nb_url(sid, "/restart"), json={})
        assert r.status_code == 200, r.text
        assert r.json()["ran"] == []
        assert [(x["previous_kernel"], x["stale"]) for x in r.json()["cells"]] == [(True, True), (True, True)]
        assert [(x["previous_kernel"], x["stale"]) for x in cells(c, sid)] == [(True, True), (True, True)]
        r = c.post(nb_url(sid, "/restart"), json={"run_all": True})
        assert r.status_code == 200, r.text
        assert r.json()["ran"] == [first["id"], second["id"]]
        after = r.json()["cells"]
        assert [(x["status"], x["previous_kernel"], x["stale"]) for x in after] == [("success", False, False)] * 2
        assert after[1]["outputs"] == [{"type": "text", "text": "42"}]


def test_a_run_that_waits_on_an_interrupted_cell_says_so(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        loop = add_cell(c, sid, "n = 0\nwhile True:\n    n += 1")
        uses = add_cell(c, sid, "n")
        running = threading.Thread(target=lambda: c.post(nb_url(sid, f"/cells/{loop['id']}/run")))
        running.start()
        wait_for(lambda: cells(c, sid)[0]["status"] == "running", "the loop to run")
        assert c.post(nb_url(sid, f"/cells/{loop['id']}/interrupt")).json()["status"] == "interrupted"
        running.join()
        r = c.post(nb_url(sid, f"/cells/{uses['id']}/run"))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["note"] == f"Waits on #{loop['id']}, which was interrupted: run or edit it."
        assert (body["cell"]["status"], body["cell"]["blocked_by"]) == ("blocked", loop["id"])
        assert cells(c, sid)[0]["execution_count"] == 1


def test_export_then_import_into_a_new_chat_then_run_all_gives_the_same_outputs(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c, title="Round trip")
        assert upload(c, sid, ("sales.csv", CSV)).status_code == 201
        add_cell(c, sid, "units = sales.units.sum()\nunits")
        add_cell(c, sid, "-- name: top\nSELECT region, units FROM sales ORDER BY units DESC LIMIT 1", language="sql")
        ran = c.post(nb_url(sid, "/restart"), json={"run_all": True}).json()
        assert [x["status"] for x in ran["cells"]] == ["success", "success"]
        exported = c.get(nb_url(sid, ".ipynb"))
        carried = exported.json()["metadata"]["turnstream"]["files"]
        assert [f["name"] for f in carried] == ["sales.csv"] and "data" in carried[0]

        other = new_session(c)
        r = c.post(nb_url(other, ".ipynb"), content=exported.content,
                   headers={"Content-Type": "application/x-ipynb+json"})
        assert r.status_code == 201, r.text
        state = c.get(nb_url(other)).json()
        assert [(f["name"], f["sha256"]) for f in state["files"]] == [("sales.csv", ran["files"][0]["sha256"])]
        assert [x["code"] for x in state["cells"]] == [x["code"] for x in ran["cells"]]  # no file-reading cell
        again = c.post(nb_url(other, "/restart"), json={"run_all": True}).json()
        assert [x["status"] for x in again["cells"]] == ["success", "success"]
        assert [x["outputs"] for x in again["cells"]] == [x["outputs"] for x in ran["cells"]]


def test_an_import_without_its_data_file_names_the_file_to_upload(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        assert upload(c, sid, ("sales.csv", CSV)).status_code == 201
        add_cell(c, sid, "sales.units.sum()")
        doc = c.get(nb_url(sid, ".ipynb")).json()
        del doc["metadata"]["turnstream"]["files"][0]["data"]  # as a file past the cap travels
        other = new_session(c)
        assert c.post(nb_url(other, ".ipynb"), content=json.dumps(doc).encode()).status_code == 201
        state = c.get(nb_url(other)).json()
        assert state["files"] == [] and len(state["cells"]) == 2  # the cell that reads the file stays
        ran = c.post(nb_url(other, f"/cells/{state['cells'][1]['id']}/run")).json()
        failed = c.get(nb_url(other)).json()["cells"][0]
        assert ran["cell"]["status"] == "blocked" and failed["status"] == "error"
        error = failed["outputs"][-1]
        assert error["ename"] == "FileNotFoundError" and "Upload sales.csv to the notebook" in error["evalue"]
        bad = json.loads(json.dumps(doc))
        bad["metadata"]["turnstream"]["files"][0]["data"] = "not base64!"
        r = c.post(nb_url(new_session(c), ".ipynb"), content=json.dumps(bad).encode())
        assert r.status_code == 422 and "base64" in r.text


def test_hostile_uploads_are_422_naming_the_file_never_500(server: Server) -> None:
    from tests.integration.notebook.test_notebook_uploads import attacks

    hostile = {k: v for k, v in attacks().items() if k != "bomb.xlsx"}  # the bomb runs into the time limit
    with server.client() as c:
        sid = new_session(c)
        for name, data in hostile.items():
            r = upload(c, sid, (name, data))
            assert r.status_code == 422, (name, r.status_code, r.text[:300])
            assert r.json()["detail"][0]["loc"] == ["body", "files[0]"] and name in r.json()["message"], r.text
        assert c.get(nb_url(sid, "/files")).json()["files"] == []
