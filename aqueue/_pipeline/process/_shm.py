"""Shared memory for process maps: an arena of anonymous chunks, cut into blocks.

A process map (``_driver.py``) moves numpy results from its worker processes to the
main process through an ``Arena``: the main process owns it, cuts *blocks* out of it
and tells a worker which block to write a burst's arrays (or a batch's rows) into; the
items the main process hands on are numpy views of those blocks, never copies.

Chunks. The arena is a list of *chunks*, each an anonymous shared-memory file of
``size`` bytes mapped once in the main process and once in every worker that was sent
its descriptor (``fd``, over the worker's socket, SCM_RIGHTS). On Linux a chunk is a
``memfd_create`` file: it never has a name, so nothing ever appears in /dev/shm and
nothing can be left behind there, whatever happens to any process (the kernel frees its
pages when the last descriptor and the last mapping are gone: a parent killed by
SIGKILL, its workers exiting when they see it gone). Elsewhere (macOS, other POSIX) a
chunk is ``shm_open``-ed under a random name and unlinked at once, keeping its
descriptor: the name exists for the microseconds between the two calls. That goes
through ``_posixshmem``, the C module ``multiprocessing.shared_memory`` itself calls,
because ``SharedMemory`` cannot do it: it keeps the descriptor private (``_fd``), maps
the segment itself, and registers the name with the resource tracker, which would
unlink it again and warn at exit (``track=False`` exists only from Python 3.13); the
arena needs only the bare descriptor of an unlinked segment, to send to the workers.
``_PosixShm`` types the two functions it calls. A chunk is
sparse: it takes memory only for the pages written, so chunks are large
(``CHUNK_BYTES``) and few; a block larger than a chunk gets a chunk of its own.

Blocks. ``alloc(n)`` gives a block of the smallest size class (a power of two, at
least ``_MIN_BLOCK`` bytes, page aligned) that holds ``n`` bytes: the most recently
freed block of that class, else fresh space at the end of the last chunk (or a new
chunk). Blocks are never split or merged, so a steady workload reuses the same few
blocks, whose pages stay populated (no page faults). The arena's memory is the peak of
the blocks in use at once, until it closes.

Lifetimes. ``adopt(block)`` returns the block's bytes as a 1-d ``uint8`` array (its
*base*) and frees the block when that array is garbage collected (``weakref.finalize``):
every item view made from it keeps it alive, so a block is reused only once nothing in
the main process can read it any more. A block that got no views is freed at once with
``free``. Freeing may happen on any thread: one lock guards the free lists.

Invariants:

- ``0 <= offset`` and ``offset + size <= chunk size`` for every block; the blocks of a
  chunk never overlap, free or not (``_bump`` only moves forward).
- A block is in at most one free list, and a block in a free list has no base array
  alive (it was never adopted, or its base was collected).
- Closing only drops references: a chunk's mapping lives as long as a view of it does,
  so an item handed out before the close stays valid.
"""

from __future__ import annotations

import importlib
import mmap
import os
import secrets
import threading
import weakref
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt

__all__ = ["CHUNK_BYTES", "Arena", "Block", "Chunk", "anonymous_file"]

CHUNK_BYTES = 1 << 28  # 256 MiB of address space per chunk (sparse: pages are made on write)
_MIN_BLOCK = 1 << 16  # the smallest block, 64 KiB (16 pages; untouched pages cost nothing)
_PAGE = mmap.PAGESIZE


def anonymous_file(size: int, tag: str) -> int:
    """A descriptor of a new shared-memory file of ``size`` bytes with no name left
    behind (see the module docstring); it is not inherited by child processes."""
    create = getattr(os, "memfd_create", None)
    if create is not None:
        fd: int = create(f"aqueue-{tag}", os.MFD_CLOEXEC)
    else:  # pragma: no cover - exercised on Linux only by a test that hides memfd_create
        fd = _shm_open_unlinked(tag)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


class _PosixShm(Protocol):
    """The two functions of CPython's ``_posixshmem`` the arena calls."""

    def shm_open(self, path: str, flags: int, mode: int = 0o777) -> int: ...

    def shm_unlink(self, path: str) -> None: ...


def _posix_shm() -> _PosixShm:
    """CPython's ``_posixshmem``, the C module behind ``multiprocessing.shared_memory``
    (POSIX builds since 3.8), typed by what the arena calls of it."""
    return cast(_PosixShm, importlib.import_module("_posixshmem"))


def _shm_open_unlinked(tag: str) -> int:
    shm = _posix_shm()
    name = f"/aqueue-{os.getpid()}-{tag[:20]}-{secrets.token_hex(6)}"
    fd = shm.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    shm.shm_unlink(name)  # at once: only the descriptor refers to it now
    os.set_inheritable(fd, False)
    return fd


@dataclass(frozen=True)
class Chunk:
    """One shared-memory file of the arena, mapped here."""

    index: int
    fd: int
    size: int
    mm: mmap.mmap


@dataclass(frozen=True)
class Block:
    """``size`` bytes at ``offset`` in chunk ``chunk`` (a power-of-two size class)."""

    chunk: int
    offset: int
    size: int


def _size_class(nbytes: int) -> int:
    size = _MIN_BLOCK
    while size < nbytes:
        size <<= 1
    return size


class Arena:
    """The shared memory of one process-map stage (see the module docstring).

    Args:
        tag: Part of the chunks' names (``memfd:aqueue-<tag>`` in /proc/<pid>/maps).
    """

    def __init__(self, tag: str) -> None:
        self._tag = tag
        self._lock = threading.Lock()
        self._chunks: list[Chunk] = []
        self._free: dict[int, list[Block]] = {}  # size class -> free blocks, last freed last
        self._bump = 0  # the next free offset in the last chunk
        self._closed = False
        self.in_use = 0  # bytes in blocks handed out and not freed
        self.peak = 0  # the largest ``in_use`` so far

    @property
    def chunks(self) -> list[Chunk]:
        """The chunks so far, by index (a chunk, once made, never changes)."""
        return self._chunks

    def alloc(self, nbytes: int) -> Block:
        """A block of at least ``nbytes`` bytes (see the module docstring).

        Raises:
            RuntimeError: The arena is closed.
        """
        size = _size_class(max(1, nbytes))
        with self._lock:
            if self._closed:
                raise RuntimeError("the shared-memory arena of a closed pipeline")
            free = self._free.get(size)
            block = free.pop() if free else self._fresh(size)
            self.in_use += size
            self.peak = max(self.peak, self.in_use)
            return block

    def _fresh(self, size: int) -> Block:
        last = self._chunks[-1] if self._chunks else None
        if last is None or self._bump + size > last.size:
            last = self._new_chunk(max(CHUNK_BYTES, size))
            self._bump = 0
        block = Block(last.index, self._bump, size)
        self._bump += size  # sizes are multiples of the page size: offsets stay aligned
        return block

    def _new_chunk(self, size: int) -> Chunk:
        index = len(self._chunks)
        fd = anonymous_file(size, f"{self._tag}-{index}")
        try:
            mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        chunk = Chunk(index, fd, size, mm)
        self._chunks.append(chunk)
        return chunk

    def free(self, block: Block) -> None:
        """Put ``block`` back for reuse (any thread; ignored once the arena is closed)."""
        with self._lock:
            if self._closed:
                return
            self.in_use -= block.size
            self._free.setdefault(block.size, []).append(block)

    def base(self, block: Block) -> npt.NDArray[np.uint8]:
        """The bytes of ``block``, as a 1-d uint8 array (no lifetime tracking)."""
        chunk = self._chunks[block.chunk]
        return np.frombuffer(chunk.mm, dtype=np.uint8, count=block.size, offset=block.offset)

    def adopt(self, block: Block) -> npt.NDArray[np.uint8]:
        """The bytes of ``block``, freed when the returned array (and so every view made
        from it) has been collected."""
        base = self.base(block)
        fin = weakref.finalize(base, self.free, block)
        fin.atexit = False  # at interpreter exit there is nothing left to reuse it for
        return base

    def close(self) -> None:
        """Close every chunk's descriptor and drop the arena's references: a mapping
        goes when the last view of it does (see the module docstring)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            chunks, self._chunks = self._chunks, []
            self._free.clear()
        for chunk in chunks:
            os.close(chunk.fd)
            try:
                chunk.mm.close()  # possible only when nothing views it any more
            except BufferError:
                pass
