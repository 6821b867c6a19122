"""The secret rules by structure (see ktrace.model.secrets, which runs them): each a pattern, the literals one of
which a text must hold for it to run, and whether a match is a secret given the text as written.

Vendor token formats (`TOKEN_RULES`, from secret_formats) run on the text as written; the rest (`FOLDED_RULES`:
URLs with credentials, `Authorization:`/`Cookie:` headers, `Bearer` tokens, a secret-looking name then its value in
any syntax, `--password X`, `<password>X</password>`, netrc) on it case-folded. Every pattern is linear under
Python's `re` (see secrets' module docstring).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ktrace.model.secret_commands import NAMES as TOOL_NAMES
from ktrace.model.secret_formats import TOKEN_FORMATS
from ktrace.model.secret_names import is_flag_value, is_secret_value

TOKEN_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (f.literals, re.compile(f.pattern)) for f in TOKEN_FORMATS
)
"""(literals one of which the text must hold, pattern). A group `s` is what is redacted, else the whole match."""
TOKEN_LITERALS = tuple(dict.fromkeys(lit for lits, _ in TOKEN_RULES for lit in lits))
TOKEN_RULE_OF = tuple((lit, i) for i, (lits, _) in enumerate(TOKEN_RULES) for lit in lits)
"""(literal, index of its rule): one flat pass over them tells which rules a text needs."""

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
    "session",
    "transports",
)
"""Lower-case fragments one of which a text must hold for the name = value rules to run."""
_NAME = r"[a-z0-9_.\-]"
"""A character of a name in the case-folded text (the rules below all run on it)."""
_KEY = (
    rf"(?={_NAME}{{0,100}}?(?:{'|'.join(_PREFILTER)}))"  # holds a secret's word within 100 characters ...
    rf"(?=(?P<key>{_NAME}{{1,200}}))(?P=key)"
)  # ... then the whole name, atomically (no backtracking into it)
"""A name holding one of the _PREFILTER words. Only such names become matches (a Python step each);
is_secret_value() on the name as written (AccountKey) and its value then says whether it is a secret."""
_ASSIGN = re.compile(
    # NAME, optionally quoted, then = : => := (not ::), then a quoted, braced (ODBC) or bare value
    rf"(?<!{_NAME}){_KEY}\\?[\"']?[ \t]{{0,3}}(?:=>?|:=|:(?!:))[ \t]{{0,3}}"
    r"(?:\\?\"(?P<dq>[^\"\\\r\n]{1,4096})|'(?P<sq>[^'\\\r\n]{1,4096})|\{(?P<brace>[^}\r\n]{1,4096})\}"
    r"|(?P<bare>(?:(?:bearer|basic|token|digest|bot|apikey)[ \t]{1,16})?[^\s\"',;&=<]{1,4096}))"
)
_FLAG_ARG = re.compile(rf"(?<![^\s\"'])(?=-){_KEY}[ \t]{{1,16}}(?P<bare>[^\s\-\"'][^\s\"']{{0,4095}})")
"""`--password hunter3` in a command line joined into one string."""
_XML = re.compile(rf"<{_KEY}(?:[ \t][^<>\r\n]{{0,200}})?>(?P<xml>[^<]{{1,4096}})</")
"""`<password>hunter2</password>`, `<api_key id="1">...</api_key>`."""
_SPACED = re.compile(r"(?<![a-z0-9_\-])(?P<key>password|passwd|passphrase)[ \t]{1,16}(?P<spaced>[^\s\"',;]{1,1024})")
"""netrc's `machine h login u password hunter2`, and `password hunter2` in free text (a plain word is kept)."""
_NETRC = re.compile(r"(?<![a-z0-9_\-])(?:login|machine|default)[ \t]")
"""netrc's words: within 300 characters before `password`, its value is a password even if it is a word."""
_PLAIN_WORD = re.compile(r"[a-z]+|[A-Z][a-z]+|[A-Z]+")
_HEADER = re.compile(
    r"(?<![a-z0-9_\-])(?:proxy-)?(?:authorization|set-cookie|cookie)[ \t]{0,3}:[ \t]{0,3}(?P<hdr>(?:\"[^\"\r\n]{0,512}\"|[^\r\n\"'\\]){1,4096})"
)
"""An `Authorization:` or `Cookie:` header: its whole value (`Digest username="u", response="..."`, every cookie)."""
_BEARER = re.compile(r"(?<![a-z0-9_])bearer[ \t]{1,16}(?P<bare>[a-z0-9._~+/=\-]{8,4096})")
_URL = re.compile(
    r"(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]{0,30}://(?P<user>[^:/?#@\s\"']{0,256})"
    r"(?::(?P<pw>[^/?#@\s\"']{1,1024}))?@"
)
"""scheme://user:password@host (basic auth, postgres://, redis://:pw@) and scheme://token@host (Sentry DSN)."""
_URL_TOKEN_USER = re.compile(r"[a-z0-9_\-]{16,}")
"""A user name this long and plain is a key (Sentry DSN, https://ghp_...@github.com), not a login."""
Rule = Callable[[re.Match[str], str], bool]
"""Whether a match (in the case-folded text) is a secret, given the text as written."""


def always(m: re.Match[str], text: str) -> bool:
    return True


def _named_secret(m: re.Match[str], text: str) -> bool:
    group = m.lastgroup or ""
    key = text[m.start("key") : m.end("key")]
    return is_secret_value(key, text[m.start(group) : m.end(group)])


def _spaced_secret(m: re.Match[str], text: str) -> bool:
    value = text[m.start("spaced") : m.end("spaced")]
    if is_flag_value(value):
        return False
    return (
        _PLAIN_WORD.fullmatch(value) is None or _NETRC.search(m.string, max(0, m.start() - 300), m.start()) is not None
    )


def _url_secret(m: re.Match[str], text: str) -> bool:
    return m["pw"] is not None or _URL_TOKEN_USER.fullmatch(m["user"]) is not None


FOLDED_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str], Rule], ...] = (
    (("://",), _URL, _url_secret),
    (("authorization", "cookie"), _HEADER, always),
    (("bearer",), _BEARER, always),
    (_PREFILTER, _ASSIGN, _named_secret),
    (_PREFILTER, _FLAG_ARG, _named_secret),
    (("</",), _XML, _named_secret),
    (("password", "passwd", "passphrase"), _SPACED, _spaced_secret),
)
"""(literals one of which the case-folded text must hold, pattern, is it a secret)."""
FOLDED_LITERALS = tuple(dict.fromkeys([*(lit for lits, _, _ in FOLDED_RULES for lit in lits), *TOOL_NAMES]))
FOLDED_RULE_OF = tuple((lit, i) for i, (lits, _, _) in enumerate(FOLDED_RULES) for lit in lits)
