"""The TUI's modules import each other in one direction only (issue #18: index_build/overview/tracks/viewmodel
used to form a circle of type-only imports, which hid the order in which they must be read and changed)."""

from __future__ import annotations

import grimp  # import-linter's engine (a dev dependency through import-linter)


def test_no_import_cycle_inside_the_tui() -> None:
    graph = grimp.build_graph("ktrace", include_external_packages=False)
    modules = sorted(m for m in graph.modules if m.startswith("ktrace.tui"))
    cycles = [
        (a, graph.find_shortest_chain(a, b), graph.find_shortest_chain(b, a))
        for i, a in enumerate(modules)
        for b in modules[i + 1 :]
        if graph.find_shortest_chain(a, b) and graph.find_shortest_chain(b, a)
    ]
    assert not cycles, cycles
