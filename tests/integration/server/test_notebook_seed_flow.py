"""The seed flow of a newcomer, over HTTP on one real server that is never restarted (issue 26):
build a notebook on an uploaded file, Stop while a cell imports a module, restart the kernel,
edit, run, export, import into a new chat, and Restart and run all: the same outputs."""

from __future__ import annotations

import threading

from tests.integration.notebook.test_notebook_restart import IMPORT_PACKAGE, WRITE_PACKAGE
from tests.support.processes import kernel_processes, wait_for
from tests.support.server import Server, new_session

from .test_notebook_api import CSV, add_cell, cells, nb_url, upload


def sleeping(server: Server) -> bool:
    """Whether a kernel of the server sleeps (in the slow import: nothing else there sleeps)."""
    for pid in kernel_processes(server.proc.pid):
        try:
            with open(f"/proc/{pid}/wchan") as f:
                if "nanosleep" in f.read():
                    return True
        except OSError:
            continue
    return False


def test_stop_mid_import_restart_edit_run_export_import_run_all_without_a_server_restart(server: Server) -> None:
    with server.client(timeout=60) as c:
        sid = new_session(c, title="Seed flow")
        assert upload(c, sid, ("sales.csv", CSV)).status_code == 201
        writer = add_cell(c, sid, WRITE_PACKAGE.format(tag=sid, delay=60))
        importer = add_cell(c, sid, IMPORT_PACKAGE)
        total = add_cell(c, sid, "int(sales.units.sum())")

        # Stop while the cell imports: the kernel restarts itself and the cell says why.
        ran: dict[str, object] = {}
        run = threading.Thread(target=lambda: ran.update(c.post(nb_url(sid, f"/cells/{importer['id']}/run")).json()))
        run.start()
        wait_for("the import to sleep", lambda: sleeping(server), timeout=30)
        assert c.post(nb_url(sid, f"/cells/{importer['id']}/interrupt")).json()["status"] == "interrupted"
        run.join(timeout=30)
        error = ran["cell"]["outputs"][-1]  # type: ignore[index]
        assert "half-imported" in error["evalue"] and "restarted" in error["evalue"], error

        # Restart, make the import quick, run: it imports whole.
        assert c.post(nb_url(sid, "/restart"), json={}).status_code == 200
        r = c.patch(nb_url(sid, f"/cells/{writer['id']}"), json={"code": WRITE_PACKAGE.format(tag=sid, delay=0)})
        assert r.status_code == 200, r.text
        done = c.post(nb_url(sid, f"/cells/{importer['id']}/run")).json()
        assert done["cell"]["outputs"] == [{"type": "text", "text": "'ready'"}], done
        first = c.post(nb_url(sid, "/restart"), json={"run_all": True}).json()
        assert [x["status"] for x in first["cells"]] == ["success"] * 3

        # Export, import into a new chat, Restart and run all: the same outputs, the file came along.
        exported = c.get(nb_url(sid, ".ipynb"))
        other = new_session(c)
        assert c.post(nb_url(other, ".ipynb"), content=exported.content).status_code == 201
        again = c.post(nb_url(other, "/restart"), json={"run_all": True}).json()
        assert [x["outputs"] for x in again["cells"]] == [x["outputs"] for x in first["cells"]]
        assert again["cells"][2]["outputs"] == [{"type": "text", "text": str(sum((120, 80, 60, 30)))}]
        assert [x["code"] for x in cells(c, other)] == [x["code"] for x in first["cells"]]
        assert first["cells"][2]["id"] == total["id"]
