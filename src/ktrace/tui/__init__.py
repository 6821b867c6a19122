"""The Textual TUI (`ktrace view`); the only package that imports textual."""

from __future__ import annotations
