"""A private Redis Cluster on loopback for the tests (beside ``redis_util.py``, which
runs one server): ``start_cluster``/``stop_cluster`` (the fixtures ``redis_cluster``,
three primaries for the session, and ``failover_cluster``, three primaries with a
replica each for one test that kills nodes, are in ``tests/conftest.py``), and
``cluster_server``: ``aqueue.redis.connect(url, cluster=True)`` with the tests' settings.

Each node is Debian's ``redis-server`` with ``--cluster-enabled yes`` on a free port
(the cluster bus takes that port + 10000, so both must be free), its own directory
(``nodes-<port>.conf`` lives there), no persistence, ``noeviction`` and one random
password (``masterauth`` too, so replicas can sync). ``redis-cli --cluster create``
assigns the slots (and the replicas); the start returns once every node reports
``cluster_state:ok``, knows every other node, every replica's link is up and every
primary's writes reach its replicas.
``stop_cluster`` stops every process it started (SIGTERM, then SIGKILL, by PID) and
removes the directories, so no node and no ``nodes-*.conf`` outlives the fixture.
The binaries come from ``$AQUEUE_REDIS_SERVER`` (``redis-cli`` beside it) or PATH;
without them the tests skip, or fail under ``CI=true``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster
from redis.crc import key_slot

from aqueue.redis import RedisServer
from aqueue.redis import connect as _connect  # (bound here: tests replace aqueue.redis.connect)

__all__ = [
    "FAILOVER_NODE_TIMEOUT_MS",
    "AllNodes",
    "OneShard",
    "SESSION_NODE_TIMEOUT_MS",
    "SPIN_LIBRARY",
    "ClusterProc",
    "NodeProc",
    "cluster_server",
    "start_cluster",
    "stop_cluster",
]

# A function library for fault tests: ``spin`` counts its run under KEYS[1], then holds
# the node's thread for ARGV[1] ms, so a call is certainly in flight when the node dies.
SPIN_LIBRARY = """#!lua name=aqspin
redis.register_function('spin', function(keys, args)
  redis.call('INCR', keys[1])
  local t = redis.call('TIME')
  local t0 = t[1] * 1e6 + t[2]
  while true do
    t = redis.call('TIME')
    if t[1] * 1e6 + t[2] - t0 > tonumber(args[1]) * 1000 then break end
  end
  return 1
end)
"""

# Short enough that a failover test takes seconds, long enough that a node busy on a
# shared 2-core machine is not declared failed by mistake.
FAILOVER_NODE_TIMEOUT_MS = 1000
SESSION_NODE_TIMEOUT_MS = 5000


@dataclass
class NodeProc:
    """One node: its process, port and directory."""

    proc: subprocess.Popen[bytes]
    port: int
    dir: Path

    @property
    def name(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class ClusterProc:
    """A private cluster: its nodes, password and node timeout."""

    nodes: list[NodeProc]
    password: str
    node_timeout_ms: int
    shards: int
    replicas: int
    dir: Path
    binary: str
    killed: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        """A URL naming one live node (clients discover the others)."""
        port = next(n.port for n in self.nodes if n.alive())
        return f"redis://:{self.password}@127.0.0.1:{port}/0"

    def node(self, port: int) -> NodeProc:
        return next(n for n in self.nodes if n.port == port)

    def client(self, port: int) -> redis.Redis:
        """A raw admin client of one node (tests only)."""
        return redis.Redis(host="127.0.0.1", port=port, password=self.password)

    def topology(self) -> dict[int, tuple[str, int | None, list[tuple[int, int]]]]:
        """port -> (role "primary"/"replica", its primary's port, slot ranges), as a
        live node sees it (failed nodes included, with their last role)."""
        alive = next(n for n in self.nodes if n.alive() and n.port not in self.killed)
        with self.client(alive.port) as c:
            rows = c.execute_command("CLUSTER NODES")
        ports = {row["node_id"]: int(addr.rsplit(":", 1)[1]) for addr, row in rows.items()}
        out: dict[int, tuple[str, int | None, list[tuple[int, int]]]] = {}
        for addr, row in rows.items():
            primary = "master" in row["flags"].split(",")
            ranges = sorted((int(r[0]), int(r[-1])) for r in row["slots"])
            owner = None if primary else ports.get(row["master_id"])
            out[int(addr.rsplit(":", 1)[1])] = ("primary" if primary else "replica", owner, ranges)
        return out

    def primaries(self) -> list[int]:
        """Ports of the primaries that serve slots, in slot order."""
        topo = self.topology()
        rows = [(r[2][0][0], p) for p, r in topo.items() if r[0] == "primary" and r[2]]
        return [p for _, p in sorted(rows)]

    def owner(self, key: str) -> int:
        """Port of the primary serving ``key``'s slot."""
        slot = key_slot(key.encode())
        for port, (role, _, ranges) in self.topology().items():
            if role == "primary" and any(lo <= slot <= hi for lo, hi in ranges):
                return port
        raise LookupError(f"no primary serves slot {slot}")

    def name_on(self, port: int, prefix: str = "t") -> str:
        """A fresh queue or table name whose hash tag (the name) the primary at
        ``port`` serves."""
        while True:
            name = f"{prefix}-{secrets.token_hex(4)}"
            if self.owner(f"{{{name}}}") == port:
                return name

    def replica_of(self, port: int) -> int:
        """Port of a replica of primary ``port``."""
        for p, (role, owner, _) in self.topology().items():
            if role == "replica" and owner == port and p not in self.killed:
                return p
        raise LookupError(f"primary {port} has no replica")

    def node_id(self, port: int) -> str:
        with self.client(port) as c:
            out = c.execute_command("CLUSTER MYID")
        return out.decode() if isinstance(out, bytes) else str(out)

    def add_node(self) -> int:
        """Start one more node, empty, and have it join the cluster (CLUSTER MEET,
        not ``redis-cli --cluster add-node``, which would copy the functions): a
        primary without slots. Its port."""
        port = _free_ports(1)[0]
        node = _start_node(self.binary, port, self.dir, self.password, self.node_timeout_ms)
        self.nodes.append(node)
        if not _answers(self, node, 2.0):
            pytest.fail(f"the added node {port} did not answer PING")
        with self.client(self.primaries()[0]) as c:
            c.execute_command("CLUSTER MEET", "127.0.0.1", port)
        self.wait_ok()
        return port

    def move_slot(self, slot: int, port: int) -> None:
        """Give the (empty) ``slot`` to the primary at ``port`` as a resharding does
        (IMPORTING on the target, MIGRATING on the owner, then NODE on the target, which
        bumps its config epoch, the owner and the rest), and wait until every node
        agrees."""
        owner = next(
            p
            for p, (role, _, ranges) in self.topology().items()
            if role == "primary" and any(lo <= slot <= hi for lo, hi in ranges)
        )
        if owner == port:
            return
        target, source = self.node_id(port), self.node_id(owner)
        with self.client(port) as c:
            c.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source)
        with self.client(owner) as c:
            c.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target)
        others = [n.port for n in self.nodes if n.alive() and n.port not in (port, owner)]
        for p in [port, owner, *others]:
            with self.client(p) as c:
                c.execute_command("CLUSTER SETSLOT", slot, "NODE", target)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            views = set()
            for n in self.nodes:
                if n.alive() and n.port not in self.killed:
                    with self.client(n.port) as c:
                        rows = c.execute_command("CLUSTER NODES")
                    views.update(
                        addr
                        for addr, row in rows.items()
                        if any(int(r[0]) <= slot <= int(r[-1]) for r in row["slots"])
                    )
            if views == {f"127.0.0.1:{port}"}:
                self.wait_ok()
                return
            time.sleep(0.02)
        pytest.fail(f"the nodes do not agree that slot {slot} moved to {port}")

    def kill(self, port: int) -> None:
        """kill -9 one node."""
        node = self.node(port)
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(5)
        self.killed.append(port)

    def wait_ok(self, limit_s: float = 20.0) -> None:
        """Until every live node reports ``cluster_state:ok``, knows the same nodes,
        every replica's link to its primary is up and a write to each primary reaches
        its replicas (pytest.fail after ``limit_s``)."""
        deadline = time.monotonic() + limit_s
        live = [n for n in self.nodes if n.port not in self.killed]
        last = ""
        while time.monotonic() < deadline:
            try:
                last = _not_ok(self, live)
            except redis.RedisError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if not last:
                return
            time.sleep(0.05)
        pytest.fail(f"the cluster is not ok after {limit_s} s: {last}")

    def wait_promoted(self, dead: int, limit_s: float = 30.0) -> int:
        """Until a replica of the killed primary ``dead`` serves its slots and the
        cluster is ok again; the new primary's port."""
        deadline = time.monotonic() + limit_s
        before = next(r for p, r in self.topology().items() if p == dead)[2]
        while time.monotonic() < deadline:
            for port, (role, _, ranges) in self.topology().items():
                if role == "primary" and port != dead and ranges and ranges[0] == before[0]:
                    self.wait_ok(max(1.0, deadline - time.monotonic()))
                    return port
            time.sleep(0.02)
        pytest.fail(f"no replica took over from {dead} within {limit_s} s")


def _not_ok(cluster: ClusterProc, live: list[NodeProc]) -> str:
    """Why the cluster is not ok yet ("" when it is): every live node must see the
    cluster ok, every node, the shards' primaries and their live replicas; then each
    primary's writes must reach its replicas."""
    replicas = cluster.shards * cluster.replicas - len(cluster.killed)
    followed: dict[int, int] = {}  # primary's port: its connected replicas
    for node in live:
        if not node.alive():
            return f"node {node.port} exited"
        with cluster.client(node.port) as c:
            info = c.cluster("INFO")
            if info.get("cluster_state") != "ok":
                return f"node {node.port}: cluster_state {info.get('cluster_state')}"
            if int(info.get("cluster_known_nodes", 0)) != len(cluster.nodes):
                return f"node {node.port} knows {info.get('cluster_known_nodes')} nodes"
            rows = c.execute_command("CLUSTER NODES").values()
            flags = [set(r["flags"].split(",")) for r in rows if "fail" not in r["flags"]]
            serving = sum(1 for r in rows if r["slots"] and "master" in r["flags"])
            seen = sum(1 for f in flags if "slave" in f)
            if serving < cluster.shards or seen != replicas:
                return f"node {node.port} sees {serving} primaries and {seen} replicas"
            repl = c.info("replication")
            if repl.get("role") == "slave" and repl.get("master_link_status") != "up":
                return f"replica {node.port}: link to its primary is down"
            if repl.get("role") == "master" and int(repl.get("connected_slaves", 0)):
                followed[node.port] = int(repl["connected_slaves"])
    for port, count in followed.items():
        if why := _not_streaming(cluster, port, count):
            return why
    return ""


def _not_streaming(cluster: ClusterProc, port: int, replicas: int) -> str:
    """Why the writes of the primary at ``port`` may not reach its ``replicas`` yet
    ("" when they do). A replica's link is up once it has loaded the primary's
    snapshot, but after a diskless sync the primary streams its writes only after that
    replica's next ``REPLCONF ACK``, up to a second later; a primary killed in that
    second takes the writes with it. So: one write, and ``WAIT`` until every replica
    has it."""
    with cluster.client(port) as c:
        key = f"{{{cluster.name_on(port, 'sync')}}}:streaming"
        c.set(key, 1)
        acked = int(c.execute_command("WAIT", replicas, 200))
        c.delete(key)
    if acked < replicas:
        return f"primary {port}: {acked} of {replicas} replicas have its last write"
    return ""


def _binaries() -> tuple[str, str] | None:
    server = os.environ.get("AQUEUE_REDIS_SERVER") or shutil.which("redis-server")
    if server is None:
        return None
    beside = Path(server).with_name("redis-cli")
    cli = str(beside) if beside.exists() else shutil.which("redis-cli")
    return None if cli is None else (server, cli)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """``count`` ports p, each with p + 10000 (its cluster bus port) free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + 10000 <= 65535 and port not in ports and _free(port + 10000):
            ports.append(port)
    return ports


def _start_node(binary: str, port: int, base: Path, password: str, timeout_ms: int) -> NodeProc:
    folder = base / str(port)
    folder.mkdir(parents=True, exist_ok=True)
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes"]
    args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
    args += ["--cluster-node-timeout", str(timeout_ms)]
    # A replica takes over however long it has been out of touch (the default refuses
    # one whose data is older than 10 node timeouts: a busy test machine trips it).
    args += ["--cluster-replica-validity-factor", "0"]
    # A replica's first sync starts at once (the default waits 5 s for more replicas).
    args += ["--repl-diskless-sync-delay", "0"]
    args += ["--save", "", "--appendonly", "no", "--maxmemory", "256mb"]
    args += ["--maxmemory-policy", "noeviction", "--requirepass", password]
    args += ["--masterauth", password, "--dir", str(folder), "--loglevel", "warning"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return NodeProc(proc, port, folder)


def _answers(cluster: ClusterProc, node: NodeProc, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and node.alive():
        try:
            with cluster.client(node.port) as c:
                if c.ping():
                    return True
        except redis.ConnectionError:
            time.sleep(0.01)
    return False


def start_cluster(
    tmp: Path, *, primaries: int = 3, replicas: int = 0, node_timeout_ms: int = 5000
) -> ClusterProc:
    """Start ``primaries`` nodes with ``replicas`` replicas each and create the cluster;
    return once it is ok (see the module docstring)."""
    found = _binaries()
    if found is None:
        msg = (
            "no redis-server/redis-cli: set AQUEUE_REDIS_SERVER or put both on PATH "
            "(Debian: apt-get install redis-server, which brings redis-tools)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    server, cli = found
    count = primaries * (1 + replicas)
    why = ""
    for attempt in range(5):
        password = secrets.token_hex(16)
        base = tmp / f"cluster{attempt}"
        nodes = [
            _start_node(server, p, base, password, node_timeout_ms) for p in _free_ports(count)
        ]
        cluster = ClusterProc(nodes, password, node_timeout_ms, primaries, replicas, base, server)
        if not all(_answers(cluster, n, 2.0) for n in nodes):
            why = "a node did not answer PING within 2 s (port taken meanwhile?)"
            stop_cluster(cluster)
            continue
        create = [cli, "--cluster", "create", *(n.name for n in nodes)]
        create += ["--cluster-replicas", str(replicas), "--cluster-yes"]
        env = {**os.environ, "REDISCLI_AUTH": password}
        done = subprocess.run(create, env=env, capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            why = f"redis-cli --cluster create failed: {done.stdout.decode()[-2000:]}"
            stop_cluster(cluster)
            continue
        try:
            cluster.wait_ok()
        except BaseException:
            stop_cluster(cluster)
            raise
        return cluster
    pytest.fail(f"could not start a Redis Cluster (5 attempts): {why}")


def stop_cluster(cluster: ClusterProc) -> None:
    """Stop every node (SIGTERM, then SIGKILL after 2 s, by PID) and remove the
    directories with their ``nodes-*.conf``."""
    for node in cluster.nodes:
        if node.alive():
            node.proc.send_signal(signal.SIGTERM)
    for node in cluster.nodes:
        try:
            node.proc.wait(2)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait(2)
    shutil.rmtree(cluster.dir, ignore_errors=True)


class AllNodes:
    """Stands for a test's ``redis_server`` (``redis_util.RedisProc``) where it reads a
    queue's or table's keys: its client is a cluster client (SCAN visits every
    primary; a key's command goes to the node serving it)."""

    def __init__(self, cluster: ClusterProc) -> None:
        self._cluster = cluster

    def client(self) -> redis.cluster.RedisCluster:
        port = self._cluster.primaries()[0]
        return redis.cluster.RedisCluster(
            host="127.0.0.1", port=port, password=self._cluster.password
        )


# -- a RedisServer over a cluster -----------------------------------------------------------


def cluster_server(
    url: str, *, failover_timeout: float = 20.0, load_functions: bool = True, **kw: Any
) -> RedisServer:
    """``aqueue.redis.connect(url, cluster=True, ...)`` with the tests' settings (shorter
    waits, large calls); ``connect()``'s other arguments in ``kw``."""
    opts: dict[str, Any] = {"lease_time": 30.0, "wait_timeout": 0.2, "socket_timeout": 10.0}
    opts.update(kw)
    return _connect(
        url,
        cluster=True,
        failover_timeout=failover_timeout,
        load_functions=load_functions,
        max_call_bytes=64 << 20,
        **opts,
    )


class OneShard:
    """A server whose tables and queues default to ``shards=1``:
    today's one-tag object, for the test bodies written for it (a cluster's default is
    one shard per primary)."""

    def __init__(self, server: RedisServer) -> None:
        self._server = server

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    async def replay_table(self, *args: Any, **kw: Any) -> Any:
        kw.setdefault("shards", 1)
        return await self._server.replay_table(*args, **kw)

    async def fifo_queue(self, *args: Any, **kw: Any) -> Any:
        kw.setdefault("shards", 1)
        return await self._server.fifo_queue(*args, **kw)

    async def random_shuffle_queue(self, *args: Any, **kw: Any) -> Any:
        kw.setdefault("shards", 1)
        return await self._server.random_shuffle_queue(*args, **kw)


class OneShardBlock:
    """``async with OneShardBlock(cluster_server(...)) as srv``: ``srv`` a OneShard."""

    def __init__(self, block: Any) -> None:
        self._block = block

    async def __aenter__(self) -> OneShard:
        return OneShard(await self._block.__aenter__())

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._block.__aexit__(*exc)
