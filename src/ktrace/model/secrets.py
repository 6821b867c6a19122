"""Scrub secrets (tokens, keys, passwords) from every string ktrace keeps, before it is stored or shown.

Real traces leak them: Kineto `metadata` holds the environment (HF_TOKEN), nsys exports hold the process
environment (PMI_SHARED_SECRET), command lines hold `--password hunter3`. Importers, the tracer and the store
pass every string through here (ktrace.model.scrub does whole tables, by distinct value).

The rules are our own, tested against a corpus of planted forms (ktrace/testing/secrets_corpus.py: 68 texts, 4
command lines, 12 environment variables, 40 innocent names that must stay), not a dependency. Measured on the
2-core dev VM, shared and at load ~10-20, 2026-11-23: detect-secrets 1.5.0 (Yelp; Apache-2.0; last release
2024-05; pulls in requests and pyyaml) took 0.2-1.2 s to import and 1.6-9.4 ms per string in `scan_line`, its
entropy plugins flagged kernel names (`ampere_sgemm_128x64_tn`, `0x7f3a2b1c`) as secrets, its keyword plugin
missed `--password hunter3`, and it reports findings, not spans to redact. This module imports in 9-18 ms and
scrubs a distinct real kernel/API/range name in 11-25 µs. gitleaks' rules (MIT, well kept) are RE2
(linear-time) expressions: under Python's backtracking `re` several are quadratic, and vendoring ~200 would need
each re-checked. So the token formats below are the public prefixes that gitleaks and the vendors document
(hf_, ghp_, glpat-, sk-, xox?-, AKIA, AIza, SG., npm_, pypi-, ...), and names of secrets are recognised by
their words (HF_TOKEN, DB_PASS, MYSQL_PWD, PGPASSWORD, AccountKey, --api-key; not PWD, tokenizer, max_tokens).
Long hex or base64 runs are NOT redacted on their own (kernel names, hashes and UUIDs look like that too):
a bare 40-hex W&B key is caught by its name (WANDB_API_KEY=...), not by its look. Not caught: a password
given with no name or flag before it (`.netrc`'s `password hunter2`), a name of more than 100 characters
before its secret word.

Linear time: `re` backtracks, so every pattern here can only start a match at the start of a run of its
characters (a negative look-behind on the run's class), every open-ended repetition is the last thing in its
pattern, bounded, or atomic (a look-ahead captures the name, a back-reference consumes it), and patterns run only
when a literal they need is in the text. The old patterns took 4.4 s on 100 KB of hex and over 20 s on 200 KB
(quadratic); tests/unit/model/test_secrets.py scrubs 32 kinds of 1 MB adversarial strings (hex, identifier
runs, `a://`, `=`, `eyJ`, `sk-`, `-----BEGIN ...`, `key= `, ...) and fails above 2 s of CPU each (measured:
0.04-1.4 s at load ~12; the slowest are those with 100,000 real redactions).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"

_NOT_IN_TOKEN = r"(?<![A-Za-z0-9_])"
"""A token starts at the start of a word: without this, a long run is rescanned from each of its positions."""

_TOKEN_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (literals, re.compile(pattern))
    for literals, pattern in (
        (("hf_",), _NOT_IN_TOKEN + r"hf_[A-Za-z0-9]{20,}"),  # Hugging Face
        (
            ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
            _NOT_IN_TOKEN + r"gh[pousr]_[A-Za-z0-9]{20,}",
        ),  # GitHub classic tokens
        (("github_pat_",), _NOT_IN_TOKEN + r"github_pat_[A-Za-z0-9_]{20,}"),
        (("gl",), _NOT_IN_TOKEN + r"gl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent)-[A-Za-z0-9_-]{20,}"),  # GitLab
        (("sk-",), r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}"),  # OpenAI sk-, sk-proj-; Anthropic sk-ant-
        (("k_live_", "k_test_"), _NOT_IN_TOKEN + r"[rs]k_(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe
        (("xox", "xapp-"), r"(?<![A-Za-z0-9-])(?:xox[abposre]|xapp)-[A-Za-z0-9-]{10,}"),  # Slack
        (
            ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        ),
        (("AIza",), _NOT_IN_TOKEN + r"AIza[0-9A-Za-z_-]{30,}"),  # Google API key
        (("ya29.",), _NOT_IN_TOKEN + r"ya29\.[0-9A-Za-z_-]{20,}"),  # Google OAuth access token
        (("SK",), _NOT_IN_TOKEN + r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"),  # Twilio API key
        (("SG.",), _NOT_IN_TOKEN + r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),  # SendGrid
        (("npm_",), _NOT_IN_TOKEN + r"npm_[A-Za-z0-9]{30,}"),
        (("pypi-",), _NOT_IN_TOKEN + r"pypi-[A-Za-z0-9_-]{40,}"),
        (("dapi",), _NOT_IN_TOKEN + r"dapi[0-9a-f]{32}"),  # Databricks
        (("r8_",), _NOT_IN_TOKEN + r"r8_[A-Za-z0-9]{30,}"),  # Replicate
        (("shpat_", "shpca_", "shppa_", "shpss_"), _NOT_IN_TOKEN + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),  # Shopify
        (("eyJ",), r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # JWT
        # everything from BEGIN to END, or to the next "-----" or the end of the text if END is missing
        (
            ("PRIVATE KEY",),
            r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----[^-]*(?:-(?!----)[^-]*)*"
            r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
        ),
        (("hooks.slack.com",), r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9/_+-]{1,512})"),
        (("/api/webhooks/",), r"discord(?:app)?\.com/api/webhooks/(?P<s>[0-9]{1,30}/[A-Za-z0-9_-]{1,256})"),
    )
)
"""(literals one of which the text must hold, pattern). A group `s` is what is redacted, else the whole match."""

_KEY_WORDS = frozenset(
    {
        "token",
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
        "passcode",
        "pwd",
        "pass",
        "cred",
        "credential",
        "credentials",
        "creds",
        "cookie",
        "signature",
        "sig",
        "dsn",
        "jwt",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "authorization",
        "auth",
        "authtoken",
        "webhook",
        "bearer",
    }
)
"""Words of a name that make its value a secret (HF_TOKEN, DB_PASS, MYSQL_PWD, SENTRY_DSN, sig=, --api-key)."""
_KEY_SUFFIXES = ("password", "passwd", "secret", "token", "passphrase", "credential", "credentials", "apikey")
"""Upper-case words ending so name secrets too (PGPASSWORD, CLIENTSECRET); not `tokens`, `tokenizer`, `tiktoken`."""
_KEY_QUALIFIERS = frozenset(
    {
        "api",
        "access",
        "private",
        "secret",
        "account",
        "auth",
        "encryption",
        "signing",
        "master",
        "client",
        "app",
        "storage",
        "shared",
        "session",
        "subscription",
        "license",
        "ssh",
        "gpg",
        "deploy",
        "service",
        "consumer",
        "primary",
        "secondary",
        "admin",
        "hmac",
        "write",
    }
)
"""Words that make a following `key` a secret anywhere in a name (ACCESS_KEY_ID, AccountKey, apiKey)."""
_SECRET_NAMES = frozenset({"ompi_mca_orte_precondition_transports"})
"""Whole names whose value is a secret though no word says so (Open MPI's PSM job key)."""
_NOT_SECRET_NAMES = frozenset({"pwd", "oldpwd"})
"""The shell's working directories, though MYSQL_PWD is a password."""
_PLACE_WORDS = frozenset({"addr", "address", "file", "path", "dir", "host", "port"})
"""A name ending so says where a secret is, not what it is (TBE_CREDS_ADDR, PASSWORD_FILE, TOKEN_PATH)."""
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_PREFILTER = (
    "pass",
    "pwd",
    "secret",
    "token",
    "cred",
    "cookie",
    "sig",
    "dsn",
    "jwt",
    "key",
    "auth",
    "bearer",
    "webhook",
    "transports",
)
"""Lower-case fragments one of which a text must hold for the name = value rules to run."""
_FLAG = re.compile(r"(?:true|false|yes|no|on|off|none|null|\d{1,3})?", re.IGNORECASE)
"""Values kept even under a secret's name: a flag or a small number is not a secret (HOT_KEY=false)."""

_NAME = r"[a-z0-9_.\-]"
"""A character of a name in the case-folded text (the rules below all run on it)."""
_KEY = (
    rf"(?={_NAME}{{0,100}}?(?:{'|'.join(_PREFILTER)}))"  # holds a secret's word within 100 characters ...
    rf"(?=(?P<key>{_NAME}{{1,200}}))(?P=key)"
)  # ... then the whole name, atomically (no backtracking into it)
"""A name holding one of the _PREFILTER words. Only such names become matches (a Python step each);
is_secret_key() on the name as written (AccountKey) then says whether it names a secret."""
_ASSIGN = re.compile(
    # NAME, optionally quoted, then = or : (not ::), then a quoted or bare value
    rf"(?<!{_NAME}){_KEY}\\?[\"']?[ \t]{{0,3}}(?:=|:(?!:))[ \t]{{0,3}}"
    r"(?:\\?\"(?P<dq>[^\"\\\r\n]{1,4096})|'(?P<sq>[^'\\\r\n]{1,4096})"
    r"|(?P<bare>(?:(?:bearer|basic|token|digest|bot|apikey)[ \t]{1,16})?[^\s\"',;&=]{1,4096}))"
)
_FLAG_ARG = re.compile(rf"(?<![^\s\"'])(?=-){_KEY}[ \t]{{1,16}}(?P<bare>[^\s\-\"'][^\s\"']{{0,4095}})")
"""`--password hunter3` in a command line joined into one string."""
_MYSQL_P = re.compile(r"(?:mysql|mariadb)[a-z-]{0,6}[ \t][^\n]{0,200}?(?<=[ \t])-p(?P<bare>[^\s\"']{1,256})")
"""mysql's `-pPASSWORD` in a command line joined into one string (within 200 characters of the program)."""
_BEARER = re.compile(r"(?<![a-z0-9_])bearer[ \t]{1,16}(?P<bare>[a-z0-9._~+/=\-]{8,4096})")
_URL = re.compile(
    r"(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]{0,30}://(?P<user>[^:/?#@\s\"']{0,256})"
    r"(?::(?P<pw>[^/?#@\s\"']{1,1024}))?@"
)
"""scheme://user:password@host (basic auth, postgres://, redis://:pw@) and scheme://token@host (Sentry DSN)."""
_BARE_RUN = re.compile(r"[^\s\"',;&]*")
"""Where a bare value redacted ends: it runs on over `=` (base64 padding, `a=b` inside a password)."""
_URL_TOKEN_USER = re.compile(r"[a-z0-9_\-]{16,}")
"""A user name this long and plain is a key (Sentry DSN, https://ghp_...@github.com), not a login."""
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_MYSQL = frozenset({"mysql", "mysqldump", "mysqladmin", "mariadb", "mariadb-dump", "mysqlimport", "mysqlshow"})

_Rule = Callable[[re.Match[str], str], bool]
"""Whether a match (in the case-folded text) is a secret, given the text as written."""


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """True if a variable, field or flag name says its value is a secret (HF_TOKEN, AccountKey, --password)."""
    key = key[:200]
    if key.lower() in _SECRET_NAMES:
        return True
    written = _NAME_WORDS.findall(key)
    words = [w.lower() for w in written]
    if key.lower() in _NOT_SECRET_NAMES or (len(words) > 1 and words[-1] in _PLACE_WORDS):
        return False
    if any(w in _KEY_WORDS for w in words) or any(w.isupper() and w.lower().endswith(_KEY_SUFFIXES) for w in written):
        return True
    if words and words[-1] == "key":
        return True
    return any(w == "key" and prev in _KEY_QUALIFIERS for prev, w in zip(words, words[1:], strict=False))


def is_flag_value(value: str) -> bool:
    """True for values kept even under a secret's name: "", true/false/on/off/none, 0-999, or already redacted."""
    return value == REDACTED or _FLAG.fullmatch(value.strip()) is not None


def _always(m: re.Match[str], text: str) -> bool:
    return True


def _named_secret(m: re.Match[str], text: str) -> bool:
    group = m.lastgroup or ""
    return is_secret_key(text[m.start("key") : m.end("key")].lstrip("-")) and not is_flag_value(m[group])


def _url_secret(m: re.Match[str], text: str) -> bool:
    return m["pw"] is not None or _URL_TOKEN_USER.fullmatch(m["user"]) is not None


_FOLDED_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str], _Rule], ...] = (
    (("://",), _URL, _url_secret),
    (("bearer",), _BEARER, _always),
    (("mysql", "mariadb"), _MYSQL_P, _always),
    (_PREFILTER, _ASSIGN, _named_secret),
    (_PREFILTER, _FLAG_ARG, _named_secret),
)
"""(literals one of which the case-folded text must hold, pattern, is it a secret)."""


def scrub_text(text: str) -> tuple[str, int]:
    """Redact secret-looking substrings of free text; return (text, how many were redacted). Linear time."""
    return _scrub_short(text) if len(text) <= 256 else _scrub(text)


def _scrub(text: str) -> tuple[str, int]:
    count = 0
    if _TOKEN_GATE.search(text):
        for literals, pattern in _TOKEN_RULES:
            if any(lit in text for lit in literals):
                text, n = _redact(pattern, text, text, _always)
                count += n
    folded = _fold(text)
    if _FOLDED_GATE.search(folded):
        for literals, pattern, is_secret in _FOLDED_RULES:
            if any(lit in folded for lit in literals):
                text, n = _redact(pattern, folded, text, is_secret)
                if n:
                    count += n
                    folded = _fold(text)
    return text, count


_scrub_short = functools.lru_cache(maxsize=16384)(_scrub)
"""Names repeat (metadata keys, argv flags): a short text is scrubbed once."""
_TOKEN_GATE = re.compile("|".join(re.escape(lit) for lits, _ in _TOKEN_RULES for lit in lits))
_FOLDED_GATE = re.compile("|".join(re.escape(lit) for lits, _, _ in _FOLDED_RULES for lit in lits))
"""One search for any rule's literal: most names hold none, and then no rule runs."""


def _fold(text: str) -> str:
    """`text` with A-Z lower-cased and nothing else changed, so that spans in it are spans in `text`."""
    folded = text.lower()
    return folded if len(folded) == len(text) else text.translate(_ASCII_LOWER)  # "İ".lower() is 2 characters


def _redact(pattern: re.Pattern[str], subject: str, text: str, is_secret: _Rule) -> tuple[str, int]:
    """Replace in `text` the secret part (group `s`, `pw`, a value, else the whole match) of each match of
    `pattern` in `subject` (`text`, or `text` case-folded) that `is_secret`.

    A match that is no secret is searched again from where its value starts, so `tokenizer=password:hunter2`
    still finds the password; a bare value redacted runs on to the next space, quote, `,`, `;` or `&`.
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
    blob = "\x00".join(values)
    literals = [lit for lits, _ in _TOKEN_RULES for lit in lits if lit in blob]
    folded_blob = _fold(blob)
    folded = [lit for lits, _, _ in _FOLDED_RULES for lit in lits if lit in folded_blob]
    changes: dict[str, str] = {}
    count = 0
    if not literals and not folded:
        return changes, 0
    for value in values:
        if any(lit in value for lit in literals) or (folded and any(lit in _fold(value) for lit in folded)):
            clean, n = scrub_text(value)
            if n:
                changes[value] = clean
                count += n
    return changes, count


def scrub_argv(argv: Sequence[str]) -> tuple[list[str], int]:
    """A command line with secrets redacted, including a secret flag's value in the next element
    (`--password hunter3`) and `-pPASSWORD` after a mysql program. `--tp 2`, `ssh -p22` are kept."""
    out: list[str] = []
    count = 0
    mysql = False
    for arg in map(str, argv):
        prev = out[-1] if out else ""
        mysql = mysql or arg.rsplit("/", 1)[-1] in _MYSQL
        if (
            prev.startswith("-")
            and "=" not in prev
            and is_secret_key(prev.lstrip("-"))
            and not arg.startswith("-")
            and not is_flag_value(arg)
        ):
            out.append(REDACTED)
            count += 1
        elif mysql and arg.startswith("-p") and len(arg) > 2 and not arg.startswith("--"):
            out.append("-p" + REDACTED)
            count += 1
        else:
            clean, n = scrub_text(arg)
            out.append(clean)
            count += n
    return out, count


MAX_DEPTH = 64
"""Containers nested deeper than this in metadata are replaced by a note: what reads meta.json later
(dataclasses.asdict, json) recurses, and a hostile trace's `metadata` nested 500 deep would crash it."""
TOO_DEEP = f"<nested deeper than {MAX_DEPTH} levels: not kept>"


def scrub_value(key: str, value: Any) -> tuple[Any, int]:
    """Scrub one (key, value): a secret key redacts the whole value; nested containers are walked without
    recursion and cut at MAX_DEPTH levels (never raises, however deep). Tuples come back as lists."""
    root: list[Any] = [None]
    count = 0
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
        elif (
            isinstance(v, str | bytes)
            and is_secret_key(k)
            and v not in ("", b"")
            and not (isinstance(v, str) and is_flag_value(v))
        ):
            parent[slot] = REDACTED
            count += 1
        elif isinstance(v, str):
            parent[slot], n = scrub_text(v)
            count += n
        elif isinstance(v, bool | int | float) and is_secret_key(k) and not isinstance(v, bool) and abs(v) >= 1000:
            parent[slot] = REDACTED  # PMI_SHARED_SECRET is a 20-digit number
            count += 1
        else:
            parent[slot] = v
    return root[0], count


def scrub_mapping(data: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A copy of `data` with secrets redacted, and the number of values redacted."""
    clean, n = scrub_value("", data)
    return dict(clean), n


def scrub_environment(env: Mapping[str, str]) -> tuple[dict[str, str], int]:
    """An environment (NAME -> value) with secret variables redacted."""
    clean, n = scrub_mapping(env)
    return {k: str(v) for k, v in clean.items()}, n
