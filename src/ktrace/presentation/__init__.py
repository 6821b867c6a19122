"""The presentation model: what every view shows, as ordered sections of typed tables, figures, findings and notes.

Analysis computes numbers (a Summary, a Dashboard); this room turns them into one `Page` (page.py) that the views
only lay out through one renderer interface (layout.py): the terminal summary, the HTML, Markdown and JSON
reports, the TUI's dashboard and the Perfetto findings. A new number is added in one place, its section builder;
its label, unit and JSON key live beside it, never in analysis/ and never in a renderer.
"""
