"""Scrub secrets (tokens, keys, passwords) from trace metadata before it is stored or shown.

Real traces leak them: Kineto `metadata` holds the environment (HF_TOKEN), nsys exports hold the
process environment (PMI_SHARED_SECRET). Importers and the tracer pass every free-form value through here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"

_SECRET_KEY = re.compile(
    r"(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|CREDENTIAL|AUTH|"
    r"SESSION[_-]?KEY|SIGNATURE|COOKIE|_KEY$|^KEY$|WANDB_API|HF_HUB_TOKEN)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|"
    r"sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}|"
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)"
)
_INLINE_ASSIGN = re.compile(
    # the look-behind anchors the key at the start of an identifier: without it a long run of
    # [A-Za-z0-9_] (a base64 blob in an environment) is rescanned from every position, O(n^2)
    r"(?<![A-Za-z0-9_])(?P<key>[A-Za-z_][A-Za-z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY)[A-Za-z0-9_]*)"
    r"(?P<sep>\s*[=:]\s*)(?P<val>[^\s,;\"']+)",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@")


def is_secret_key(key: str) -> bool:
    """True if a variable or field name says its value is a secret (HF_TOKEN, AWS_SECRET_ACCESS_KEY, ...)."""
    return bool(_SECRET_KEY.search(key))


def scrub_text(text: str) -> tuple[str, int]:
    """Redact secret-looking substrings of free text; return (text, how many were redacted)."""
    count = 0

    def sub(pattern: re.Pattern[str], repl: Any, s: str) -> str:
        nonlocal count
        s, n = pattern.subn(repl, s)
        count += n
        return s

    text = sub(_SECRET_VALUE, REDACTED, text)
    text = sub(_INLINE_ASSIGN, lambda m: f"{m['key']}{m['sep']}{REDACTED}" if m["val"] != REDACTED else m[0], text)
    text = sub(_URL_CREDENTIALS, lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    return text, count


def scrub_value(key: str, value: Any) -> tuple[Any, int]:
    """Scrub one (key, value): a secret key redacts the whole value; nested containers are walked."""
    if isinstance(value, Mapping):
        return scrub_mapping(value)
    if isinstance(value, list | tuple):
        out, total = [], 0
        for item in value:
            v, n = scrub_value(key, item)
            out.append(v)
            total += n
        return (type(value)(out) if isinstance(value, tuple) else out), total
    if is_secret_key(key) and value not in (None, "", REDACTED) and not isinstance(value, bool | int | float):
        return REDACTED, 1
    if isinstance(value, str):
        return scrub_text(value)
    return value, 0


def scrub_mapping(data: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A copy of `data` with secrets redacted, and the number of values redacted."""
    out: dict[str, Any] = {}
    total = 0
    for key, value in data.items():
        out[key], n = scrub_value(str(key), value)
        total += n
    return out, total


def scrub_environment(env: Mapping[str, str]) -> tuple[dict[str, str], int]:
    """An environment (NAME -> value) with secret variables redacted."""
    clean, n = scrub_mapping(env)
    return {k: str(v) for k, v in clean.items()}, n
