"""What a Pipeline is made of: StageSpec, one stage's description, and the checks that build it.

A Pipeline is a tuple of StageSpecs: its source first, then one per stage method, in
order. A StageSpec is frozen and holds only validated arguments; the functions here
(one per source kind and per stage method) check a method's arguments and return its
spec, raising the errors its public docstring names, with the same messages. ``then``
and ``repeated`` give the new chain; no function changes an existing one. At most one
``to_queue`` stage, and only last. A source that is a one-shot iterator carries a
``Reads`` record, shared by every chain built on it, which its first run marks:
``fresh`` refuses a second one.

Default capacities (``capacity``): a queue holds at least ``_MIN_CAPACITY`` items,
twice the concurrency of the stages on either side, and twice the batch size when a
batch stage reads it (so its ``dequeue_many`` waits for its batch in one copy); a
source's queue holds at least ``_SOURCE_CAPACITY`` items, so the next stage's workers
take their items in bursts and the source refills rarely; a process map's at least
``_PROCESS_CAPACITY``, so each burst of results goes in with few wake-ups of its driver
(a stage queue admits a waiting burst in pieces of at least half its capacity). A
process map whose batches its workers write in place (``fused``) hands on a record per
batch: its queue holds that many rows in batches (the capacity over the batch size,
rounded up).
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..._errors import ElementSpecError, epochs_arg, int_arg, name_arg, seed_arg
from ..._queues._protocol import AsyncQueue, Sink
from ..._running._producers import is_async_callable
from ..tune._settings import Auto, capacity_arg, capacity_range, concurrency_arg, concurrency_range

__all__ = [
    "Reads",
    "StageSpec",
    "async_iterable_source",
    "batch_stage",
    "callable_arg",
    "capacity",
    "default_capacity",
    "describe_fn",
    "filter_stage",
    "fresh",
    "fused",
    "iterable_source",
    "map_stage",
    "measures_cpu",
    "prefetch_stage",
    "producer_source",
    "queue_source",
    "repeated",
    "resumable",
    "shuffle_stage",
    "then",
    "threaded",
    "to_queue_stage",
]

_MIN_CAPACITY = 8  # default output queue capacity: max(this, 2 x neighbouring concurrency)
_SOURCE_CAPACITY = 256  # default capacity of a source's output queue, at least
# default capacity of a process map's output queue, at least: its bursts (tens of items)
# go in a few wake-ups of their driver each, not one per item or two the consumer takes
_PROCESS_CAPACITY = 64
_SOURCES = ("iterable", "async_iterable", "queue", "producer")
_ELEMENTWISE = ("map", "filter", "prefetch")  # the stages that may precede ``repeat``


class Reads:
    """Whether a one-shot iterator source has been read by a run (see ``fresh``)."""

    __slots__ = ("opened",)

    def __init__(self) -> None:
        self.opened = False


@dataclass(frozen=True)
class StageSpec:
    """One stage of a Pipeline description."""

    kind: str  # iterable | async_iterable | queue | producer | map | filter | shuffle | ...
    label: str
    fn: Any = None
    concurrency: int = 1
    capacity: int | None = None
    ordered: bool = False
    executor: str = "task"  # task | thread | process
    epochs: int | None = 1
    size: int = 0
    smaller: bool = False
    pad: bool = False
    seed: int | None = None
    reads: Reads | None = None  # a one-shot iterator source's record (else None)
    auto: Auto | None = None  # a map's concurrency="auto": its range (concurrency: the start)
    # capacity="auto" (prefetch("auto")): its range; ``capacity`` is then None
    auto_capacity: Auto | None = None


def threaded(spec: StageSpec) -> bool:
    """Whether a (non-source) stage's workers are threads (see ``PipelineRun._steps``):
    a process map's are too (each drives one worker process)."""
    return spec.kind == "batch" or (spec.kind == "map" and spec.executor in ("thread", "process"))


def measures_cpu(spec: StageSpec) -> bool:
    """Whether a stage's CPU is measured per stage (``Meter.cpu``): a thread or process
    map's (a task's CPU is the event loop thread's, measured as a whole)."""
    return spec.kind == "map" and spec.executor in ("thread", "process")


def fused(specs: Sequence[StageSpec], i: int) -> bool:
    """Whether stage ``i`` is a process map that writes the batches of the batch stage
    after it in place (``process/_driver.py``: fusion; not with ``dynamic_pad``)."""
    spec = specs[i]
    if spec.kind != "map" or spec.executor != "process" or i + 1 >= len(specs):
        return False
    after = specs[i + 1]
    return after.kind == "batch" and not after.pad


def capacity(specs: Sequence[StageSpec], i: int) -> int:
    """Stage ``i``'s output queue capacity (see the module docstring), where a tuned
    one (``capacity="auto"``) starts."""
    spec = specs[i]
    cap = default_capacity(specs, i)
    if spec.auto_capacity is not None:  # tuned: it starts within its range
        cap = capacity_range(spec.auto_capacity, cap)[0]
    if fused(specs, i):  # its items go in batch records: as many rows, in batches
        return -(-cap // specs[i + 1].size)
    return cap


def default_capacity(specs: Sequence[StageSpec], i: int) -> int:
    """Stage ``i``'s output queue capacity in items: the user's number, else the
    default rule (see the module docstring)."""
    spec = specs[i]
    cap = spec.capacity
    if cap is None:
        cap = max(_MIN_CAPACITY, 2 * spec.concurrency)
        if spec.kind in _SOURCES:
            cap = max(cap, _SOURCE_CAPACITY)
        elif spec.kind == "map" and spec.executor == "process":
            cap = max(cap, _PROCESS_CAPACITY)
        if i + 1 < len(specs):
            after = specs[i + 1]
            cap = max(cap, 2 * after.concurrency)
            if after.kind == "batch":
                cap = max(cap, 2 * after.size)
    return cap


def describe_fn(fn: Any) -> str:
    """A function's name for a stage label."""
    name = getattr(fn, "__name__", None) or getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else type(fn).__name__


def callable_arg(fn: Any, what: str) -> None:
    if not callable(fn):
        raise TypeError(f"Pipeline.{what}: expected a callable, got {type(fn).__name__}")


def _capacity_arg(capacity: Any, label: str) -> tuple[int | None, Auto | None]:
    """A stage's ``capacity`` argument as StageSpec's ``capacity`` (an int, or None for
    the default rule) and ``auto_capacity`` (``"auto"``: the tuner's range)."""
    value = capacity_arg(capacity, f"Pipeline stage {label!r}")
    return (None, value) if isinstance(value, Auto) else (value, None)


# -- sources ---------------------------------------------------------------------------


def resumable(obj: Any) -> bool:
    """Whether a source implements ``state()`` and ``restore(state)`` (checkpoints)."""
    return callable(getattr(obj, "state", None)) and callable(getattr(obj, "restore", None))


def _one_shot(iterable: Any, is_async: bool) -> bool:
    """Whether ``iterable`` is its own iterator (a generator, ``iter(list)``, a file)."""
    return (aiter(iterable) if is_async else iter(iterable)) is iterable


def _reads(iterable: Any, is_async: bool) -> Reads | None:
    """A one-shot source's record; None for a re-iterable one, or one that says where
    it is (``state``/``restore``: reading it again goes on from there)."""
    if resumable(iterable) or not _one_shot(iterable, is_async):
        return None
    return Reads()


def fresh(source: StageSpec, owner: str) -> None:
    """Refuse to run a one-shot iterator source a second time.

    Raises:
        ElementSpecError: ``source`` is a one-shot iterator an earlier run has read.
    """
    if source.reads is not None and source.reads.opened:
        raise ElementSpecError(
            f"{owner}: source {source.label} is a one-shot iterator, which an earlier "
            "run has read: it can be read once. Pass a re-iterable (a list, a tuple, a "
            "range, or an object whose __iter__ returns a fresh iterator), or build a new "
            "Pipeline around a fresh iterator for each run"
        )


def iterable_source(iterable: Any, name: str | None) -> StageSpec:
    if isinstance(iterable, (str, bytes)) or not hasattr(iterable, "__iter__"):
        hint = " (use from_async_iterable)" if hasattr(iterable, "__aiter__") else ""
        raise TypeError(
            f"Pipeline.from_iterable: expected an iterable of items, got "
            f"{type(iterable).__name__}{hint}"
        )
    label = name_arg(name, f"from_iterable({type(iterable).__name__})")
    return StageSpec("iterable", label, iterable, reads=_reads(iterable, False))


def async_iterable_source(iterable: Any, name: str | None) -> StageSpec:
    if not hasattr(iterable, "__aiter__"):
        raise TypeError(
            "Pipeline.from_async_iterable: expected an async iterable, got "
            f"{type(iterable).__name__}"
        )
    label = name_arg(name, f"from_async_iterable({type(iterable).__name__})")
    return StageSpec("async_iterable", label, iterable, reads=_reads(iterable, True))


def queue_source(queue: Any, name: str | None) -> StageSpec:
    if not isinstance(queue, AsyncQueue):
        raise TypeError(
            f"Pipeline.from_queue: expected an aqueue queue, got {type(queue).__name__}"
        )
    label = name_arg(name, f"from_queue({queue.name})")
    return StageSpec("queue", label, queue)


def producer_source(fn: Any, name: str | None) -> StageSpec:
    callable_arg(fn, "from_producer")
    label = name_arg(name, f"from_producer({describe_fn(fn)})")
    return StageSpec("producer", label, fn)


# -- stages ----------------------------------------------------------------------------


def map_stage(
    fn: Any,
    concurrency: Any,
    ordered: bool,
    executor: str | None,
    capacity: Any,
    name: str | None,
) -> StageSpec:
    callable_arg(fn, "map")
    label = name_arg(name, f"map({describe_fn(fn)})")
    setting = concurrency_arg(concurrency, f"Pipeline.map {label!r}")
    is_async = is_async_callable(fn)
    if executor not in (None, "thread", "process"):
        raise ElementSpecError(
            f"Pipeline.map {label!r}: executor must be None, 'thread' or 'process', "
            f"got {executor!r}"
        )
    if is_async and executor is not None:
        raise ElementSpecError(
            f"Pipeline.map {label!r}: {describe_fn(fn)} is an async function; "
            f"executor={executor!r} takes a sync function"
        )
    how = "task" if is_async else (executor or "thread")
    if how == "process":
        _process_fn(fn, f"Pipeline.map {label!r}")
    auto = setting if isinstance(setting, Auto) else None
    cap, auto_cap = _capacity_arg(capacity, label)
    # A tuned map's spec holds its start (the run may lower it to a smaller cap).
    conc = concurrency_range(setting, how, 1.0, None)[0] if isinstance(setting, Auto) else setting
    return StageSpec(
        "map",
        label,
        fn,
        concurrency=conc,
        capacity=cap,
        auto_capacity=auto_cap,
        ordered=bool(ordered) and (conc > 1 or auto is not None),
        executor=how,
        auto=auto,
    )


def _process_fn(fn: Any, owner: str) -> None:
    """Refuse, at once, a function worker processes could not load (see ``process/_workers.py``)."""
    if sys.platform == "win32":  # pragma: no cover - the suite runs on POSIX
        raise ElementSpecError(
            f"{owner}: executor='process' needs a POSIX system (Linux, macOS): its shared "
            "memory is handed to the workers as file descriptors"
        )
    hint = (
        "executor='process' runs the function in spawned worker processes, so it must "
        "pickle by reference: define it at module level (a function, a class instance "
        "or functools.partial of one), in an importable module or in the main script"
    )
    try:
        pickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise ElementSpecError(
            f"{owner}: {describe_fn(fn)} does not pickle ({exc}); {hint}"
        ) from None
    main = sys.modules.get("__main__")
    if getattr(fn, "__module__", None) == "__main__" and not getattr(main, "__file__", None):
        raise ElementSpecError(
            f"{owner}: {describe_fn(fn)} is defined in an interactive session, which a "
            f"worker process cannot import; {hint}"
        )


def filter_stage(pred: Any, capacity: Any, name: str | None) -> StageSpec:
    callable_arg(pred, "filter")
    label = name_arg(name, f"filter({describe_fn(pred)})")
    cap, auto_cap = _capacity_arg(capacity, label)
    return StageSpec(
        "filter",
        label,
        pred,
        capacity=cap,
        auto_capacity=auto_cap,
        executor="task" if is_async_callable(pred) else "inline",
    )


def shuffle_stage(
    capacity: int, min_after_dequeue: int, seed: int | None, name: str | None
) -> StageSpec:
    label = name_arg(name, "shuffle")
    owner = f"Pipeline.shuffle {label!r}"
    cap = int_arg(capacity, "capacity", owner, 1)
    mad = int_arg(min_after_dequeue, "min_after_dequeue", owner, 0)
    if cap <= mad:
        raise ElementSpecError(
            f"{owner}: capacity ({cap}) must be greater than min_after_dequeue ({mad})"
        )
    return StageSpec(
        "shuffle",
        label,
        capacity=max(1, cap - mad - 1),
        size=mad,
        seed=seed_arg(seed, owner),
    )


def batch_stage(
    batch_size: int,
    allow_smaller_final_batch: bool,
    dynamic_pad: bool,
    capacity: Any,
    name: str | None,
) -> StageSpec:
    label = name_arg(name, f"batch({batch_size})")
    size = int_arg(batch_size, "batch_size", f"Pipeline.batch {label!r}", 1)
    cap, auto_cap = _capacity_arg(capacity, label)
    return StageSpec(
        "batch",
        label,
        capacity=cap,
        auto_capacity=auto_cap,
        size=size,
        smaller=bool(allow_smaller_final_batch),
        pad=bool(dynamic_pad),
        executor="thread",
    )


def prefetch_stage(buffer_size: Any, name: str | None) -> StageSpec:
    shown = "auto" if isinstance(buffer_size, Auto) else buffer_size
    label = name_arg(name, f"prefetch({shown})")
    size = capacity_arg(buffer_size, f"Pipeline.prefetch {label!r}", "buffer_size")
    if size is None:
        raise ElementSpecError(
            f"Pipeline.prefetch {label!r}: buffer_size must be an int >= 1, 'auto' or "
            "aqueue.Auto(...), got None"
        )
    if isinstance(size, Auto):
        return StageSpec("prefetch", label, auto_capacity=size)
    return StageSpec("prefetch", label, capacity=size)


def to_queue_stage(queue: Any, enqueue_many: bool, name: str | None) -> StageSpec:
    if not isinstance(queue, Sink):
        raise TypeError(
            "Pipeline.to_queue: expected an aqueue queue or replay table (an aqueue.Sink), "
            f"got {type(queue).__name__}"
        )
    label = name_arg(name, f"to_queue({queue.name})")
    return StageSpec("to_queue", label, queue, pad=bool(enqueue_many))


# -- chains ----------------------------------------------------------------------------


def then(specs: tuple[StageSpec, ...], spec: StageSpec) -> tuple[StageSpec, ...]:
    """The chain ``specs`` followed by ``spec``."""
    last = specs[-1]
    if last.kind == "to_queue":
        raise ElementSpecError(
            f"Pipeline: no stage may follow {last.label}, which sends the items out"
        )
    return (*specs, spec)


def repeated(specs: tuple[StageSpec, ...], num_epochs: int | None) -> tuple[StageSpec, ...]:
    """The chain ``specs`` with its source read ``num_epochs`` times (``Pipeline.repeat``)."""
    owner = "Pipeline.repeat"
    epochs = epochs_arg(num_epochs, owner)
    source = specs[0]
    late = [s.label for s in specs[1:] if s.kind not in _ELEMENTWISE]
    if late:
        raise ElementSpecError(
            f"{owner}: must come before {late[0]} (only map, filter and prefetch may precede it)"
        )
    if source.kind not in ("iterable", "async_iterable"):
        raise ElementSpecError(f"{owner}: source {source.label} cannot be re-read")
    if source.epochs != 1:
        raise ElementSpecError(f"{owner}: the pipeline already repeats")
    if epochs != 1 and _one_shot(source.fn, source.kind == "async_iterable"):
        raise ElementSpecError(
            f"{owner}: source {source.label} is a one-shot iterator; pass a "
            "re-iterable (e.g. a list) to read it more than once"
        )
    head = replace(source, epochs=epochs)
    return (head, *specs[1:])
