"""Readable kernel names: C++ noise collapsed so a name fits a table cell, yet names stay told apart.

`short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
at::detail::Array<char*, 3> >(int, ...)", 60)` -> "at::native::vectorized_elementwise_kernel<CUDAFunctor_add<float>>":
the parameter list, the namespaces inside the template arguments and the arguments that tell nothing (numbers,
booleans, `Array<char*, 3>`) go first, so the functor, lambda, dtype or tile that tells two kernels apart stays.
`distinct_short_names` shortens a whole table's names at once and makes sure no two different kernels read the
same. Used for display only (terminal summary, report, TUI); analyses always group by the full name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from ktrace.model.display_text import fit_end

_ANON = "(anonymous namespace)::"
_VERSIONED_NS = re.compile(r"\b(?:(?:cub|thrust)::)?(CUB|THRUST)_[0-9A-Za-z_]*?_NS::")
"""CCCL's versioned namespaces (CUB_200600_500_..._NS::) -> cub:: / thrust::."""
_OPERATOR_CALL = re.compile(r"::operator\(\)\(\)(?: const)?")
_TORCH_LAMBDA = re.compile(r"\{lambda\(([^(){}]*)\)#\d+\}")
"""GCC's `{lambda(float)#1}`: kept as `lambda(float)` (its parameter types are the dtype)."""
_INSTANCE_LAMBDA = re.compile(r"\[lambda\([^()]*\) \(instance (\d+)\)\]")
"""EDG/nvcc's `[lambda(int, int) (instance 2)]`: kept as `lambda#2` (the instance tells lambdas apart)."""
_LAMBDA_CHAIN = re.compile(r"(?:lambda\([^()]*\)::)+(?=lambda)")
_QUALIFIER = re.compile(r"\b(?:[A-Za-z_]\w*::)+(?!lambda\b)(?=[A-Za-z_~])")
"""`at::native::` before a name (not the owner of a lambda: `PdV_kernel::lambda#2` keeps its owner)."""
_UNINFORMATIVE = re.compile(r"^(?:-?\d+[uUlL]*|true|false|\(\w+\)-?\d+|.*\bchar\s*\*.*)$")
"""Template arguments that rarely tell kernels apart: numbers, booleans, casts, `Array<char*, 3>`."""


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
        head = name[: groups[-1][0]]
        if head.rstrip().endswith((">", "]")) or head[-1:].isalnum() or head.endswith("_"):
            return head.rstrip()
    return name


_WRAPPERS = ("Kernel", "Kernel2", "device_kernel", "kernel")
"""Generic launch wrappers (cutlass::Kernel<Op>): their first template argument is the real name."""


def _unwrap(text: str) -> str:
    head, sep, rest = text.partition("<")
    if sep and head.rsplit("::", 1)[-1] in _WRAPPERS and rest.endswith(">"):
        groups = _split_top_level(text, "<", ">")
        if groups and groups[0][1] == len(text) - 1:
            first = text[groups[0][0] + 1 : groups[0][1]].split(",", 1)[0].strip()
            if first:
                return first
    return text


def _normalized(name: str) -> str:
    """The name on one line, without `void`, versioned CCCL namespaces or its parameter list."""
    text = " ".join(name.split())
    if text.startswith("void "):
        text = text[5:]
    text = _VERSIONED_NS.sub(lambda m: m[1].lower() + "::", text)
    return _unwrap(_drop_parameters(text))


def _drop_inner_parameters(text: str) -> str:
    """Remove every "(...)" that follows a name or a template (a function's parameters), at any depth."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        prev = "".join(out[-8:]).rstrip()
        if ch == "(" and prev and (prev[-1].isalnum() or prev[-1] in "_>") and not prev.endswith("lambda"):
            depth = 0
            for j in range(i, len(text)):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split_args(inner: str) -> list[str]:
    """Top-level comma-separated template arguments of `inner` (the text between < and >)."""
    args, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(inner[start:i].strip())
            start = i + 1
    args.append(inner[start:].strip())
    return [a for a in args if a]


def compact_parts(name: str) -> tuple[str, list[str]]:
    """(qualified kernel name, its template arguments) with parameters, inner namespaces and lambda noise gone."""
    text = _normalized(name).replace(_ANON, "")
    text = _OPERATOR_CALL.sub("", text)
    text = _INSTANCE_LAMBDA.sub(r"lambda#\1", _TORCH_LAMBDA.sub(r"lambda(\1)", text))
    text = _LAMBDA_CHAIN.sub("", text)
    text = _drop_inner_parameters(text)
    groups = _split_top_level(text, "<", ">")
    if not groups or groups[0][1] != len(text) - 1:
        return text, []
    head, inner = text[: groups[0][0]], text[groups[0][0] + 1 : groups[0][1]]
    args = [_QUALIFIER.sub("", a).replace("> >", ">>").replace(" >", ">") for a in _split_args(inner)]
    return head, args


def _template(head: str, args: list[str]) -> str:
    return f"{head}<{', '.join(args)}>" if args else head


def _unqualified(head: str) -> str:
    """`head` without its namespaces; a Kineto operator's "what: which" keeps both parts
    ("autograd::engine::evaluate_function: torch::autograd::CppNode" -> "evaluate_function: CppNode")."""
    what, sep, which = head.partition(": ")
    if sep and which:
        return f"{what.rsplit('::', 1)[-1]}: {which.rsplit('::', 1)[-1]}"
    return head.rsplit("::", 1)[-1]


def short_kernel_name(name: str, width: int = 60) -> str:
    """A display form of a kernel name at most `width` characters long (the telling arguments kept first)."""
    head, args = compact_parts(name)
    if not args:
        return fit_end(head, width)
    telling = _telling(args)
    last = _unqualified(head)
    for candidate in (
        _template(head, args),
        _template(head, telling) if telling else f"{head}<…>",
        _template(last, telling) if telling else f"{last}<…>",
    ):
        if len(candidate) <= width:
            return candidate
    return fit_end(_template(last, telling) if telling else f"{last}<…>", width)


def _window(text: str, first: int, last: int, width: int) -> str:
    """`text` in `width` characters, keeping visible the span from `first` to `last` (where it is told apart).

    A template keeps its arguments whole and gives up the middle of the kernel's own name first
    (`par_ran…<advec_mom_kernel::lambda#3>`); otherwise the start and a window over the span are shown.
    """
    if len(text) <= width:
        return text
    head, sep, rest = text.partition("<")
    if sep and width - len(sep + rest) - 1 >= 3:
        return head[: width - len(sep + rest) - 1] + "…" + sep + rest
    if last <= width - 2:
        return text[: width - 1] + "…"
    lead = min(len(head), max(3, width // 6))
    room = width - lead - 1
    start = len(head) if sep and len(head) <= first else first - 2
    start = max(lead, min(max(start, last - room + 2), len(text) - room))
    if len(text) - start > room >= len(text) - last + 2:  # the rest from the difference on fits: end on the end
        start = max(lead, len(text) - room)
    tail = text[start : start + room]
    if start + room < len(text):
        tail = tail[:-1] + "…"
    return text[:lead] + "…" + tail


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _telling_forms(group: list[str]) -> list[str]:
    """The shortest forms of `group` that are all different: telling arguments, all arguments, the whole name."""
    parts = [compact_parts(n) for n in group]
    for forms in (
        [_template(_unqualified(h), _telling(a)) for h, a in parts],
        [_template(_unqualified(h), a) for h, a in parts],
        [_template(h, a) for h, a in parts],
    ):
        if len(set(forms)) == len(forms):
            return forms
    return [_normalized(n) for n in group]


def _telling(args: list[str]) -> list[str]:
    return [a for a in args if not _UNINFORMATIVE.match(a)]


def _told_apart(forms: list[str], width: int) -> list[str]:
    """Each form in `width` characters, windowed to the place where it first differs from the others."""
    out = []
    for i, form in enumerate(forms):
        shared = [_common_prefix(form, other) for j, other in enumerate(forms) if j != i] or [0]
        out.append(_window(form, min(shared), max(shared), width))
    return out


_TOKENS = re.compile(r"([_:.\s/<>,()\[\]-]+)")
"""Separators of the parts of a name (`bmm_MxE4m3_..._schedS_sm100f`, `a::b<c, d>`)."""


def _skeletons(forms: list[str], width: int) -> list[str] | None:
    """The parts that tell `forms` apart, the others as "…": eight B200 GEMMs named alike but for their output type,
    tile, stages and schedule read "bmm…Fp32…s3…schedS". Parts implied by the others are left out, longest first,
    and put back, shortest first, while the width allows.
    None when the forms are not made of the same parts, or the skeletons do not fit `width` or are not distinct.
    """
    split = [_TOKENS.split(f) for f in forms]
    if len({len(parts) for parts in split}) != 1 or len({tuple(parts[1::2]) for parts in split}) != 1:
        return None
    varying = [i for i in range(2, len(split[0]), 2) if len({parts[i] for parts in split}) > 1]

    def render(keep: list[int]) -> list[str]:
        out = []
        for parts in split:
            text, gap = parts[0], False
            for i in range(2, len(parts), 2):
                if i in keep:
                    text += ("…" if gap else parts[i - 1]) + parts[i]
                    gap = False
                else:
                    gap = True
            out.append(text + ("…" if gap else ""))
        return out

    keep = list(varying)
    for i in sorted(varying, key=lambda i: -max(len(parts[i]) for parts in split)):
        fewer = [k for k in keep if k != i]
        if len(set(render(fewer))) == len(forms):
            keep = fewer
    for i in sorted(set(varying) - set(keep), key=lambda i: max(len(parts[i]) for parts in split)):
        more = sorted([*keep, i])  # room left: the implied parts too, shortest first
        if max(map(len, render(more))) <= width:
            keep = more
    shown = render(keep)
    return shown if len(set(shown)) == len(forms) and max(map(len, shown)) <= width else None


def _merge(groups: list[list[str]]) -> list[list[str]]:
    """The groups with every two that share a name joined (order kept)."""
    out: list[list[str]] = []
    for group in groups:
        joined = [g for g in out if set(g) & set(group)]
        for g in joined:
            out.remove(g)
        out.append(list(dict.fromkeys([n for g in joined for n in g] + group)))
    return out


def distinct_short_names(names: Sequence[str], width: int = 60, *, plain: bool = False) -> dict[str, str]:
    """Full name -> display name (at most `width` characters, never the same for two different names).

    Names first get `short_kernel_name`; those that collide are shown in the shortest form that tells them apart
    (windowed to where they differ when too long, or the parts that differ where they differ in several places);
    any still equal get " #2", " #3", ... in the order given.
    `plain`: names that are not C++ (hosts, row labels, modules) are only cut, where they differ ("(16 ranks)" is
    not a parameter list).
    """
    unique = list(dict.fromkeys(names))
    shown = {n: fit_end(n, width) if plain else short_kernel_name(n, width) for n in unique}
    return _numbered(_told_apart_groups(shown, unique, width, plain), unique, width)


def _alike(shown: dict[str, str], unique: list[str]) -> list[list[str]]:
    """The names shown the same, in groups of two or more."""
    same: dict[str, list[str]] = defaultdict(list)
    for n in unique:
        same[shown[n]].append(n)
    return [g for g in same.values() if len(g) > 1]


def _told_apart_groups(shown: dict[str, str], unique: list[str], width: int, plain: bool) -> dict[str, str]:
    """`shown` with each group of names shown alike told apart (groups told apart alike are then told apart
    together: "bmm…s3…schedS…" from each of two groups)."""
    groups = _alike(shown, unique)
    while groups:
        out = dict(shown)
        for group in groups:
            forms = group if plain else _telling_forms(group)
            told = _told_apart(forms, width)
            if len(set(told)) < len(told):  # they differ in several places, too far apart for one window
                told = _skeletons(forms, width) or told
            out.update(zip(group, told, strict=True))
        merged = [g for g in _alike(out, unique) if not any(set(g) <= set(old) for old in groups)]
        if not merged:
            return out
        groups = _merge(groups + merged)
    return shown


def _numbered(shown: dict[str, str], unique: list[str], width: int) -> dict[str, str]:
    """Names still shown alike get " #2", " #3", ... in the order given."""
    seen: dict[str, int] = defaultdict(int)
    taken = set(shown.values())
    for n in unique:
        text = shown[n]
        seen[text] += 1
        if seen[text] > 1:
            k = seen[text]
            while True:
                suffix = f" #{k}"
                candidate = text[: max(0, width - len(suffix))] + suffix
                if candidate not in taken:
                    break
                k += 1
            shown[n] = candidate
            taken.add(candidate)
    return shown
