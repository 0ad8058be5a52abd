"""The queue contract (``tests/redis/test_redis_contract.py``) over the cluster: the same
test bodies, with ``srv`` a RedisServer over the session's cluster (payloads under
their own keys, then inline), so every request shape of today's queue ops (plain
calls, an enqueue's staged payloads, a dequeue's fetch behind its take, the waits)
runs through the cluster transports, each queue under its one hash tag. The tests of
what needs a second plain ``connect(url)`` stay with the single server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis_cluster_util import ClusterProc, OneShardBlock, cluster_server
from test_redis_contract import (
    kind,
    test_cancel_pending_enqueues,
    test_cancelled_dequeue_burst_consumes_nothing,
    test_close_lets_pending_enqueue_finish,
    test_close_wakes_every_waiter,
    test_closed_queue_errors,
    test_delete_queue,
    test_dequeue_burst_ends_on_a_closed_empty_queue,
    test_dequeue_burst_honours_min_after_dequeue,
    test_dequeue_burst_waits_for_one_then_takes_what_is_there,
    test_dequeue_many_takes_exactly_n,
    test_dequeue_up_to_after_close,
    test_element_forms_named_and_tuple,
    test_enqueue_blocks_at_capacity,
    test_iteration,
    test_order_and_forms,
    test_progressive_dequeue_larger_than_capacity,
    test_reopen_with_another_spec_names_the_field,
    test_shapeless_queue,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

__all__ = [
    "kind",
    "test_cancel_pending_enqueues",
    "test_cancelled_dequeue_burst_consumes_nothing",
    "test_close_lets_pending_enqueue_finish",
    "test_close_wakes_every_waiter",
    "test_closed_queue_errors",
    "test_delete_queue",
    "test_dequeue_burst_ends_on_a_closed_empty_queue",
    "test_dequeue_burst_honours_min_after_dequeue",
    "test_dequeue_burst_waits_for_one_then_takes_what_is_there",
    "test_dequeue_many_takes_exactly_n",
    "test_dequeue_up_to_after_close",
    "test_element_forms_named_and_tuple",
    "test_enqueue_blocks_at_capacity",
    "test_iteration",
    "test_order_and_forms",
    "test_progressive_dequeue_larger_than_capacity",
    "test_reopen_with_another_spec_names_the_field",
    "test_shapeless_queue",
]


@pytest.fixture(scope="module", params=["keys", "inline"])
async def srv(request: pytest.FixtureRequest, redis_cluster: ClusterProc) -> AsyncIterator[Any]:
    """One server per storage and backend for the module (queues get unique names)."""
    from aqueue.redis._core import _shared

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_shared, "INLINE_MAX", 0 if request.param == "keys" else 1 << 30)
        async with OneShardBlock(
            cluster_server(redis_cluster.url, lease_time=2.0, wait_timeout=0.1)
        ) as server:
            yield server


@pytest.fixture
def rsrv(srv: Any) -> Any:
    return srv
