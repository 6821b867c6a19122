"""Exporters: one module per output format (Perfetto, Chrome JSON, Parquet/CSV)."""

from __future__ import annotations
