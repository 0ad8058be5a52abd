"""Names renamed for one convention stay importable for a while, each with a
DeprecationWarning that names its replacement."""

from __future__ import annotations

import importlib

import pytest

import aqueue

RENAMED = {
    "BlockingView": "QueueView",
    "BlockingReplayView": "ReplayView",
    "MonitorSample": "MonitorReading",
    "QueueSample": "QueueReading",
    "StageSample": "StageReading",
    "TableSample": "TableReading",
}


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_an_old_name_warns_and_is_the_new_class(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"aqueue\.{old} is deprecated: use aqueue\.{new}"):
        obj = getattr(aqueue, old)
    assert obj is getattr(aqueue, new)
    assert new in aqueue.__all__
    assert old not in aqueue.__all__


def test_from_import_of_an_old_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match="use aqueue.TableReading"):
        from aqueue import TableSample
    assert TableSample is aqueue.TableReading


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'aqueue' has no attribute 'TableSamples'"):
        aqueue.TableSamples  # noqa: B018
    assert importlib.import_module("aqueue") is aqueue
