"""Modal screens of `ktrace view`: help and the go-to-step prompt."""

from __future__ import annotations
