"""`ktrace summary` loads pyarrow and polars with allocators that return freed pages, unless the user chose: at
once for a big trace of one rank, after 50 ms for many ranks or a small trace (ONE_RANK_JEMALLOC,
ALLOCATOR_SETTINGS)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ktrace.cli.options import ALLOCATOR_SETTINGS, ONE_RANK_BIG_BYTES, _one_rank

FIFTY_MS = ALLOCATOR_SETTINGS["_RJEM_MALLOC_CONF"][1]

_SCRIPT = """
import contextlib, io, sys
from ktrace.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    assert main([sys.argv[2], sys.argv[1], *sys.argv[3:]]) == 0
import polars, pyarrow as pa
used = pa.mimalloc_memory_pool().max_memory() if "mimalloc" in pa.supported_memory_backends() else 0
print(polars.jemalloc_conf, used)
"""


def _summary_process(path: Path, *verb: str, **chosen: str) -> tuple[str, int]:
    """(polars' jemalloc settings, bytes Arrow's mimalloc pool ever held) of a process that ran the summary (or
    `verb`: the verb and its options)."""
    env = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_SETTINGS}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(path), *(verb or ("summary", "--json"))],
        env={**env, **chosen},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0], int(out[1])


def test_summary_returns_freed_pages(real_trace_path: Callable[[str], Path]) -> None:
    jemalloc, mimalloc_bytes = _summary_process(real_trace_path("alexnet"))
    assert jemalloc.endswith(FIFTY_MS)  # a small trace: decay 0 bought no lower peak, only system CPU
    assert mimalloc_bytes == 0  # every Arrow buffer, the Parquet and JSON decoders' scratch too, came from malloc


def test_many_ranks_keep_freed_pages_50_ms(real_trace_path: Callable[[str], Path], tmp_path: Path) -> None:
    from ktrace.cli import main

    folder = real_trace_path("dlrm")
    assert _summary_process(folder)[0].endswith(FIFTY_MS)
    assert main(["import", str(folder), "-o", str(tmp_path / "job.ktrace"), "--no-progress"]) == 0
    assert _summary_process(tmp_path / "job.ktrace")[0].endswith(FIFTY_MS)
    one = tmp_path / "one.ktrace"
    assert main(["import", str(sorted(folder.glob("*.json.gz"))[0]), "-o", str(one), "--no-progress"]) == 0
    assert _summary_process(one)[0].endswith(FIFTY_MS)  # one small rank


def test_a_big_trace_of_one_rank_returns_pages_at_once(tmp_path: Path) -> None:
    """_one_rank tells from sizes alone: a compressed file's bytes, an uncompressed one's an eighth, a store's
    Parquet files (sparse files: nothing is read)."""

    def sized(path: Path, size: int, gzip: bool | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            f.write(b"\x1f\x8b" if (path.suffix == ".gz" if gzip is None else gzip) else b"{}")
            f.truncate(size)
        return path

    assert _one_rank(sized(tmp_path / "big.json.gz", ONE_RANK_BIG_BYTES))
    assert not _one_rank(sized(tmp_path / "small.json.gz", ONE_RANK_BIG_BYTES - 1))
    assert not _one_rank(sized(tmp_path / "plain.json", 7 * ONE_RANK_BIG_BYTES))
    assert _one_rank(sized(tmp_path / "plain_big.json", 8 * ONE_RANK_BIG_BYTES))
    assert not _one_rank(
        sized(tmp_path / "named.json.gz", ONE_RANK_BIG_BYTES, gzip=False)
    )  # the magic tells, not the name
    one = tmp_path / "one.ktrace"
    (one / "node=a" / "rank=0").mkdir(parents=True)
    (one / "meta.json").write_text("{}")
    sized(one / "node=a" / "rank=0" / "kernels.parquet", ONE_RANK_BIG_BYTES // 2)
    assert not _one_rank(one)
    sized(one / "node=a" / "rank=0" / "ops.parquet", ONE_RANK_BIG_BYTES // 2)
    assert _one_rank(one)
    sized(one / "node=a" / "rank=1" / "ops.parquet", 1)
    assert not _one_rank(one)  # two ranks


@pytest.mark.parametrize("verb", [("check", "--json"), ("report", "-o", "OUT/r.html")])
def test_check_and_report_return_freed_pages_too(
    real_trace_path: Callable[[str], Path], verb: tuple[str, ...], tmp_path: Path
) -> None:
    chosen = tuple(v.replace("OUT", str(tmp_path)) for v in verb)
    jemalloc, mimalloc_bytes = _summary_process(real_trace_path("alexnet"), *chosen)
    assert jemalloc.endswith(FIFTY_MS) and mimalloc_bytes == 0


def test_allocator_settings_the_user_chose_are_kept(real_trace_path: Callable[[str], Path]) -> None:
    jemalloc, _ = _summary_process(real_trace_path("alexnet"), _RJEM_MALLOC_CONF="dirty_decay_ms:2000")
    assert jemalloc.endswith(",dirty_decay_ms:2000")


def test_a_process_that_loaded_the_libraries_keeps_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import polars  # noqa: F401
    import pyarrow  # noqa: F401

    from ktrace.cli.options import use_returning_allocators

    for name in ALLOCATOR_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    use_returning_allocators()
    assert not set(ALLOCATOR_SETTINGS) & set(os.environ)
