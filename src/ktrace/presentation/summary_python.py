"""The Python samples' section (`ktrace run --python-sample MS`): a headline, the top functions by self samples,
the step join (the slowest step's top function), and the icicle figure of the report; the summary JSON's
`python_profile` key holds the same numbers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ktrace.analysis.python_samples import TOP_FUNCTIONS, PythonProfile, slowest_step
from ktrace.model.units import format_ns
from ktrace.presentation.page import Column, Figure, Section, Table, Text
from ktrace.presentation.summary_tables import frame_rows, rows_table

JSON_FUNCTIONS = 50
"""Functions in the JSON (the terminal shows TOP_FUNCTIONS)."""
PATH_PARTS = 2
"""A frame's file is shown by its last PATH_PARTS path parts in the terminal (the JSON keeps the whole path)."""
READING_NOTE = (
    "self: samples whose innermost frame is the function; total: samples with it anywhere on the stack. Every "
    "thread of the traced processes is sampled but ktrace's own, so a thread waiting in a lock counts too."
)


def short_function(label: str) -> str:
    """`/a/b/c/train.py:10 loop` -> `loop (c/train.py:10)`: the function first, so a column too narrow cuts its
    place rather than its name, then the file's last PATH_PARTS parts (as py-spy shows a frame)."""
    where, _, name = label.rpartition(" ")
    path, colon, line = where.rpartition(":")
    if not colon:
        return label
    short = "/".join(path.replace("\\", "/").split("/")[-PATH_PARTS:])
    return f"{name} ({short}:{line})"


def headline(profile: PythonProfile) -> str:
    """One line: how many samples of how many threads, at what interval, and what the top function took."""
    every = f" every {format_ns(profile.interval_ns)}" if profile.interval_ns else ""
    threads = f"{profile.threads} thread{'s' if profile.threads != 1 else ''}"
    line = f"{profile.samples:,} Python samples of {threads}{every}"
    if profile.functions.height:
        top = profile.functions.row(0, named=True)
        line += f"; most in {short_function(top['function'])} ({top['self_pct']:.1f} % self)"
    return line


def step_line(profile: PythonProfile) -> str | None:
    """How the samples fall into steps, and the slowest step's top function (None without steps)."""
    slowest = slowest_step(profile.steps)
    if slowest is None:
        return None
    in_steps = int(profile.steps["samples"].sum())
    return (
        f"{in_steps:,} samples in {profile.steps.height:,} steps; the slowest sampled step, {slowest['step']} on "
        f"{slowest['node']} rank {slowest['rank']} ({format_ns(slowest['duration_ns'])}), spent most samples in "
        f"{short_function(slowest['top_function'])} ({slowest['top_samples']} of {slowest['samples']})"
    )


def functions_table(profile: PythonProfile, top: int = TOP_FUNCTIONS) -> Table:
    """The top functions by self samples: function, self and total samples with their % of every sample."""
    # keyed "name": the terminal shortens a name column to fit rather than dropping the numbers
    rows = [{**r, "name": short_function(r["function"])} for r in frame_rows(profile.functions.head(top))]
    table = rows_table(
        "python_top_functions",
        "Top Python functions (samples)",
        rows,
        ("name", "self_samples", "self_pct", "total_samples", "total_pct"),
        units={"name": "text", "self_samples": "number", "total_samples": "number"},
        rest=max(0, profile.functions.height - top),
        rest_what="functions",
    )
    return replace(table, columns=(Column("name", "function", "text"), *table.columns[1:]))


def python_section(profile: PythonProfile | None) -> Section | None:
    """The terminal's and the report's Python samples section; None without samples."""
    if profile is None:
        return None
    steps = step_line(profile)
    blocks = (
        Text(headline(profile)),
        functions_table(profile),
        *((Text(steps),) if steps else ()),
        Text(READING_NOTE, "dim"),
    )
    return Section("python-samples", "Python samples", blocks)


ICICLE_ROOT = "all samples"


def icicle_figure(profile: PythonProfile) -> Figure:
    """The stacks as an icicle (page.Figure kind "icicle": ids, parents, labels, values) under one root holding every
    sample (plotly draws nothing for a hierarchy of several roots: threads' stacks start in different frames)."""
    tree = profile.tree
    return Figure(
        "python_icicle",
        "Python stacks (samples; click a frame to zoom)",
        "icicle",
        {
            "ids": ["root", *(str(i) for i in tree["id"])],
            "parents": ["", *("root" if p is None else str(p) for p in tree["parent"])],
            "labels": [ICICLE_ROOT, *(short_function(f) for f in tree["function"])],
            "values": [profile.samples, *tree["samples"].to_list()],
            "shown_in": "python_top_functions",
        },
    )


def python_report_section(profile: PythonProfile | None) -> Section | None:
    """The report's section: the terminal's blocks with the icicle figure after the headline."""
    section = python_section(profile)
    if section is None or profile is None:
        return None
    first, *rest = section.blocks
    return Section(section.key, section.title, (first, icicle_figure(profile), *rest))


def python_profile_dict(profile: PythonProfile | None) -> dict[str, Any] | None:
    """The summary JSON's `python_profile`: samples, threads, interval_ns, the top JSON_FUNCTIONS functions (whole
    file paths), and the steps: how many hold samples and the slowest one's row."""
    if profile is None:
        return None
    slowest = slowest_step(profile.steps)
    return {
        "samples": profile.samples,
        "threads": profile.threads,
        "interval_ns": profile.interval_ns,
        "functions": frame_rows(profile.functions.head(JSON_FUNCTIONS)),
        "functions_total": profile.functions.height,
        "steps": {
            "with_samples": profile.steps.height,
            "samples_in_steps": int(profile.steps["samples"].sum()),
            "slowest": slowest,
        },
    }
