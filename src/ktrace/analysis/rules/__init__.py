"""Rules: one module per rule family; each rule returns Findings with evidence."""

from __future__ import annotations
