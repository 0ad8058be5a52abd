"""Experience replay: four blocking game threads feed a RandomShuffleQueue; an async
trainer awaits shuffled minibatches.

A game environment is not ours and not thread-safe: its ``grab_screen()`` blocks (it
renders a frame) and must always be called from the same thread. Four of them run on
four dedicated threads; every screen goes into ``RandomShuffleQueue(10000,
min_after_dequeue=1000)``; the trainer awaits ``dequeue_many(32)`` and takes a small
numpy model step. Each screen carries its (game, frame) number in two pixels, so the
script can check that every dequeued screen is distinct: the classic bug of enqueueing
the same screen over and over cannot hide.

Two ways of wiring the game threads, same result:

- ``--mode runner`` (default): ``QueueRunner(queue, [env.grab_screen for env in envs])``
  under a ``Coordinator``. Each sync producer gets a dedicated thread that enqueues
  through ``queue.blocking()``; the coordinator stops the games when the trainer is done
  and raises any game's exception in the trainer.
- ``--mode threads``: the same by hand, with plain threads calling
  ``blocking.enqueue(env.grab_screen())`` on ``blocking = queue.blocking()``.

Either way a game thread that finds room admits its screen straight into the queue's
storage (a few microseconds, no event-loop round trip), so the games keep playing even
while a training step blocks the event loop.

Watching it run (runner mode): ``--plot replay.png`` samples the queue with an
``aqueue.Monitor`` every ``--monitor-interval`` seconds and saves a picture of its fill
and throughput over time, the periods in which the trainer waited for screens shaded
red (needs ``pip install 'aqueue[plot]'``); ``--live`` shows a one-line progress display
while it trains (needs ``aqueue[live]``; only on a terminal).

Run: python examples/experience_replay.py [--steps 300] [--games 4] [--capacity 10000]
     [--min-after-dequeue 1000] [--batch 32] [--frame-ms 1.0] [--mode runner|threads]
     [--backend asyncio|trio] [--plot replay.png] [--live] [--monitor-interval 0.05]
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import anyio
import numpy as np

from aqueue import Coordinator, Monitor, QueueClosedError, QueueRunner, RandomShuffleQueue

SCREEN = (32, 32)


class GameEnvironment:
    """A stand-in for an emulator: blocking, stateful and bound to one thread."""

    def __init__(self, game_id: int, frame_seconds: float) -> None:
        self.game_id = game_id
        self.frame = 0
        self._frame_seconds = frame_seconds
        self._thread: int | None = None
        self._rng = np.random.default_rng(game_id)

    def grab_screen(self) -> np.ndarray:
        """Render and return the next screen (blocks for one frame time)."""
        me = threading.get_ident()
        if self._thread is None:
            self._thread = me
        elif self._thread != me:
            raise RuntimeError(f"game {self.game_id} used from a second thread")
        if self._frame_seconds:
            time.sleep(self._frame_seconds)  # rendering; a real emulator releases the GIL too
        self.frame += 1
        screen = self._rng.random(SCREEN, dtype=np.float32)
        screen[0, 0] = self.game_id  # two pixels say which screen this is
        screen[0, 1] = self.frame
        return screen


class Model:
    """A linear value model on flattened screens, trained by plain SGD."""

    def __init__(self) -> None:
        self.w = np.zeros(SCREEN[0] * SCREEN[1], np.float32)

    def step(self, screens: np.ndarray) -> float:
        """One SGD step towards predicting each screen's mean brightness; returns the loss."""
        x = screens.reshape(len(screens), -1).copy()
        x[:, :2] = 0.0  # the two identity pixels are not part of the picture
        target = x.mean(axis=1)
        error = x @ self.w - target
        self.w -= 1e-3 * (x.T @ error) / len(x)
        return float(np.mean(error**2))


def screen_ids(batch: np.ndarray) -> list[tuple[int, int]]:
    """The (game, frame) identity of each screen in a batch."""
    return [(int(g), int(f)) for g, f in zip(batch[:, 0, 0], batch[:, 0, 1])]


async def train(args: argparse.Namespace) -> dict[str, Any]:
    """Play, enqueue and train; return what the run measured."""
    replay = RandomShuffleQueue(
        args.capacity, args.min_after_dequeue, np.float32, SCREEN, name="replay", seed=0
    )
    envs = [GameEnvironment(g, args.frame_ms / 1000) for g in range(args.games)]
    model = Model()
    seen: set[tuple[int, int]] = set()
    duplicates = 0
    waited = 0.0
    t0 = time.perf_counter()

    async def trainer() -> float:
        nonlocal duplicates, waited
        loss = float("nan")
        for _ in range(args.steps):
            t = time.perf_counter()
            batch = await replay.dequeue_many(args.batch)
            waited += time.perf_counter() - t
            for sid in screen_ids(batch):
                duplicates += sid in seen
                seen.add(sid)
            loss = model.step(batch)
        return loss

    report = ""
    monitor: Monitor | None = None
    if args.plot or args.live:
        monitor = Monitor(interval=args.monitor_interval, live=args.live)
    if args.mode == "runner":
        async with Coordinator(stop_grace_period=5.0, monitor=monitor) as coord:
            coord.start(QueueRunner(replay, [env.grab_screen for env in envs], name="games"))
            loss = await trainer()
            report = coord.report()
    else:
        blocking = replay.blocking()  # made inside the event loop, used by the threads
        stop = threading.Event()

        def play(env: GameEnvironment) -> None:
            try:
                while not stop.is_set():
                    blocking.enqueue(env.grab_screen())
            except QueueClosedError:
                pass  # the trainer is done

        threads = [threading.Thread(target=play, args=(env,), daemon=True) for env in envs]
        for thread in threads:
            thread.start()
        try:
            loss = await trainer()
        finally:
            stop.set()
            replay.close(cancel_pending_enqueues=True)  # releases games blocked on a full queue
            for thread in threads:
                thread.join()
    elapsed = time.perf_counter() - t0
    consumed = args.steps * args.batch
    return {
        "consumed": consumed,
        "distinct": len(seen),
        "duplicates": duplicates,
        "produced": sum(env.frame for env in envs),
        "seconds": elapsed,
        "input_bound": waited / elapsed if elapsed else 0.0,
        "loss": loss,
        "report": report,
        "monitor": monitor,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (small values make a quick smoke run)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--capacity", type=int, default=10_000)
    parser.add_argument("--min-after-dequeue", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--frame-ms", type=float, default=1.0, help="blocking time per frame")
    parser.add_argument("--mode", choices=["runner", "threads"], default="runner")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--plot", metavar="PNG", help="save the queue's fill over time here")
    parser.add_argument("--live", action="store_true", help="show a live line on a terminal")
    parser.add_argument("--monitor-interval", type=float, default=0.05, help="seconds")
    args = parser.parse_args(argv)
    if (args.plot or args.live) and args.mode != "runner":
        parser.error("--plot and --live watch the Coordinator: use them with --mode runner")
    return args


def describe_monitor(monitor: Monitor, path: str) -> str:
    """What the plot shows, in plain words."""
    h = monitor.history()
    fill = h.queues["replay"].fraction_full
    floor = h.queues["replay"].min_after_dequeue / h.queues["replay"].capacity[-1]
    ok = ~np.isnan(h.input_bound)
    waited = float((h.input_bound[ok] * h.interval_s[ok]).sum() / h.interval_s[ok].sum())
    if waited > 0.5:
        verdict = "the games were the bottleneck: the trainer mostly waited for screens"
    elif waited < 0.2:
        verdict = "the trainer was the bottleneck: screens were ready when it asked"
    else:
        verdict = "neither side clearly set the pace: the trainer waited part of the time"
    return (
        f"plot: {path} ({len(h)} samples, one every {monitor.interval:g} s): the replay "
        f"queue was {np.nanmedian(fill):.0%} full in the median sample (its "
        f"min_after_dequeue floor is {floor:.0%}); the trainer waited for screens "
        f"{waited:.0%} of the time, shaded red; {verdict}"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example and print its summary; return the measurements."""
    args = parse_args(argv)
    result: dict[str, Any] = anyio.run(train, args, backend=args.backend)
    print(
        f"{args.mode}/{args.backend}: trained {args.steps} steps on {result['consumed']} "
        f"screens from {args.games} games ({result['produced']} played) in "
        f"{result['seconds']:.2f} s: {result['consumed'] / result['seconds']:,.0f} screens/s, "
        f"input-bound {result['input_bound']:.0%}, final loss {result['loss']:.3g}"
    )
    if result["report"]:
        print(result["report"])
    if args.plot:
        monitor = result["monitor"]
        monitor.plot(args.plot, title="Experience replay: the replay queue while training")
        print(describe_monitor(monitor, args.plot))
    verdict = "all distinct" if result["duplicates"] == 0 else f"{result['duplicates']} DUPLICATES"
    print(f"dequeued screens: {result['consumed']}, {verdict}")
    if result["duplicates"]:
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()
