"""The examples that share a Redis server: examples/distributed_replay.py runs end to
end (small sizes) against the session's server and says, in plain words, that every
screen arrived exactly once; it and examples/replay_table.py leave nothing on a shared
server however they end (done, Ctrl-C, SIGTERM, an error), say so in one line when
interrupted, and replay_table.py --redis without the redis extra says so before it
starts a server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from redis_util import RedisProc

pytestmark = pytest.mark.timeout(90)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed_replay.py"


def test_distributed_replay_example(redis_server: RedisProc, url: str) -> None:
    """A whole run with the default queue name ('replay-<pid>'): every screen arrives
    once, and the trainer deletes its three queues at the end."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--url", url, "--screens", "15", "--batch", "8"],
        capture_output=True,
        text=True,
        timeout=80,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "received 120 distinct screens of 120" in done.stdout
    assert "every screen arrived exactly once" in done.stdout
    assert "closed itself after the last actor" in done.stdout
    assert _keys(redis_server, "replay-") == []


def test_distributed_replay_on_two_hosts(redis_server: RedisProc, url: str) -> None:
    """The two-host recipe of the Redis guide (docs/guides/redis.md): a trainer process
    (--role trainer) and, started
    separately, an actors process (--role actors) that share only the server URL; the
    trainer deletes the queues at the end."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    common = ["--url", url, "--name", "two-hosts", "--actors", "3", "--screens", "10"]
    trainer = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--role", "trainer", *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert trainer.stdout is not None
        assert "The trainer is ready" in trainer.stdout.readline()  # registered its guard
        actors = subprocess.run(
            [sys.executable, str(EXAMPLE), "--role", "actors", *common],
            capture_output=True,
            text=True,
            timeout=80,
            env=env,
            check=False,
        )
        out, err = trainer.communicate(timeout=80)  # the rest of its output
    finally:
        trainer.kill()
    assert actors.returncode == 0, actors.stderr
    assert "3 actor processes sent their screens and ended" in actors.stdout
    assert trainer.returncode == 0, err
    assert "received 60 distinct screens of 60" in out
    assert "every screen arrived exactly once" in out
    assert _keys(redis_server, "two-hosts") == []


def _trainer(url: str, *args: str) -> subprocess.Popen[str]:
    """A trainer process (--role trainer), once it has said it is ready."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    trainer = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--role", "trainer", "--url", url, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own terminal, as it were: Ctrl-C reaches it alone
    )
    assert trainer.stdout is not None
    assert "The trainer is ready" in trainer.stdout.readline()  # registered its guard
    return trainer


def test_the_trainer_counts_what_the_actors_sent(url: str) -> None:
    """Actors started with another --screens than the trainer: the trainer checks and
    reports what they sent (3 x 2 x 10 = 60 screens), and its rates are computed from
    what arrived."""
    common = ["--name", "other-screens", "--actors", "3"]
    few = ["--screens", "10"]
    trainer = _trainer(url, *common, "--screens", "25")
    try:
        env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
        actors = subprocess.run(
            [sys.executable, str(EXAMPLE), "--role", "actors", "--url", url, *common, *few],
            capture_output=True,
            text=True,
            timeout=80,
            env=env,
            check=False,
        )
        out, err = trainer.communicate(timeout=80)
    finally:
        trainer.kill()
    assert actors.returncode == 0, actors.stderr
    assert trainer.returncode == 0, out + err
    text = " ".join(out.split())
    assert "received 60 distinct screens of 60 sent by 3 actor processes" in text
    assert "every screen arrived exactly once" in text
    m = re.search(r"It took ([0-9.]+) s: ([0-9,]+) screens/s \(([0-9]+) MB/s\)", text)
    assert m is not None, text
    rate, mb = float(m[2].replace(",", "")), int(m[3])
    # 60 frames of 84 x 84 x 4 bytes arrived; the MB/s follow from the screens/s.
    assert abs(mb - rate * 84 * 84 * 4 / 1e6) <= 1


async def _until_screens_flow(url: str, name: str, actors: int) -> None:
    """Wait until every actor has announced itself (it has opened the three queues,
    so none opens one again, which would create it after the trainer's deletes) and
    screens flow into the shared queue."""
    import anyio
    import numpy as np

    import aqueue.redis

    async with aqueue.redis.connect(url) as server:
        q = await server.random_shuffle_queue(name, 1000, 100, np.uint8, (84, 84, 4))
        ready = await server.fifo_queue(f"{name}-ready", 64, np.int64, ())
        with anyio.fail_after(60):
            while (await ready.statistics()).enqueued_total < actors:  # noqa: ASYNC110
                await anyio.sleep(0.05)
            while (await q.statistics()).enqueued_total == 0:  # noqa: ASYNC110 - other processes
                await anyio.sleep(0.05)


def test_ctrl_c_prints_one_line_per_process(redis_server: RedisProc, url: str) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) on the actors'
    host and then on the trainer's: one line per actor process, one for the trainer,
    exit status 130, no traceback, and no queue left on the server."""
    import anyio

    common = ["--name", "ctrl-c", "--actors", "3", "--screens", "1000000"]
    trainer = _trainer(url, *common)
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    actors = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--role", "actors", "--url", url, *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        anyio.run(_until_screens_flow, url, "ctrl-c", 3)
        os.killpg(trainer.pid, signal.SIGINT)  # Ctrl-C on both hosts
        os.killpg(actors.pid, signal.SIGINT)
        out, err = actors.communicate(timeout=60)
        t_out, t_err = trainer.communicate(timeout=60)
    finally:
        actors.kill()
        trainer.kill()
    assert actors.returncode == 130, out + err
    assert "Traceback" not in err, err
    lines = out.splitlines()
    assert len(lines) == 3, out
    # (an actor may find its queue gone first, deleted by the trainer on its way out)
    said = r"actor ([0-2]): stopped (after \d+ screens(: .+)?|before it started)\."
    matches = [re.fullmatch(said, line) for line in lines]
    assert all(matches), out
    assert sorted(m[1] for m in matches if m) == ["0", "1", "2"]
    assert trainer.returncode == 130, t_out + t_err
    assert "Traceback" not in t_err, t_err
    assert t_out.splitlines() == ["trainer: interrupted (Ctrl-C)."]
    assert _keys(redis_server, "ctrl-c") == []


def test_distributed_replay_roles_need_a_url() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--role", "actors"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "--role actors runs one side of a two-host run: pass --url" in done.stderr


# -- nothing left on a shared server -----------------------------------------------------

REPLAY_TABLE = EXAMPLE.parent / "replay_table.py"


def _keys(server: RedisProc, name: str) -> list[bytes]:
    """The keys of ``name`` and of the queues named after it (``name-ready``, ...) that
    would stay: all but wake-up lists that expire by themselves within 30 s (a token
    pushed to a waiter that has left, as deleting a queue or table wakes its waiters)."""
    stay = []
    with server.client() as c:
        for key in c.scan_iter(match=f"aq:{{{name}*", count=1000):
            ttl = c.pttl(key)
            if not (re.search(rb":(wk|ev:data|ev:space):", key) and 0 < ttl <= 30_000):
                stay.append(key)
    return sorted(stay)


def _wait_for(client: redis.Redis, name: str, field: str, proc: subprocess.Popen[str]) -> None:
    """Wait until the counter ``field`` of ``name``'s meta hash is above 0 (the example
    is running), while ``proc`` lives."""
    deadline = time.monotonic() + 60
    with client as c:
        while int(c.hget(f"aq:{{{name}}}:meta", field) or 0) == 0:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{name}: no {field} within 60 s"
            time.sleep(0.05)


def _left_running(name: str, session: int) -> list[int]:
    """Pids of live processes an example started: those in its session ``session``
    (distributed_replay.py's actors, its children) and those whose command line names
    ``name`` (replay_table.py's actors, in sessions of their own)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state, _ppid, _group, sid = (entry / "stat").read_text().rsplit(") ", 1)[1].split()[:4]
        except (OSError, ValueError):
            continue
        if argv != [b""] and state != "Z" and (int(sid) == session or name.encode() in argv):
            pids.append(int(entry.name))  # (an empty command line: it is exiting)
    return pids


def _end(proc: subprocess.Popen[str], name: str, *pids: int) -> None:
    """However a test went, end what it started: the example's process, the processes
    it started (``_left_running``) and ``pids``."""
    proc.kill()
    proc.wait()
    for pid in [*_left_running(name, proc.pid), *pids]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _spoil_queue(server: RedisProc, name: str) -> None:
    """Append a foreign payload to shuffle queue ``name``'s pool, atomically (its next
    draw of it raises PayloadError in the trainer)."""
    script = (
        "local n = redis.call('HLEN', KEYS[1]); redis.call('HSET', KEYS[1], n, ARGV[1]); return n"
    )
    with server.client() as c:
        c.eval(script, 1, f"aq:{{{name}}}:slots", "AQ-not-a-payload")


def _interrupt(
    argv: list[str],
    name: str,
    field: str,
    how: str,
    server: RedisProc,
    spoil: Callable[[RedisProc, str], None],
) -> tuple[str, str, int, list[int]]:
    """Run an example (``argv``, in a session of its own) until the counter ``field`` of
    ``name`` moves, then end it ``how``: Ctrl-C to its process group, SIGTERM to it
    alone, or an error (``spoil`` puts a foreign payload where it will read it). Its
    output, exit code, and the processes it left running."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        _wait_for(server.client(), name, field, proc)
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        elif how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            spoil(server, name)
        out, err = proc.communicate(timeout=60)
        return out, err, proc.returncode, _left_running(name, proc.pid)
    finally:
        _end(proc, name)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "error"])
def test_an_interrupted_distributed_run_leaves_nothing(
    redis_server: RedisProc, url: str, how: str
) -> None:
    """The trainer deletes its three queues however it ends, after its actors stopped:
    Ctrl-C (to the process group), SIGTERM (to the trainer alone), or an error (a
    foreign payload in the queue). Interrupted, it says so in one line."""
    name = f"interrupted-{how}-{os.getpid()}"
    argv = [str(EXAMPLE), "--url", url, "--name", name, "--screens", "1000000", "--actors", "2"]
    out, err, code, running = _interrupt(argv, name, "deq", how, redis_server, _spoil_queue)
    assert _keys(redis_server, name) == []
    assert running == []
    lines = out.splitlines()
    said = r"actor [01]: stopped (after \d+ screens|before it started)\."
    stopped = [line for line in lines if re.fullmatch(said, line)]
    assert len(stopped) == 2, out + err
    if how == "error":
        assert code == 1, out + err
        assert "PayloadError" in err
    else:
        assert "Traceback" not in err, err
        last = {"ctrl-c": "interrupted (Ctrl-C)", "sigterm": "stopped (SIGTERM)"}[how]
        assert lines == [*stopped, f"trainer: {last}."], out
        assert code == {"ctrl-c": 130, "sigterm": 143}[how], out + err


def test_distributed_replay_help_names_its_default_queue() -> None:
    """``--help`` says which name the queues get without --name: 'replay' on the two
    sides of a two-host run, 'replay-<pid>' otherwise (with or without --url)."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=30
    )
    text = " ".join(done.stdout.split())
    assert "None means 'replay' with --role trainer or actors" in text
    assert "else 'replay-<pid>'" in text
    assert "The trainer deletes all three when it ends, however it ends" in text


def _spoil_table(server: RedisProc, name: str) -> None:
    """Replace every small payload of table ``name`` with a foreign one, atomically (the
    learner's next sample raises PayloadError)."""
    script = (
        "for _, k in ipairs(redis.call('HKEYS', KEYS[1])) do "
        "redis.call('HSET', KEYS[1], k, ARGV[1]) end return 1"
    )
    with server.client() as c:
        c.eval(script, 1, f"aq:{{{name}}}:pl", "AQ-not-a-payload")


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "error"])
def test_an_interrupted_replay_table_run_leaves_nothing(
    redis_server: RedisProc, url: str, how: str
) -> None:
    """``replay_table.py --url``: however the learner ends, the table is closed, its
    actor processes end and the table is deleted; interrupted, one line and no
    traceback."""
    name = f"rt-{how}-{os.getpid()}"
    argv = [str(REPLAY_TABLE), "--url", url, "--name", name, "--actors", "2"]
    argv += ["--steps", "1000000", "--min-size", "50", "--batch", "16"]
    out, err, code, running = _interrupt(argv, name, "samples", how, redis_server, _spoil_table)
    assert _keys(redis_server, name) == []
    assert running == []
    if how == "error":
        assert code == 1, out + err
        assert "PayloadError" in err
    else:
        assert "Traceback" not in err, err
        which = {"ctrl-c": "Ctrl-C", "sigterm": "SIGTERM"}[how]
        assert out.splitlines() == [f"replay_table.py: interrupted ({which})."], out + err
        assert code == 130, out + err


def test_a_replay_table_run_on_a_shared_server_leaves_nothing(
    redis_server: RedisProc, url: str
) -> None:
    """``replay_table.py --url`` run to its end: the learner deletes its table, and its
    actor processes have ended."""
    name = f"rt-done-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    argv = [str(REPLAY_TABLE), "--url", url, "--name", name, "--actors", "2"]
    done = subprocess.run(
        [sys.executable, *argv, "--steps", "20", "--min-size", "50", "--batch", "16"],
        capture_output=True,
        text=True,
        timeout=80,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _keys(redis_server, name) == []
    assert _left_running(name, -1) == []


def test_replay_table_redis_without_the_extra(tmp_path: Path) -> None:
    """Without the redis extra, ``--redis`` says so in one line and starts no server (a
    stand-in redis-server records any start)."""
    marker = tmp_path / "started"
    fake = tmp_path / "redis-server"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 30\n")
    fake.chmod(0o755)
    hide = (
        "import runpy, sys; sys.modules['redis'] = None; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1]), "AQUEUE_REDIS_SERVER": str(fake)}
    done = subprocess.run(
        [sys.executable, "-c", hide, str(REPLAY_TABLE), "--redis", "--steps", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert not marker.exists()
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "--redis and --url share the table through Redis" in lines[0]
    assert "pip install 'aqueue[redis]'" in lines[0]


def test_replay_table_redis_interrupted_stops_its_server(tmp_path: Path) -> None:
    """``--redis`` and Ctrl-C: one line, and the private redis-server it started is
    stopped (a wrapper records the server's pid)."""
    from redis_util import _binary

    binary = _binary()
    assert binary is not None
    pidfile = tmp_path / "pid"
    wrapper = tmp_path / "redis-server"
    wrapper.write_text(f'#!/bin/sh\necho $$ > {pidfile}\nexec {binary} "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1]), "AQUEUE_REDIS_SERVER": str(wrapper)}
    name = f"rt-own-{os.getpid()}"
    argv = [sys.executable, str(REPLAY_TABLE), "--redis", "--actors", "2", "--steps", "1000000"]
    proc = subprocess.Popen(
        [*argv, "--min-size", "50", "--batch", "16", "--name", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    server_pid = 0
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert time.monotonic() < deadline
            assert proc.poll() is None
            time.sleep(0.05)
        server_pid = int(pidfile.read_text())
        own = redis.Redis(host="127.0.0.1", port=_port_of(server_pid))
        _wait_for(own, name, "samples", proc)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        stopped = not Path(f"/proc/{server_pid}").exists() or _zombie(server_pid)
        running = _left_running(name, proc.pid)
    finally:
        _end(proc, name, *([server_pid] if server_pid else []))
    assert out.splitlines() == ["replay_table.py: interrupted (Ctrl-C)."], out + err
    assert "Traceback" not in err, err
    assert proc.returncode == 130
    assert stopped
    assert running == []


def _port_of(pid: int) -> int:
    """The port a redis-server process listens on: its command line says ``--port N``
    until the server renames its process to ``redis-server HOST:PORT`` (and the wrapper
    may not have exec'd it yet)."""
    deadline = time.monotonic() + 10
    while True:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        found = re.search(rb"--port\0(\d+)|redis-server [^\0 ]*:(\d+)", cmdline)
        if found:
            return int(found[1] or found[2])
        assert time.monotonic() < deadline, cmdline
        time.sleep(0.01)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits only to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True
