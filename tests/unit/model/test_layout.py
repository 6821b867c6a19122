"""The layout names shared by the store, the capture writer and the tracer hook; rank lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktrace.model.layout import parse_rank_list, partition_dir


def test_partition_dir_makes_the_host_path_safe() -> None:
    assert partition_dir(Path("r"), "gpu-node/1:a", 3) == Path("r/node=gpu-node_1_a/rank=3")
    assert partition_dir(Path("r"), "", 0) == Path("r/node=localhost/rank=0")


def test_partition_dir_keeps_long_hosts_a_legal_file_name() -> None:
    long = partition_dir(Path("r"), "h" * 300, 0)
    other = partition_dir(Path("r"), "h" * 299 + "i", 0)
    assert len(long.parent.name) <= 205 and long != other


def test_rank_lists() -> None:
    assert parse_rank_list("0,4-6") == (0, 4, 5, 6)
    assert parse_rank_list(" 3, 0-2, 3 ") == (0, 1, 2, 3)
    for bad, message in (
        ("", "no rank"),
        (" , ", "no rank"),
        ("x", "expected"),
        ("1-", "expected"),
        ("-1", "expected"),
        ("0-2000000000", "more than"),
        ("5-2", "increasing"),
        ("0,2147483648", "not a rank"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_rank_list(bad)
