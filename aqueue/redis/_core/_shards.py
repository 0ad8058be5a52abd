"""The layout of an object spread over shards: how many, under which hash tags, and
how totals split among them. Pure functions, no I/O: the queue and table openers
call them, store what they give on the object's root (shard 0) and compare it on
reopen.

Layout:
- shard 0 is the object's own tag ``{name}``: a one-shard object is exactly the
  object of one tag (and objects created before shards existed open unchanged);
- shard ``s >= 1`` is the tag ``{name#s.<salt>}``; the creator picks each salt so that
  the shards' slots fall on distinct primaries of a Redis Cluster, least-loaded first
  (``choose_tags``, from the slot map it already has: no round trip). The chosen tags
  are stored on the root, so a later topology does not move an object's shards;
- totals (a capacity, a ``max_size``, a count of a limiter) split as evenly as
  integers can (``split``): the shards' parts sum to the total.

Invariants: ``choose_tags(name, k, ...)[0] == name``; the tags are distinct and none
is the tag of another object's shard 0 unless a user named an object so (the ``#``
marks them); ``sum(split(total, k)) == total``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import aqueue

from ._cluster._routing import slot_of

__all__ = [
    "SALT_TRIES",
    "check_stored",
    "choose_tags",
    "shard_of_tag",
    "shards_arg",
    "split",
    "tag",
]

SALT_TRIES = 4096
"""Salts tried per shard before the least-loaded primary is given up for the best found
(with 3 primaries about 3 tries are needed on average)."""

SLOTS = 16384


def tag(name: str, s: int, salt: int) -> str:
    """The hash tag of shard ``s`` of ``name`` (``name`` itself for shard 0)."""
    return name if s == 0 else f"{name}#{s}.{salt}"


def shard_of_tag(tag_: str) -> tuple[str, int] | None:
    """``(root name, s)`` if ``tag_`` is the tag of a shard ``s >= 1``, else None."""
    root, sep, rest = tag_.rpartition("#")
    s, dot, salt = rest.partition(".")
    if sep and root and dot and s.isdigit() and salt.isdigit() and int(s) >= 1:
        return root, int(s)
    return None


def choose_tags(name: str, k: int, owner_of: Callable[[int], str] | None = None) -> list[str]:
    """The ``k`` tags of a new object ``name``: shard 0's is ``name``; each further
    shard's salt is the first that puts its slot on a primary holding the fewest of
    the shards placed so far (``owner_of(slot)`` names a slot's primary). Without a
    slot map (one server) the slots spread over the slot space instead, the k-th part
    each, which also spreads them over a cluster whose slots are split evenly."""
    owner = owner_of if owner_of is not None else (lambda slot: str(slot * k // SLOTS))
    nodes = {owner(slot) for slot in range(0, SLOTS, max(1, SLOTS // 64))}
    load = dict.fromkeys(sorted(nodes), 0)
    root = owner(slot_of("{" + name + "}"))
    load[root] = load.get(root, 0) + 1
    tags = [name]
    for s in range(1, k):
        best: tuple[int, int] | None = None  # (load of its primary, salt)
        least = min(load.values())
        for salt in range(SALT_TRIES):
            node = owner(slot_of("{" + tag(name, s, salt) + "}"))
            here = load.get(node, 0)
            if best is None or here < best[0]:
                best = (here, salt)
            if here <= least:
                break
        assert best is not None
        chosen = tag(name, s, best[1])
        node = owner(slot_of("{" + chosen + "}"))
        load[node] = load.get(node, 0) + 1
        tags.append(chosen)
    return tags


def split(total: int, k: int) -> list[int]:
    """``total`` in ``k`` parts as even as integers can be, the larger first."""
    return [total // k + (1 if s < total % k else 0) for s in range(k)]


def shards_arg(shards: Any, owner: str, most: int, most_name: str) -> int | None:
    """A ``shards=`` argument: None (the default) or an int in ``1..most``.

    Raises:
        ElementSpecError: Not None or an int (a bool is not one), < 1, or more than
            ``most`` (``most_name`` says what bounds it: every shard holds at least
            one element).
    """
    if shards is None:
        return None
    if type(shards) is not int:
        raise aqueue.ElementSpecError(
            f"{owner}: shards must be None or an int >= 1, got {shards!r} ({type(shards).__name__})"
        )
    if shards < 1:
        raise aqueue.ElementSpecError(f"{owner}: shards must be an int >= 1, got {shards}")
    if shards > most:
        raise aqueue.ElementSpecError(
            f"{owner}: shards must be at most {most_name} ({most}): each shard holds at "
            f"least one item; got {shards}"
        )
    return shards


def check_stored(owner: str, noun: str, stored: Sequence[str] | None, given: int | None) -> None:
    """Refuse an explicit ``shards`` that differs from the stored count.

    Raises:
        ElementSpecError: ``given`` is not None and is not ``len(stored)``.
    """
    have = 1 if stored is None else len(stored)
    if given is not None and given != have:
        raise aqueue.ElementSpecError(
            f"{owner}: the {noun} already exists on the server with shards {have}, but "
            f"{given} was given (processes sharing a {noun} must open it with the same "
            "shards; pass shards=None to open it as stored)"
        )
