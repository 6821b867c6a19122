"""Readable kernel names: C++ template and parameter noise collapsed so a name fits a table cell.

`short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
at::detail::Array<char*, 3> >(int, ...)")` -> "at::native::vectorized_elementwise_kernel<4, …>". Used for display
only (terminal summary, report, TUI); analyses always group by the full name.
"""

from __future__ import annotations

import re

_ANON = "(anonymous namespace)::"
_VERSIONED_NS = re.compile(r"\b(?:(?:cub|thrust)::)?(CUB|THRUST)_[0-9A-Za-z_]*?_NS::")
"""CCCL's versioned namespaces (CUB_200600_500_..._NS::) -> cub:: / thrust::."""


def _split_top_level(text: str, opener: str, closer: str) -> list[tuple[int, int]]:
    """(start, end) index pairs of the top-level `opener`...`closer` groups in `text`."""
    groups, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == opener:
            if depth == 0:
                start = i
            depth += 1
        elif ch == closer and depth > 0:
            depth -= 1
            if depth == 0:
                groups.append((start, i))
    return groups


def _drop_parameters(name: str) -> str:
    """Remove a trailing top-level parameter list "(...)" (not the "(anonymous namespace)" kind)."""
    groups = _split_top_level(name, "(", ")")
    if groups and groups[-1][1] == len(name.rstrip()) - 1 and groups[-1][0] > 0:
        head = name[:groups[-1][0]]
        if head.rstrip().endswith((">", "]")) or head[-1:].isalnum() or head.endswith("_"):
            return head.rstrip()
    return name


def _collapse_templates(name: str, keep: int = 12) -> str:
    """Replace the content of each top-level <...> group by its first argument and "…" when long."""
    out, pos = [], 0
    for start, end in _split_top_level(name, "<", ">"):
        inner = name[start + 1:end]
        out.append(name[pos:start + 1])
        if len(inner) <= keep:
            out.append(inner)
        else:
            first = inner.split(",", 1)[0].strip()
            out.append(f"{first}, …" if len(first) <= keep and "," in inner else "…")
        out.append(">")
        pos = end + 1
    out.append(name[pos:])
    return "".join(out)


_WRAPPERS = ("Kernel", "Kernel2", "device_kernel", "kernel")
"""Generic launch wrappers (cutlass::Kernel<Op>): their first template argument is the real name."""


def _unwrap(text: str) -> str:
    head, sep, rest = text.partition("<")
    if sep and head.rsplit("::", 1)[-1] in _WRAPPERS and rest.endswith(">"):
        groups = _split_top_level(text, "<", ">")
        if groups and groups[0][1] == len(text) - 1:
            first = text[groups[0][0] + 1:groups[0][1]].split(",", 1)[0].strip()
            if first:
                return first
    return text


def short_kernel_name(name: str, width: int = 60) -> str:
    """A display form of a kernel name at most `width` characters long."""
    text = " ".join(name.split())
    if text.startswith("void "):
        text = text[5:]
    text = text.replace(_ANON, "(anon)::")
    text = _VERSIONED_NS.sub(lambda m: m[1].lower() + "::", text)
    text = _unwrap(_drop_parameters(text))
    if len(text) > width:
        text = _collapse_templates(text)
    if len(text) > width and "::" in text.split("<", 1)[0]:
        head, sep, rest = text.partition("<")
        parts = head.split("::")
        text = "::".join(parts[-2:]) + sep + rest
    if len(text) > width:
        text = text[:max(1, width - 1)] + "…"
    return text
