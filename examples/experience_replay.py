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

At the end the script prints the run's figures, ``coord.report()`` (runner mode; taken
after the block, when every game thread has ended), where the unused screens went, and
what the run showed: that every dequeued screen was distinct, and whether the games or
the training set the pace. It exits with status 1 if any screen arrived twice.

Who sets the pace: with the defaults (a frame takes 1 ms, four games: 4,000 screens/s
at most) the trainer takes minibatches faster than the games render, so it mostly
waits; ``--train-ms 20`` makes each training step await 20 ms more (a step on an
accelerator): at most 1,600 screens/s, fewer than the games render, so after the first
fill (``min_after_dequeue`` screens) the games stay ahead and the trainer no longer
waits. Both follow from the sleeps, not from the machine's speed.

Run: python examples/experience_replay.py [--steps 300] [--games 4] [--capacity 10000]
     [--min-after-dequeue 1000] [--batch 32] [--frame-ms 1.0] [--train-ms 0]
     [--mode runner|threads]
     [--backend asyncio|trio] [--plot replay.png] [--live] [--monitor-interval 0.05]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
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
            if args.train_ms:  # the rest of a step, awaited (as a step on an accelerator)
                await anyio.sleep(args.train_ms / 1000)
        return loss

    report = ""
    monitor: Monitor | None = None
    if args.plot or args.live:
        monitor = Monitor(interval=args.monitor_interval, live=args.live)
    if args.mode == "runner":
        async with Coordinator(stop_grace_period=5.0, monitor=monitor) as coord:
            t0 = time.perf_counter()
            coord.start(QueueRunner(replay, [env.grab_screen for env in envs], name="games"))
            loss = await trainer()
            elapsed = time.perf_counter() - t0
        # Leaving the block stopped the games and waited for their threads, so the
        # report (taken now, not inside the block) shows them all ended.
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

        t0 = time.perf_counter()
        threads = [threading.Thread(target=play, args=(env,), daemon=True) for env in envs]
        for thread in threads:
            thread.start()
        try:
            loss = await trainer()
        finally:
            elapsed = time.perf_counter() - t0
            stop.set()
            replay.close(cancel_pending_enqueues=True)  # releases games blocked on a full queue
            for thread in threads:
                thread.join()
    stats = replay.statistics()
    return {
        "consumed": args.steps * args.batch,
        "distinct": len(seen),
        "duplicates": duplicates,
        "produced": sum(env.frame for env in envs),
        "enqueued": stats.enqueued_total,
        "left_in_queue": stats.size,
        "seconds": elapsed,
        "input_bound": waited / elapsed if elapsed else 0.0,
        "loss": loss,
        "report": report,
        "monitor": monitor,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (small values make a quick smoke run)."""
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--steps", type=int, default=300, help="training steps (minibatches)")
    add("--games", type=int, default=4, help="game environments, one thread each")
    add("--capacity", type=int, default=10_000, help="replay queue capacity (screens)")
    add(
        "--min-after-dequeue",
        type=int,
        default=1_000,
        help="screens always kept in the queue for shuffling while it is open",
    )
    add("--batch", type=int, default=32, help="screens per minibatch")
    add("--frame-ms", type=float, default=1.0, help="milliseconds a game blocks per screen")
    add(
        "--train-ms",
        type=float,
        default=0.0,
        help="milliseconds each training step awaits besides its numpy work (an "
        "accelerator's step)",
    )
    add(
        "--mode",
        choices=["runner", "threads"],
        default="runner",
        help="QueueRunner + Coordinator, or plain threads wired by hand",
    )
    add("--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop")
    add("--plot", metavar="PNG", help="save a picture of the queue's fill over time here")
    add("--live", action="store_true", help="show a live progress line (on a terminal)")
    add("--monitor-interval", type=float, default=0.05, help="seconds between samples")
    args = parser.parse_args(argv)
    if not 0 <= args.min_after_dequeue < args.capacity:
        parser.error("--min-after-dequeue must be at least 0 and less than --capacity")
    if (args.plot or args.live) and args.mode != "runner":
        parser.error("--plot and --live watch the Coordinator: use them with --mode runner")
    needs = [("matplotlib", "plot")] if args.plot else []
    needs += [("tqdm", "live")] if args.live and sys.stdout.isatty() else []
    for module, extra in needs:
        try:
            importlib.import_module(module)
        except ImportError:
            parser.error(f"--{extra} needs {module}: pip install 'aqueue[{extra}]'")
    return args


def describe_monitor(monitor: Monitor, path: str) -> str:
    """What the plot shows, in plain words."""
    h = monitor.history()
    fill = h.queues["replay"].fraction_full
    floor = h.queues["replay"].min_after_dequeue / h.queues["replay"].capacity[-1]
    return (
        f"plot: {path} ({len(h)} samples, one every {monitor.interval:g} s) shows the "
        f"replay queue's fill over time: {np.nanmedian(fill):.0%} full in the median "
        f"sample, against its min_after_dequeue floor of {floor:.0%}; the periods in which "
        "the trainer waited for screens are shaded red."
    )


def say(text: str) -> None:
    print(textwrap.fill(text, 88, subsequent_indent="  ", break_on_hyphens=False))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example and print what it showed; return the measurements."""
    args = parse_args(argv)
    result: dict[str, Any] = anyio.run(train, args, backend=args.backend)
    consumed, seconds = result["consumed"], result["seconds"]
    say(
        f"{args.mode} mode on {args.backend}: {args.games} game thread"
        f"{'s' if args.games != 1 else ''} rendered "
        f"{result['produced']:,} screens in {seconds:.2f} s; the trainer took "
        f"{args.steps} minibatches of {args.batch} ({consumed:,} screens, "
        f"{consumed / seconds:,.0f} screens/s) and ended with a loss (mean squared "
        f"error) of {result['loss']:.2g}."
    )
    bound = result["input_bound"]
    if result["report"]:
        print(result["report"])
        say(
            "The table above is coord.report(), taken after the block: the replay queue "
            "(sizes and totals in screens, times in seconds), closed by the stop, and "
            f"'games' 0/{args.games} alive because every game thread has ended. Its last "
            "line, input-bound, is the share of the run the trainer spent waiting for "
            "screens."
        )
    if args.plot:
        monitor = result["monitor"]
        monitor.plot(args.plot, title="Experience replay: the replay queue while training")
        say(describe_monitor(monitor, args.plot))
    refused = result["produced"] - result["enqueued"]
    say(
        f"Unused screens: {result['left_in_queue']:,} were still in the replay queue at "
        f"the end (while it is open, it keeps at least min_after_dequeue="
        f"{args.min_after_dequeue:,} for shuffling) and {refused:,} were rendered after "
        "the trainer was done and refused by the closed queue."
    )
    if bound > 0.5:
        pace = "the games did, not training (the trainer mostly waited)"
    elif bound < 0.2:
        pace = "training did, not the games (screens were ready when asked for)"
    else:
        pace = "neither side clearly did (the trainer waited part of the time)"
    if result["report"]:
        pace = f"The report's input-bound line tells who set the pace: {pace}."
    else:
        pace = (
            f"The trainer spent {bound:.0%} of the run waiting for screens (input-bound), "
            f"which tells who set the pace: {pace}."
        )
    if result["duplicates"] == 0:
        distinct = (
            f"every one of the {consumed:,} screens the trainer dequeued was distinct "
            "(each carries its game and frame number in two pixels), so no screen was "
            "enqueued twice"
        )
    else:
        distinct = f"{result['duplicates']:,} DUPLICATE screens reached the trainer"
    say(
        f"What this showed: {distinct}. The games played on threads of their own while "
        "the async trainer awaited shuffled minibatches, and every game thread ended "
        f"when training did. {pace}"
    )
    if result["duplicates"]:
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()
