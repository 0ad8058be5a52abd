"""The local cluster the tests run on (``tests/redis_cluster_util.py``): it serves every
slot from three primaries, gives each primary a replica when asked (checked where a
test uses them, ``test_cluster_faults.py``), leaves no process and no
``nodes-*.conf`` behind, and without its binaries skips, or fails under CI."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

import pytest
import redis_cluster_util
from redis_cluster_util import ClusterProc, start_cluster, stop_cluster

pytestmark = pytest.mark.timeout(60)


def test_three_primaries_serve_every_slot(redis_cluster: ClusterProc) -> None:
    topo = redis_cluster.topology()
    primaries = redis_cluster.primaries()
    assert len(primaries) == 3
    ranges = sorted(r for p in primaries for r in topo[p][2])
    assert (ranges[0][0], ranges[-1][1]) == (0, 16383)
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))
    with redis_cluster.client(primaries[0]) as c:
        assert c.cluster("INFO")["cluster_state"] == "ok"


def test_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, primaries=3)
    try:
        confs = sorted(cluster.dir.glob("*/nodes-*.conf"))
        assert len(confs) == 3
        ports = [n.port for n in cluster.nodes]
    finally:
        stop_cluster(cluster)
    assert all(not n.alive() for n in cluster.nodes)
    assert not cluster.dir.exists()
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.parametrize("ci", ["true", ""])
def test_without_binaries_skip_or_fail_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("AQUEUE_REDIS_SERVER", raising=False)
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci == "true" else pytest.skip.Exception
    with pytest.raises(outcome, match="redis-server/redis-cli"):
        start_cluster(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_binaries_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """$AQUEUE_REDIS_SERVER names the server; redis-cli is taken from beside it."""
    fake = tmp_path / "redis-server"
    fake.write_text("")
    monkeypatch.setenv("AQUEUE_REDIS_SERVER", str(fake))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert redis_cluster_util._binaries() is None  # no redis-cli beside it nor on PATH
    (tmp_path / "redis-cli").write_text("")
    assert redis_cluster_util._binaries() == (str(fake), str(tmp_path / "redis-cli"))
