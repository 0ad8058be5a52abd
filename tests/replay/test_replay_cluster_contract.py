"""The replay-table contract (``test_replay_contract.py``) over a Redis Cluster: the same
test bodies, with ``make_table`` building tables on the session's local cluster
(``tests/redis_cluster_util.py``), so every request shape of today's table ops (an
insert's staged payloads, a sample's fetch and drop behind its function call, the
``keep`` calls, the waits) runs through the cluster transports, each table under its
one hash tag. Payloads under their own keys on asyncio, inline on trio, as in
``make_table``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from replay_support import MakeTable, shared_tables
from test_replay_contract import (
    test_a_key_evicted_on_arrival_mid_batch_is_not_held,
    test_bad_arguments_raise_and_change_nothing,
    test_close_fails_inserts_and_samples_that_would_wait,
    test_default_priority_is_the_largest_held,
    test_delete_reports_unknown_keys_and_counts,
    test_fifo_remover_evicts_the_oldest_one_per_insert,
    test_keys_are_found_through_evictions_and_the_first_removal_out_of_order,
    test_keys_held_through_many_later_inserts_are_found,
    test_keys_increase_and_are_never_reused,
    test_max_times_sampled_items_leave_and_batches_respect_it,
    test_requests_that_could_never_pass_are_refused_at_the_call,
    test_sample_returns_the_tables_element_form,
    test_sample_waits_for_min_size_and_inserts_wait_for_the_limiter,
    test_statistics_are_awaitable_and_add_up,
    test_update_naming_many_keys_twice_takes_each_ones_last_value,
    test_update_priorities_reports_unknown_keys,
    test_waiters_are_served_in_arrival_order,
    test_weights_follow_the_probabilities,
)

pytest.importorskip("redis", reason="aqueue[redis] is not installed")
pytest.importorskip("msgpack", reason="aqueue[redis] is not installed")
from redis_cluster_util import ClusterProc, cluster_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

__all__ = [
    "test_a_key_evicted_on_arrival_mid_batch_is_not_held",
    "test_bad_arguments_raise_and_change_nothing",
    "test_close_fails_inserts_and_samples_that_would_wait",
    "test_default_priority_is_the_largest_held",
    "test_delete_reports_unknown_keys_and_counts",
    "test_fifo_remover_evicts_the_oldest_one_per_insert",
    "test_keys_are_found_through_evictions_and_the_first_removal_out_of_order",
    "test_keys_held_through_many_later_inserts_are_found",
    "test_keys_increase_and_are_never_reused",
    "test_max_times_sampled_items_leave_and_batches_respect_it",
    "test_requests_that_could_never_pass_are_refused_at_the_call",
    "test_sample_returns_the_tables_element_form",
    "test_sample_waits_for_min_size_and_inserts_wait_for_the_limiter",
    "test_statistics_are_awaitable_and_add_up",
    "test_update_naming_many_keys_twice_takes_each_ones_last_value",
    "test_update_priorities_reports_unknown_keys",
    "test_waiters_are_served_in_arrival_order",
    "test_weights_follow_the_probabilities",
]


@pytest.fixture(scope="module")
async def _cluster_srv(anyio_backend: str, redis_cluster: ClusterProc) -> AsyncIterator[Any]:
    """One server per backend for the module (tables get unique names)."""
    from aqueue.redis._core import _shared

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_shared, "INLINE_MAX", 0 if anyio_backend == "asyncio" else 1 << 30)
        async with cluster_server(redis_cluster.url, lease_time=2.0, wait_timeout=0.1) as srv:
            yield srv


@pytest.fixture
def make_table(_cluster_srv: Any) -> MakeTable:
    return shared_tables(_cluster_srv, shards=1)  # (one tag per table: today's layout)
