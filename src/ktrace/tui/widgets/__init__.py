"""Widgets of `ktrace view`: host/device tree, timeline, kernel table, details and dashboard."""

from __future__ import annotations
