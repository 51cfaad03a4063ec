"""The cluster suite's fixtures: a whole cluster per test (``tests/support/cluster.py``: a
PostgreSQL of its own, three ``turnstream serve`` in network namespaces, HAProxy running
``deploy/haproxy.cfg``), its model played by the session's mock provider (relayed onto the
cluster's bridge), its server tools from ``cluster_tools.py``.

The cluster needs root (namespaces, links) and HAProxy: without them every test here fails
with the reason, never skips (``.ci/run`` runs this suite as root after installing HAProxy).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.cluster.client import StartCluster
from tests.support.cluster import LocalCluster, running
from tests.support.mock_provider import MockHandle

TOOLS = "tests.cluster.cluster_tools:TOOLS"


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    """Where the nodes' tools record their runs (``cluster_tools.py``)."""
    d = tmp_path / "runs"
    d.mkdir()
    return d


@pytest.fixture
def start_cluster(mock_provider: MockHandle, runs_dir: Path, tmp_path: Path) -> Iterator[StartCluster]:
    """``start_cluster(model=..., **env)``: a running cluster whose nodes play ``model`` from
    the mock provider; removed at the end of the test, however it ends (the logs of its
    nodes and of HAProxy kept in the test's ``cluster-logs`` folder)."""
    with ExitStack() as stack:
        def start(model: str, nodes: int = 3, **env: str) -> LocalCluster:
            # a short shutdown grace: the cluster's removal does not wait 30 s for running turns
            node_env = {"TURNSTREAM_MODEL": model, "TURNSTREAM_TOOLS": TOOLS, "TURNSTREAM_SHUTDOWN_GRACE": "2",
                        "TURNSTREAM_TEST_CLUSTER_DIR": str(runs_dir), **env}
            return stack.enter_context(running(nodes=nodes, env=node_env, provider=mock_provider.base_url,
                                               logs_to=tmp_path / "cluster-logs"))

        yield start

