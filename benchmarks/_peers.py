"""Which interpreter runs each peer library (shared by the benchmark scripts).

The peers (tensorflow, SPDL, Grain, torch, Ray, Reverb, TorchRL, cpprb) usually live in
virtual environments of their own, outside the repository (see benchmarks/README.md, "Peer
environments"). A script runs a peer's cases in a subprocess with the interpreter found
here, in this order:

1. the peer's own option (``--tf-python``, ``--spdl-python``, ``--grain-python``,
   ``--torch-python``, ``--ray-python``, ``--reverb-python``, ``--torchrl-python``,
   ``--cpprb-python``);
2. the peer's own environment variable (``AQUEUE_TF_PYTHON``, ``AQUEUE_SPDL_PYTHON``,
   ``AQUEUE_GRAIN_PYTHON``, ``AQUEUE_TORCH_PYTHON``, ``AQUEUE_RAY_PYTHON``,
   ``AQUEUE_REVERB_PYTHON``, ``AQUEUE_TORCHRL_PYTHON``, ``AQUEUE_CPPRB_PYTHON``);
3. ``--peer-python``, then ``AQUEUE_PEER_PYTHON`` (one venv holding several peers);
4. the running interpreter, if it can import the peer.

Nothing is hard-coded: a peer with no interpreter that can import it is skipped with a
message on stderr naming the option and the variable to set.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["PEERS", "Peer", "add_peer_arguments", "find_python"]


@dataclass(frozen=True)
class Peer:
    """One peer library: its option, its environment variable and what to import."""

    name: str  # "tf", "spdl", "grain", "torch", "ray", "reverb", "torchrl", "cpprb"
    module: str  # the import that must work, e.g. "tensorflow"

    @property
    def option(self) -> str:
        return f"--{self.name}-python"

    @property
    def dest(self) -> str:
        return f"{self.name}_python"

    @property
    def env(self) -> str:
        return f"AQUEUE_{self.name.upper()}_PYTHON"


PEERS = {
    "tf": Peer("tf", "tensorflow"),
    "spdl": Peer("spdl", "spdl.pipeline"),
    "grain": Peer("grain", "grain"),
    "torch": Peer("torch", "torch.utils.data"),
    "ray": Peer("ray", "ray.util.queue"),
    "reverb": Peer("reverb", "reverb"),
    "torchrl": Peer("torchrl", "torchrl.data"),
    "cpprb": Peer("cpprb", "cpprb"),
}
GENERIC_ENV = "AQUEUE_PEER_PYTHON"


def add_peer_arguments(parser: argparse.ArgumentParser, names: list[str]) -> None:
    """Add ``--peer-python`` and one ``--<name>-python`` option per peer in ``names``."""
    parser.add_argument(
        "--peer-python",
        default=None,
        help=f"interpreter for every peer without its own (default: ${GENERIC_ENV})",
    )
    for name in names:
        peer = PEERS[name]
        parser.add_argument(
            peer.option,
            dest=peer.dest,
            default=None,
            help=f"interpreter that imports {peer.module} (default: ${peer.env})",
        )


_probed: dict[tuple[str, str], str | None] = {}


def _probe(python: str, module: str) -> str | None:
    """None if ``python`` can import ``module``, else why not (cached)."""
    key = (python, module)
    if key not in _probed:
        try:
            done = subprocess.run(
                [python, "-c", f"import {module}"],
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _probed[key] = f"cannot run {python} ({exc})"
        else:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            _probed[key] = None if done.returncode == 0 else f"{python}: {last}"
    return _probed[key]


def find_python(name: str, args: argparse.Namespace) -> str | None:
    """The interpreter for peer ``name``, or None (after a message on stderr)."""
    peer = PEERS[name]
    candidates = [
        getattr(args, peer.dest, None),
        os.environ.get(peer.env),
        getattr(args, "peer_python", None),
        os.environ.get(GENERIC_ENV),
    ]
    configured = [c for c in candidates if c]
    if configured:
        python = configured[0]
        problem = _probe(python, peer.module)
        if problem is None:
            return python
        print(f"# {peer.module}: not importable ({problem}); skipped", file=sys.stderr)
        return None
    if _probe(sys.executable, peer.module) is None:
        return sys.executable
    print(
        f"# {peer.module}: not importable here and no interpreter given "
        f"({peer.option} / ${peer.env}, or --peer-python / ${GENERIC_ENV}); skipped",
        file=sys.stderr,
    )
    return None
