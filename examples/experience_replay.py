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

Frames stored once, sampled as stacks (``--replay trajectory``): the games append to an
``aqueue.TrajectoryTable`` instead, each through its own writer's thread view
(``table.writer().blocking()``), with the reward and discount of each frame, ending an
episode every ``--episode-frames`` frames. Every frame is stored once (``--capacity``
frames at most); the table's items are the windows of ``4 + n`` consecutive frames of
one episode (``--n-step``), and the trainer samples ``--batch`` of them: the 4-frame
stack (``window[:, :4]``), the stack ``n`` frames later (``window[:, n:]``) and the
n-step return and bootstrap discount of the rewards between them
(``aqueue.n_step_returns``), for a TD step of its value model. It checks that every
sampled stack is 4 consecutive frames of one game's episode (never across an episode's
end) and that every return equals the one computed step by step, and prints how many
frames the table held against what stacking them on insert would have kept.

Who sets the pace: with the defaults (a frame takes 1 ms, four games: 4,000 screens/s
at most) the trainer takes minibatches faster than the games render, so it mostly
waits; ``--train-ms 20`` makes each training step await 20 ms more (a step on an
accelerator): at most 1,600 screens/s, fewer than the games render, so after the first
fill (``min_after_dequeue`` screens) the games stay ahead and the trainer no longer
waits. Both follow from the sleeps, not from the machine's speed.

Run: python examples/experience_replay.py [--steps 300] [--games 4] [--capacity 10000]
     [--min-after-dequeue 1000] [--batch 32] [--frame-ms 1.0] [--train-ms 0]
     [--mode runner|threads] [--replay queue|trajectory] [--n-step 3] [--gamma 0.99]
     [--episode-frames 60] [--backend asyncio|trio] [--plot replay.png] [--live]
     [--monitor-interval 0.05]
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

from aqueue import (
    Coordinator,
    MinSize,
    Monitor,
    QueueClosedError,
    QueueRunner,
    RandomShuffleQueue,
    TrajectoryTable,
    n_step_returns,
)

SCREEN = (32, 32)
STACK = 4  # frames per stack (DQN's)


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

    def td_step(
        self, stacks: np.ndarray, nexts: np.ndarray, returns: np.ndarray, bootstrap: np.ndarray
    ) -> float:
        """One TD step on 4-frame stacks: V(stack) towards R + D * V(next stack), V
        reading the stack's mean frame; returns the squared TD error."""
        x = stacks.mean(axis=1).reshape(len(stacks), -1)
        x_next = nexts.mean(axis=1).reshape(len(nexts), -1)
        target = returns + bootstrap * (x_next @ self.w)
        error = x @ self.w - target
        self.w -= 1e-3 * (x.T @ error) / len(x)
        return float(np.mean(error**2))


def reward_of(game: int, frame: int) -> float:
    """A frame's reward (a point every 7th frame, more for higher games)."""
    return float(game + 1) if frame % 7 == 0 else 0.0


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


async def train_trajectories(args: argparse.Namespace) -> dict[str, Any]:
    """Play and append frames once; sample stacks with n-step returns; train."""
    n, episode = args.n_step, args.episode_frames
    length = STACK + n  # a stack, and the stack n frames later
    table = TrajectoryTable(
        args.capacity,
        (np.float32, np.float32, np.float32),
        (SCREEN, (), ()),
        ("screen", "reward", "discount"),
        length=length,
        rate_limiter=MinSize(max(1, args.min_after_dequeue)),
        seed=0,
        name="replay",
    )
    envs = [GameEnvironment(g, args.frame_ms / 1000) for g in range(args.games)]
    model = Model()
    stop = threading.Event()
    checked = crossed = wrong_returns = 0
    waited = 0.0

    failures: list[BaseException] = []

    def play(env: GameEnvironment, writer: Any) -> None:
        try:
            while not stop.is_set():
                screen = env.grab_screen()
                last = env.frame % episode == 0
                reward = reward_of(env.game_id, env.frame)
                writer.append({"screen": screen, "reward": reward, "discount": float(not last)})
                if last:
                    writer.end_episode()
        except QueueClosedError:
            pass  # the trainer is done
        except BaseException as exc:  # a game failed: the trainer must not wait for it
            failures.append(exc)
            table.close()
        finally:
            writer.close()

    async def trainer() -> float:
        nonlocal checked, crossed, wrong_returns, waited
        loss = float("nan")
        for _ in range(args.steps):
            t = time.perf_counter()
            s = await table.sample(args.batch)
            waited += time.perf_counter() - t
            screens, rewards, discounts = s.data["screen"], s.data["reward"], s.data["discount"]
            game, frame = screens[:, :, 0, 0].astype(int), screens[:, :, 0, 1].astype(int)
            same_game = (game == game[:, :1]).all(axis=1)
            same_episode = ((frame - 1) // episode == (frame[:, :1] - 1) // episode).all(axis=1)
            one_episode = same_game & same_episode
            consecutive = (np.diff(frame, axis=1) == 1).all(axis=1)
            crossed += int(np.count_nonzero(~(one_episode & consecutive)))
            checked += len(frame)
            # the transition of each stack's last frame: its n rewards and discounts
            returns, bootstrap = n_step_returns(
                rewards[:, STACK - 1 : STACK - 1 + n],
                discounts[:, STACK - 1 : STACK - 1 + n],
                args.gamma,
            )
            for i in range(len(frame)):  # the same, step by step
                ret, disc = 0.0, 1.0
                for k in range(n):
                    f = int(frame[i, STACK - 1 + k])
                    ret += disc * reward_of(int(game[i, 0]), f)
                    disc *= args.gamma * (0.0 if f % episode == 0 else 1.0)
                ok = np.isclose(ret, returns[i], rtol=1e-5) and np.isclose(disc, bootstrap[i])
                wrong_returns += not ok
            loss = model.td_step(screens[:, :STACK], screens[:, n:], returns, bootstrap)
            if args.train_ms:
                await anyio.sleep(args.train_ms / 1000)
        return loss

    report = ""
    writers = [table.writer().blocking() for _ in envs]  # (made inside the event loop)
    threads = [
        threading.Thread(target=play, args=(env, w), daemon=True) for env, w in zip(envs, writers)
    ]
    t0 = time.perf_counter()
    try:
        if args.mode == "runner":  # the coordinator watches the table and reports it
            async with Coordinator(stop_grace_period=5.0) as coord:
                coord.watch(table)
                for thread in threads:
                    thread.start()
                loss = await trainer()
                stats = table.statistics()
            report = coord.report()
        else:
            for thread in threads:
                thread.start()
            loss = await trainer()
            stats = table.statistics()
    finally:
        elapsed = time.perf_counter() - t0
        stop.set()
        table.close()  # a game's next append raises QueueClosedError: its thread ends
        for thread in threads:
            if thread.is_alive():
                thread.join()
        if failures:
            raise failures[0]
    return {
        "consumed": args.steps * args.batch,
        "checked": checked,
        "crossed": crossed,
        "wrong_returns": wrong_returns,
        "produced": sum(env.frame for env in envs),
        "frames_held": stats.steps_held,
        "windows_held": stats.size,
        "length": length,
        "seconds": elapsed,
        "input_bound": waited / elapsed if elapsed else 0.0,
        "loss": loss,
        "report": report,
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
    add(
        "--replay",
        choices=["queue", "trajectory"],
        default="queue",
        help="screens through a RandomShuffleQueue, or frames stored once in a "
        "TrajectoryTable and sampled as 4-frame stacks with n-step returns",
    )
    add("--n-step", type=int, default=3, help="trajectory: the steps of an n-step return")
    add("--gamma", type=float, default=0.99, help="trajectory: the discount per step")
    add("--episode-frames", type=int, default=60, help="trajectory: frames per episode")
    add("--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop")
    add("--plot", metavar="PNG", help="save a picture of the queue's fill over time here")
    add("--live", action="store_true", help="show a live progress line (on a terminal)")
    add("--monitor-interval", type=float, default=0.05, help="seconds between samples")
    args = parser.parse_args(argv)
    if not 0 <= args.min_after_dequeue < args.capacity:
        parser.error("--min-after-dequeue must be at least 0 and less than --capacity")
    if (args.plot or args.live) and args.mode != "runner":
        parser.error("--plot and --live watch the Coordinator: use them with --mode runner")
    if (args.plot or args.live) and args.replay != "queue":
        parser.error("--plot and --live draw the replay queue: use them with --replay queue")
    if args.n_step < 1 or args.episode_frames < STACK + args.n_step:
        parser.error("--n-step must be >= 1 and --episode-frames >= 4 + --n-step")
    if args.replay == "trajectory" and args.capacity < STACK + args.n_step:
        parser.error("--capacity (frames) must hold at least one window of 4 + --n-step")
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


def show_trajectories(args: argparse.Namespace, result: dict[str, Any]) -> None:
    """What the trajectory run showed."""
    consumed, seconds = result["consumed"], result["seconds"]
    say(
        f"trajectory replay, {args.mode} mode on {args.backend}: {args.games} game threads "
        f"rendered {result['produced']:,} frames in {seconds:.2f} s; the trainer took "
        f"{args.steps} batches of {args.batch} 4-frame stacks with {args.n_step}-step "
        f"returns ({consumed / seconds:,.0f} stacks/s), ending with a TD loss of "
        f"{result['loss']:.2g}."
    )
    if result["report"]:
        print(result["report"])
    held, windows, length = result["frames_held"], result["windows_held"], result["length"]
    say(
        f"Frames stored once: the table held {held:,} frames for {windows:,} windows of "
        f"{length} (a stack, and the stack {args.n_step} frames later); storing each "
        f"window whole would have kept {windows * length:,} frames."
    )
    if result["crossed"] == 0 and result["wrong_returns"] == 0:
        say(
            f"What this showed: every one of the {result['checked']:,} sampled stacks was "
            "4 consecutive frames of one game's episode (never across an episode's end), "
            "and every n-step return and bootstrap discount equalled the one computed "
            "step by step."
        )
    else:
        say(
            f"What this showed: {result['crossed']:,} BROKEN windows and "
            f"{result['wrong_returns']:,} WRONG returns reached the trainer."
        )
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example and print what it showed; return the measurements."""
    args = parse_args(argv)
    if args.replay == "trajectory":
        traj: dict[str, Any] = anyio.run(train_trajectories, args, backend=args.backend)
        show_trajectories(args, traj)
        return traj
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
