"""Scrub secrets (tokens, keys, passwords) from every string ktrace keeps, before it is stored or shown.

Real traces leak them: Kineto `metadata` holds the environment (HF_TOKEN), nsys exports hold the process
environment (PMI_SHARED_SECRET), command lines hold `--password hunter3`. Importers, the tracer and the store
pass every string through here (ktrace.model.scrub does whole tables, by distinct value).

Secrets are found by their structure, so that a form nobody listed is still caught:
- a name that says "secret" (ktrace.model.secret_names: password, passwd, pwd, pass, secret, token, api key,
  access key, private key, credential, auth, session, cookie, ... in any casing and any word of the name), then its
  value, in every syntax: `k=v`, `k: v`, `"k": "v"`, `'k' => 'v'`, `<k>v</k>`, INI/ODBC `k=v;` and `k={v}`,
  `--k v`, `--k=v`, netrc `login u password v`; the value goes whatever it looks like;
- the options of tools that take a password by position (ktrace.model.secret_commands: `sshpass -p`, `mysql -pX`,
  `curl -u user:pass`, `redis-cli -a`, ...);
- `scheme://user:password@host`, `Authorization:` and `Cookie:` headers, `Bearer` tokens, PEM blocks;
- vendor token formats (ktrace.model.secret_formats: gitleaks' rules and vendors' documentation, sources named);
- all of the above on the text decoded first where it holds escapes (`%XX`, JSON's and Python's backslash
  escapes, HTML character references; up to 3 levels), so that `password%3DX`, a JSON key written
  `"\\u0070assword"` and a command line inside a JSON string are caught (such a text is then kept decoded);
- in a command line given as argv, any long random-looking argument (secret_names.looks_random).
Long hex or base64 runs in other text are NOT redacted on their own look (kernel names, hashes and UUIDs look like
that too). tests/unit/model/test_secrets_fixtures.py counts the redactions in every real trace of fixtures/.

Our own rules, not a dependency: detect-secrets 1.5.0 took 0.2-1.2 s to import and 1.6-9.4 ms per string, its
entropy plugins flagged kernel names (`ampere_sgemm_128x64_tn`) and it reports findings, not spans to redact;
gitleaks' RE2 expressions are linear, but several are quadratic under Python's backtracking `re`.

Linear time: every pattern here can only start a match at the start of a run of its characters (a negative
look-behind on the run's class), every open-ended repetition is bounded or the last thing in its pattern, or atomic
(a look-ahead captures the name, a back-reference consumes it), and patterns run only when a literal they need is in
the text. tests/unit/model/test_secrets.py scrubs 1 MB adversarial strings of every rule's shape within 2 s of CPU.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from ktrace.model.secret_commands import NAMES as TOOL_NAMES
from ktrace.model.secret_commands import option_secrets, text_option_secrets
from ktrace.model.secret_names import REDACTED, is_flag_value, is_secret_key, is_secret_value, looks_random
from ktrace.model.secret_rules import (
    FOLDED_LITERALS,
    FOLDED_RULE_OF,
    FOLDED_RULES,
    TOKEN_LITERALS,
    TOKEN_RULE_OF,
    TOKEN_RULES,
    Rule,
    always,
)

__all__ = [
    "MAX_DEPTH",
    "REDACTED",
    "TOO_DEEP",
    "is_flag_value",
    "is_secret_key",
    "scrub_argv",
    "scrub_environment",
    "scrub_mapping",
    "scrub_strings",
    "scrub_text",
    "scrub_value",
]

_BARE_RUN = re.compile(r"[^\s\"',;&<]*")
"""Where a bare value redacted ends: it runs on over `=` (base64 padding, `a=b` inside a password)."""
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}|\\(?:[ux][0-9a-fA-F]{2}|[ntr\"\\/])|&(?:#[0-9xX]|[a-zA-Z]{2,6};)")
"""An escape that may hide a secret's name, its `=` or the space before it (`password%3DX`, `\\u0070assword`,
`&quot;`, a JSON string's `\\n\\tpassword X` or `\\\"secret\\\"`)."""
_MAY_HOLD_SECRET = re.compile(r"[A-Za-z%\\&]")
"""Every rule needs a letter (a name, a token's prefix, a scheme) or an escape: shapes and numbers hold none."""
_BACKSLASH_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([ntr\"\\/]))")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "/": "/"}


def scrub_text(text: str) -> tuple[str, int]:
    """Redact secret-looking substrings of free text; return (text, how many were redacted). Linear time.

    Args:
        text: any string ktrace keeps: a kernel, range or thread name, a metadata value, a command line.
    """
    return _scrub_short(text) if len(text) <= 256 else _scrub(text)


def _scrub(text: str) -> tuple[str, int]:
    """Decoded first where it holds escapes (a rule may need the name or the space they hide): if the decoded
    text holds a secret, it is kept decoded, with the secret redacted."""
    if _MAY_HOLD_SECRET.search(text) is None:
        return text, 0
    if _ESCAPE.search(text):
        decoded = _decode(text)
        if decoded != text:
            clean, n = _scrub_plain(decoded)
            if n:
                return clean, n
    return _scrub_plain(text)


_scrub_short = functools.lru_cache(maxsize=16384)(_scrub)
"""Names repeat (metadata keys, argv flags): a short text is scrubbed once."""


def _scrub_plain(text: str) -> tuple[str, int]:
    count = 0
    for i in sorted({i for lit, i in TOKEN_RULE_OF if lit in text}):
        text, n = _redact(TOKEN_RULES[i][1], text, text, always)
        count += n
    folded = _fold(text)
    for i in sorted({i for lit, i in FOLDED_RULE_OF if lit in folded}):
        _, pattern, is_secret = FOLDED_RULES[i]
        text, n = _redact(pattern, folded, text, is_secret)
        if n:
            count += n
            folded = _fold(text)
    if any(name in folded for name in TOOL_NAMES):
        spans = [s for s in text_option_secrets(text) if REDACTED not in text[s[0] : s[1]]]
        if spans:
            text = _replace_spans(text, spans)
            count += len(spans)
    return text, count


def _decode(text: str) -> str:
    """`text` with `%XX`, JSON's and Python's backslash escapes and HTML character references decoded, up to three
    times (a JSON string inside a JSON string, `%253D`); a lone surrogate stays escaped (Arrow would refuse it)."""
    for _ in range(3):
        decoded = _BACKSLASH_ESCAPE.sub(_unescape, unquote(text, errors="replace"))
        decoded = html.unescape(decoded) if "&" in decoded else decoded
        if decoded == text:
            break
        text = decoded
    return text


def _unescape(m: re.Match[str]) -> str:
    if m[3] is not None:
        return _SIMPLE_ESCAPES[m[3]]
    code = int(m[1] or m[2], 16)
    return m[0] if 0xD800 <= code <= 0xDFFF else chr(code)


def _fold(text: str) -> str:
    """`text` with A-Z lower-cased and nothing else changed, so that spans in it are spans in `text`."""
    folded = text.lower()
    return folded if len(folded) == len(text) else text.translate(_ASCII_LOWER)  # "İ".lower() is 2 characters


def _replace_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    out: list[str] = []
    last = 0
    for start, end in sorted(spans):
        if start >= last:
            out += [text[last:start], REDACTED]
            last = end
    return "".join([*out, text[last:]])


def _redact(pattern: re.Pattern[str], subject: str, text: str, is_secret: Rule) -> tuple[str, int]:
    """Replace in `text` the secret part (group `s`, `pw`, a value, else the whole match) of each match of
    `pattern` in `subject` (`text`, or `text` case-folded) that `is_secret`.

    A match that is no secret is searched again from where its value starts, so `tokenizer=password:hunter2`
    still finds the password; a bare value redacted runs on to the next space, quote, `,`, `;`, `&` or `<`.
    """
    out: list[str] = []
    pos = last = count = 0
    while (m := pattern.search(subject, pos)) is not None:
        group = m.lastgroup
        start, end = m.span(group) if group else m.span()
        if REDACTED not in subject[start:end] and is_secret(m, text):
            if group == "bare":
                end = _BARE_RUN.match(subject, end).end()  # type: ignore[union-attr]  # [^...]* always matches
            out.append(text[last:start])
            out.append(REDACTED)
            last = pos = max(end, m.start() + 1)
            count += 1
        else:
            pos = max(start if group else end, m.start() + 1)
    if not count:
        return text, 0
    out.append(text[last:])
    return "".join(out), count


def scrub_strings(values: Sequence[str]) -> tuple[dict[str, str], int]:
    """{value: scrubbed} for those of `values` (distinct names of a column) that held a secret, and how many
    were redacted. One pass over all of them joined tells which rules could match at all; a name is scrubbed
    only if it holds one of those rules' literals, so thousands of kernel names cost a few scans of their text."""
    scrubbed = _scrub_distinct(values)
    return {value: clean for value, (clean, _) in scrubbed.items()}, sum(n for _, n in scrubbed.values())


def _scrub_distinct(values: Sequence[str]) -> dict[str, tuple[str, int]]:
    """{value: (scrubbed, how many redacted)} for those of distinct `values` that held a secret (scrub_strings)."""
    blob = "\x00".join(values)
    literals = [lit for lit in TOKEN_LITERALS if lit in blob]
    folded_blob = _fold(blob)
    folded = [lit for lit in FOLDED_LITERALS if lit in folded_blob]
    escaped = _ESCAPE.search(blob) is not None
    changes: dict[str, tuple[str, int]] = {}
    if not literals and not folded and not escaped:
        return changes
    for value in values:
        low = _fold(value) if folded else ""
        if (
            any(lit in value for lit in literals)
            or any(lit in low for lit in folded)
            or (escaped and _ESCAPE.search(value))
        ):
            clean, n = scrub_text(value)
            if n:
                changes[value] = (clean, n)
    return changes


_ASSIGNED = re.compile(r"(-{0,2}[A-Za-z_][A-Za-z0-9_.\-]{0,100}=)(.+)", re.DOTALL)


def scrub_argv(argv: Sequence[str]) -> tuple[list[str], int]:
    """A command line with secrets redacted: a secret flag's value in the next element (`--password hunter3`),
    a tool's password option (`sshpass -p X`, `mysql -pX`, `curl -u user:X`), and any long random-looking
    argument or `--flag=` / `NAME=` value whatever its name. `--tp 2`, `ssh -p22`, paths and hashes are kept.

    Args:
        argv: the command line, one element per argument.
    """
    args = [str(a) for a in argv]
    out: list[str] = []
    count = 0
    options = {i: (start, end) for i, start, end in option_secrets(args)}
    changes = _scrub_distinct(list(dict.fromkeys(args)))
    for i, arg in enumerate(args):
        prev = args[i - 1] if i else ""
        if i in options:
            start, end = options[i]
            out.append(arg[:start] + REDACTED + arg[end:])
            count += 1
        elif prev.startswith("-") and "=" not in prev and not arg.startswith("-") and is_secret_value(prev, arg):
            out.append(REDACTED)
            count += 1
        else:
            clean, n = changes.get(arg, (arg, 0))
            clean, random = _scrub_random(clean)
            out.append(clean)
            count += n + random
    return out, count


def _scrub_random(arg: str) -> tuple[str, int]:
    assigned = _ASSIGNED.fullmatch(arg)
    if assigned is not None and looks_random(assigned[2]):
        return assigned[1] + REDACTED, 1
    return (REDACTED, 1) if looks_random(arg) else (arg, 0)


MAX_DEPTH = 64
"""Containers nested deeper than this in metadata are replaced by a note: what reads meta.json later
(dataclasses.asdict, json) recurses, and a hostile trace's `metadata` nested 500 deep would crash it."""
TOO_DEEP = f"<nested deeper than {MAX_DEPTH} levels: not kept>"


def scrub_value(key: str, value: Any) -> tuple[Any, int]:
    """Scrub one (key, value): a secret key redacts the whole value; nested containers are walked without
    recursion and cut at MAX_DEPTH levels (never raises, however deep). Tuples come back as lists. The texts
    are scrubbed together at the end (scrub_strings: one pass over them all says which rules can match)."""
    root: list[Any] = [None]
    count = 0
    texts: list[tuple[Any, Any, str]] = []
    stack: list[tuple[str, Any, Any, Any, int]] = [(key, value, root, 0, 0)]
    while stack:
        k, v, parent, slot, depth = stack.pop()
        if isinstance(v, Mapping | list | tuple) and depth >= MAX_DEPTH:
            parent[slot] = TOO_DEEP
        elif isinstance(v, Mapping):
            new: dict[Any, Any] = {}
            parent[slot] = new
            for kk, vv in v.items():
                name, n = scrub_text(kk) if isinstance(kk, str) else (kk, 0)
                count += n
                new[name] = None
                stack.append((str(name), vv, new, name, depth + 1))
        elif isinstance(v, list | tuple) and v and not is_secret_key(k) and all(isinstance(i, str) for i in v):
            parent[slot], n = scrub_argv(v)  # a command line: `--password`, then the password
            count += n
        elif isinstance(v, list | tuple):
            items: list[Any] = [None] * len(v)
            parent[slot] = items
            stack.extend((k, item, items, i, depth + 1) for i, item in enumerate(v))
        elif isinstance(v, str) and not (v and is_secret_value(k, v)):
            parent[slot] = v
            texts.append((parent, slot, v))
        else:
            parent[slot], n = _scrub_leaf(k, v)
            count += n
    changes = _scrub_distinct(list(dict.fromkeys(text for _, _, text in texts)))
    for parent, slot, text in texts:
        if text in changes:
            parent[slot], n = changes[text]
            count += n
    return root[0], count


def _scrub_leaf(key: str, value: Any) -> tuple[Any, int]:
    """A value that holds no other and is a secret by its name, or no text: redacted whole, or kept."""
    if isinstance(value, str | bytes) and value and is_secret_key(key):
        return REDACTED, 1
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) >= 1000 and is_secret_key(key):
        return REDACTED, 1  # PMI_SHARED_SECRET is a 20-digit number
    return value, 0


def scrub_mapping(data: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A copy of `data` with secrets redacted, and the number of values redacted."""
    clean, n = scrub_value("", data)
    return dict(clean), n


def scrub_environment(env: Mapping[str, str]) -> tuple[dict[str, str], int]:
    """An environment (NAME -> value) with secret variables redacted."""
    clean, n = scrub_mapping(env)
    return {k: str(v) for k, v in clean.items()}, n
