"""The tests over a real local Redis Cluster (``redis_cluster`` and ``failover_cluster``
are in ``tests/conftest.py``, the helpers in ``tests/redis_cluster_util.py``): skipped
without aqueue's Redis extra, as the other Redis tests."""

from __future__ import annotations

import pytest

pytest.importorskip("redis", reason="aqueue[redis] is not installed")
pytest.importorskip("msgpack", reason="aqueue[redis] is not installed")
