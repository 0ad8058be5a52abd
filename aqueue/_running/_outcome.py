"""How a Coordinator's block ends: which exception leaves ``async with``, with which notes.

``block_outcome`` is called once, at the very end of ``Coordinator.__aexit__``, with
what escaped the task group. The order of precedence:

1. the host task's own cancellation (never swallowed; recorded errors and abandoned
   threads are logged);
2. ``BaseException``s that are not ``Exception`` (KeyboardInterrupt, SystemExit);
3. the first recorded exception itself, not wrapped in an exception group; later ones
   are attached as notes, and so are producer threads that outlived the grace period;
4. RuntimeError naming the threads that outlived the grace period (unless
   ``ignore_live_threads``, which only logs them);
5. otherwise the block ends normally, suppressing the body's exception only when it
   was a clean-stop one (``quiet``).

An exception group from the task group (``BaseExceptionGroup``: the builtin on Python
3.11+, the ``exceptiongroup`` backport that anyio and trio raise on 3.10) is unwrapped
when it holds nothing but cancellations, or one real error besides them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

import anyio

from .._errors import add_note

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

__all__ = ["block_outcome"]

logger = logging.getLogger("aqueue")


def block_outcome(
    escaped: BaseException | None,
    stragglers: list[str],
    quiet: bool,
    *,
    handling: bool,
    record: Callable[[BaseException], None],
    recorded: tuple[BaseException, ...],
    ignore_live_threads: bool,
) -> bool:
    """Raise what leaves the block, or return whether to suppress the body's exception.

    Args:
        escaped: What the task group's exit raised (an exception group is unwrapped
            when it holds one real error besides cancellations).
        stragglers: Names of producer threads still running after the grace period.
        quiet: A clean-stop exception left the body.
        handling: The block is being left with an exception (so a raised error is not
            chained to it: it is usually the cancellation that error caused).
        record: Records an exception as the coordinator's.
        recorded: The exceptions recorded before ``escaped``, first first.
        ignore_live_threads: Log stragglers instead of raising RuntimeError.
    """
    cancelled = anyio.get_cancelled_exc_class()
    exceptions = recorded
    if isinstance(escaped, BaseExceptionGroup):
        rest = escaped.split(cancelled)[1]
        if rest is None:
            escaped = escaped.exceptions[0]
        elif len(rest.exceptions) == 1 and not isinstance(rest.exceptions[0], BaseExceptionGroup):
            escaped = rest.exceptions[0]
    straggler_text = ", ".join(stragglers)
    if isinstance(escaped, cancelled):
        # The host task itself is being cancelled: propagate that, never swallow it.
        for e in exceptions:
            logger.error("Coordinator cancelled from outside after recording: %r", e)
        if stragglers:
            logger.warning(
                "Coordinator cancelled from outside; producers still running after the "
                "grace period were abandoned: %s",
                straggler_text,
            )
        raise escaped
    if escaped is not None and not isinstance(escaped, Exception):
        raise escaped  # KeyboardInterrupt, SystemExit, ...
    if escaped is not None:
        record(escaped)
        if not any(e is escaped for e in exceptions):
            exceptions = (*exceptions, escaped)
    if exceptions:
        first = exceptions[0]
        for other in exceptions[1:]:
            add_note(first, f"the Coordinator also caught: {other!r}" + _notes_suffix(other))
        if stragglers:
            add_note(
                first,
                f"producer threads still running after the grace period: {straggler_text}",
            )
        if not handling:
            raise first
        # Raised while the body's exception (often the cancellation this error caused)
        # is being handled: do not chain it as the context, it is noise.
        if first.__cause__ is not None:
            raise first from first.__cause__
        raise first from None
    if stragglers:
        message = f"Coordinator stopped with producers still running: {straggler_text}"
        if not ignore_live_threads:
            raise RuntimeError(message)
        logger.warning("%s (abandoned; ignore_live_threads=True)", message)
    return quiet


def _notes_suffix(exc: BaseException) -> str:
    notes = getattr(exc, "__notes__", None)
    return f" ({'; '.join(notes)})" if notes else ""
