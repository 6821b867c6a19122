"""The layout names shared by the store, the capture writer and the tracer hook; rank lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktrace.model.layout import parse_rank_list, partition_dir


def test_partition_dir_makes_the_host_path_safe() -> None:
    assert partition_dir(Path("r"), "gpu-node/1:a", 3) == Path("r/node=gpu-node_1_a/rank=3")
    assert partition_dir(Path("r"), "", 0) == Path("r/node=localhost/rank=0")


def test_rank_lists() -> None:
    assert parse_rank_list("0,4-6") == (0, 4, 5, 6)
    assert parse_rank_list(" 3, 0-2, 3 ") == (0, 1, 2, 3)
    for bad, message in (("", "no rank"), (" , ", "no rank"), ("x", "expected"), ("1-", "expected"),
                         ("-1", "expected")):
        with pytest.raises(ValueError, match=message):
            parse_rank_list(bad)
