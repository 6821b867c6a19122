"""The host/device tree: node -> rank -> threads and GPUs -> tracks; selecting a node toggles its tracks."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ktrace.tui.messages import TrackToggled
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.tree_model import TreeItem, tree_roots


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

    def set_index(self, index: TrackIndex) -> None:
        """Show the roots (one per host) of a loaded trace, with the first ones expanded."""
        self.clear()
        roots = tree_roots(index)
        for item in roots:
            node = self.root.add(Text(item.label), data=item, allow_expand=item.expand is not None)
            if len(roots) <= 2:
                node.expand()
        self.root.expand()

    def refresh_labels(self) -> None:
        """Relabel the built nodes whose figures changed (exact busy time replacing the overview's estimate)."""
        stack = list(self.root.children)
        while stack:
            node = stack.pop()
            item = node.data
            if item is not None and item.relabel is not None:
                label = item.relabel()
                if label != item.label:
                    item.label = label
                    node.set_label(Text(label))
            stack.extend(node.children)

    @on(Tree.NodeExpanded)
    def _populate(self, event: Tree.NodeExpanded[TreeItem]) -> None:
        node = event.node
        item = node.data
        if item is None or item.expand is None or node.children:
            return
        item.children = item.expand()
        for child in item.children:
            node.add(Text(child.label), data=child, allow_expand=child.expand is not None)
        if len(item.children) == 1 and item.children[0].expand is not None:
            node.children[0].expand()

    @on(Tree.NodeSelected)
    def _toggle(self, event: Tree.NodeSelected[TreeItem]) -> None:
        item = event.node.data
        if item is not None and item.track_ids:
            self.post_message(TrackToggled(list(item.track_ids)))

    def find(self, key: str) -> TreeNode[TreeItem] | None:
        """The already-built node with this item key, if any."""
        stack = list(self.root.children)
        while stack:
            node = stack.pop()
            if node.data is not None and node.data.key == key:
                return node
            stack.extend(node.children)
        return None
