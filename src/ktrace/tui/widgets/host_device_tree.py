"""The host/device tree: node -> rank -> threads and GPUs -> tracks; selecting a node toggles its tracks.

The tree and the timeline do not share rows (the tree has group lines and collapsed nodes, the timeline shows a
chosen subset of tracks in its own order), so the mapping is made explicit instead: a track leaf starts with ●
when its track is a timeline row (○ when not) and carries the row's label, and the two cursors follow each other
(the timeline's cursor row is highlighted in the tree, its nodes expanded; a leaf highlighted in the tree moves
the timeline's cursor to that row).
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ktrace.tui.messages import TrackHighlighted, TrackToggled
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.tree_model import TreeItem, tree_roots

SHOWN, HIDDEN = "● ", "○ "
"""Leaf prefixes: the track is (not) a timeline row."""


class HostDeviceTree(Tree[TreeItem]):
    """A lazy tree over the track index; children are built when a node is first expanded."""

    DEFAULT_CSS = "HostDeviceTree { width: 44; border-right: vkey $primary-darken-2; overflow-x: hidden; }"
    """No horizontal scrollbar: at the foot of the tree it looked like a progress bar left over from loading; the
    timeline titles and the details pane carry what a cut label hides."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__("trace", id=id)
        self.show_root = False
        self.auto_expand = False  # enter toggles tracks; space expands
        self.guide_depth = 2
        self.shown: frozenset[int] = frozenset()
        """Track ids that are timeline rows."""

    def set_index(self, index: TrackIndex) -> None:
        """Show the roots (one per host) of a loaded trace, with the first ones expanded."""
        self.clear()
        roots = tree_roots(index)
        for item in roots:
            node = self.root.add(self._label(item), data=item, allow_expand=item.expand is not None)
            if len(roots) <= 2:
                node.expand()
        self.root.expand()

    def regrow(self, index: TrackIndex) -> None:
        """Show a newer index of the same capture (new ranks, threads and tracks), with the nodes that were
        expanded expanded again (found by their item keys) and the cursor on the same item when it is still there."""
        expanded: set[str] = set()
        stack = list(self.root.children)
        while stack:
            node = stack.pop()
            if node.is_expanded and node.data is not None:
                expanded.add(node.data.key)
                stack.extend(node.children)
        cursor = self.cursor_node.data.key if self.cursor_node is not None and self.cursor_node.data else None
        self.set_index(index)
        stack = list(self.root.children)
        while stack:
            node = stack.pop()
            if node.data is not None and node.data.key in expanded:
                self._fill(node)
                node.expand()
                stack.extend(node.children)
        found = self.find(cursor) if cursor is not None else None
        if found is not None:
            _ = self._tree_lines  # Textual numbers the lines of nodes just added when they are built
            self.move_cursor(found)

    def _label(self, item: TreeItem) -> Text:
        if item.expand is not None or len(item.track_ids) != 1:
            return Text(item.label)
        return Text((SHOWN if item.track_ids[0] in self.shown else HIDDEN) + item.label)

    def refresh_labels(self) -> None:
        """Relabel the built nodes whose text changed (exact busy time replacing the overview's estimate, a track
        added to or removed from the timeline)."""
        stack = list(self.root.children)
        while stack:
            node = stack.pop()
            item = node.data
            if item is not None:
                if item.relabel is not None:
                    item.label = item.relabel()
                label = self._label(item)
                if label.plain != str(node.label):
                    node.set_label(label)
            stack.extend(node.children)

    def mark_shown(self, rows: tuple[int, ...]) -> None:
        """The timeline shows these tracks: mark their leaves."""
        if frozenset(rows) != self.shown:
            self.shown = frozenset(rows)
            self.refresh_labels()

    def reveal(self, track_id: int) -> None:
        """Put the tree's cursor on a track's leaf, building and expanding the nodes above it (no focus change)."""
        node = self.root
        while True:
            child = next((c for c in node.children if c.data is not None and track_id in c.data.track_ids), None)
            if child is None:
                return
            if child.data is not None and child.data.expand is None:
                if self.cursor_node is not child:
                    _ = self._tree_lines  # Textual numbers the lines of nodes just added when they are built
                    self.move_cursor(child)
                    self.scroll_to_node(child, animate=False)
                return
            self._fill(child)
            child.expand()
            node = child

    def _fill(self, node: TreeNode[TreeItem]) -> None:
        """Build a node's children (once)."""
        item = node.data
        if item is None or item.expand is None or node.children:
            return
        item.children = item.expand()
        for child in item.children:
            node.add(self._label(child), data=child, allow_expand=child.expand is not None)

    @on(Tree.NodeExpanded)
    def _populate(self, event: Tree.NodeExpanded[TreeItem]) -> None:
        node = event.node
        if node.children:
            return
        self._fill(node)
        if len(node.children) == 1 and node.children[0].allow_expand:
            node.children[0].expand()

    @on(Tree.NodeSelected)
    def _toggle(self, event: Tree.NodeSelected[TreeItem]) -> None:
        item = event.node.data
        if item is not None and item.track_ids:
            self.post_message(TrackToggled(list(item.track_ids)))

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted[TreeItem]) -> None:
        item = event.node.data
        if self.has_focus and item is not None and item.expand is None and len(item.track_ids) == 1:
            self.post_message(TrackHighlighted(item.track_ids[0]))

    def find(self, key: str) -> TreeNode[TreeItem] | None:
        """The already-built node with this item key, if any."""
        stack = list(self.root.children)
        while stack:
            node = stack.pop()
            if node.data is not None and node.data.key == key:
                return node
            stack.extend(node.children)
        return None
