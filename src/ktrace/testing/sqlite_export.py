"""Hand-made Nsight Systems exports for tests: a SQLite file holding exactly the tables given."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Table = tuple[Sequence[str], Sequence[tuple[Any, ...]]]
"""(column names, rows) of one table."""


def make_export(path: Path, tables: dict[str, Table]) -> Path:
    """Write a SQLite file with exactly these tables (columns, rows), like `nsys export` does."""
    con = sqlite3.connect(path)
    for name, (cols, rows) in tables.items():
        con.execute(f'CREATE TABLE "{name}" ({", ".join(chr(34) + c + chr(34) for c in cols)})')
        con.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(cols))})', rows)
    con.commit()
    con.close()
    return path
