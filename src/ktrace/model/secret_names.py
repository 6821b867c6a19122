"""Which names say their value is a secret (HF_TOKEN, PassWord, --api-key, <password>), and which values are kept
even under such a name (flags, small numbers, the shell's working directory), for ktrace.model.secrets.

A name is split into words (snake_case, kebab-case, dotted, camelCase, UPPER): it names a secret if one of its
words is a secret's word (password, passwd, pwd, pass, secret, token, credential, auth, session, cookie, ...), if a
word ends in one (PGPASSWORD, dbpassword, JSESSIONID), or if it ends in `key` after a qualifier (api key, access
key, private key, AccountKey). A last word saying where or how big a secret is (TOKEN_PATH, PASSWORD_FILE,
token_budget, key_size) makes it no secret: its value is a place or a number, not the secret.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter

REDACTED = "<redacted>"

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
        "cookies",
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
        "sessionid",
    }
)
"""Words of a name that make its value a secret (HF_TOKEN, DB_PASS, MYSQL_PWD, SENTRY_DSN, sig=, --api-key)."""
_SESSION_WORDS = frozenset({"session", "sid"})
"""A session's id is a secret (`session=`, `Cookie: sid=`, `session_id`), but not what a name says of a session
after it (session_start_utc, XDG_SESSION_CLASS): these words name a secret as the last word, or before `id`."""
_KEY_SUFFIXES = ("password", "passwd", "secret", "passphrase", "credential", "credentials", "apikey", "sessionid")
"""Words ending so name secrets in any casing (PGPASSWORD, dbpassword, CLIENTSECRET, JSESSIONID)."""
_UPPER_KEY_SUFFIXES = (*_KEY_SUFFIXES, "token")
"""Upper-case words may also end in `token` (GHTOKEN); a lower-case one may not (tiktoken, asttokens)."""
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
_NOT_SECRET_PREFIXES = ("xdg_",)
"""The desktop's session variables (XDG_SESSION_ID, XDG_SESSION_CLASS) are no secrets."""
"""Whole names whose value is a secret though no word says so (Open MPI's PSM job key)."""
_SHELL_DIRECTORIES = frozenset({"pwd", "oldpwd"})
"""The shell's working directories: their value is a secret (ODBC `PWD=...;`) unless it is a path."""
_NOT_SECRET_LAST_WORDS = frozenset(
    {
        "addr",
        "address",
        "file",
        "files",
        "path",
        "dir",
        "host",
        "port",
        "name",
        "budget",
        "count",
        "len",
        "length",
        "size",
        "limit",
        "num",
        "max",
        "min",
        "ttl",
        "timeout",
        "type",
        "version",
        "format",
        "mode",
        "level",
        "enabled",
        "required",
        "expiry",
        "lifetime",
        "uuid",
    }
)
"""A name ending so says where, what kind or how big a secret is (TBE_CREDS_ADDR, PASSWORD_FILE, --token-budget,
key_size, session_timeout), not what it is: the value is kept."""
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_FLAG = re.compile(r"(?:true|false|yes|no|on|off|none|null|\d{1,3})?", re.IGNORECASE)
"""Values kept even under a secret's name: a flag or a small number is not a secret (HOT_KEY=false)."""
_PATH = re.compile(r"(?:[a-z]:)?[\\/~]", re.IGNORECASE)
"""A value that starts so is a place (`PWD=/home/u`), not the ODBC password `PWD=hunter2`."""


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """True if a variable, field or flag name says its value is a secret (HF_TOKEN, AccountKey, --password).

    Args:
        key: the name as written, with or without leading dashes.
    """
    key = key[:200].lstrip("-")
    lower = key.lower()
    if lower in _SECRET_NAMES or lower in _SHELL_DIRECTORIES:
        return True
    if lower.startswith(_NOT_SECRET_PREFIXES):
        return False
    written = _NAME_WORDS.findall(key)
    words = [w.lower() for w in written]
    if len(words) > 1 and words[-1] in _NOT_SECRET_LAST_WORDS:
        return False
    if any(w in _KEY_WORDS or w.endswith(_KEY_SUFFIXES) for w in words):
        return True
    if any(w.isupper() and w.lower().endswith(_UPPER_KEY_SUFFIXES) for w in written):
        return True
    if words and (words[-1] == "key" or words[-1] in _SESSION_WORDS):
        return True
    if any(w in _SESSION_WORDS and after == "id" for w, after in zip(words, words[1:], strict=False)):
        return True
    return any(w == "key" and prev in _KEY_QUALIFIERS for prev, w in zip(words, words[1:], strict=False))


def is_flag_value(value: str) -> bool:
    """True for values kept even under a secret's name: "", true/false/on/off/none, 0-999, or already redacted."""
    return value == REDACTED or _FLAG.fullmatch(value.strip()) is not None


def is_secret_value(key: str, value: str) -> bool:
    """True if `value` written under the name `key` is a secret: the name says so, the value is no flag or small
    number, and under the shell's names (PWD, OLDPWD) it is no path."""
    if not is_secret_key(key) or is_flag_value(value):
        return False
    return key.lstrip("-").lower() not in _SHELL_DIRECTORIES or _PATH.match(value.strip("\"'{ ")) is None


_RANDOM_CHARS = re.compile(r"[A-Za-z0-9+/=_\-.~]{20,512}")
_SEPARATORS = re.compile(r"[._\-]")
_LETTERS = re.compile(r"[A-Za-z]")
_VOWELS = re.compile(r"[AEIOUaeiou]")
_CASE_RUNS = re.compile(r"[a-z]+|[A-Z]+")
_WORDS = re.compile(r"[A-Z]?[a-z]{2,}|[A-Z]{2,}(?![a-z])")
_SYLLABLE = re.compile(r"[AEIOUYaeiouy]")


def looks_random(token: str) -> bool:
    """True if `token` looks like a generated key: 20-512 characters of a token alphabet with upper- and lower-case
    letters, few separators, Shannon entropy >= 3.5 bits a character, and letters that are not words: few vowels
    (random letters have 10 of 52; names about 40 %), or the case changing every other letter, or under half of
    them in pronounceable camelCase words.

    Meant for command-line arguments, where a long random string is a key whatever its prefix. Hex hashes and
    UUIDs (one letter case), paths, numbers and names made of words (ResNet50ImageNetPretrainedV2,
    AutoModelForCausalLM) are not random. Measured on random base62: 6 % of 20-character keys missed, 1.5 % of 40.
    """
    if _RANDOM_CHARS.fullmatch(token) is None or token[0] in "/.~-":
        return False
    if not (any(c.isupper() for c in token) and any(c.islower() for c in token)):
        return False
    if len(_SEPARATORS.findall(token)) * 10 > len(token):
        return False
    counts = Counter(token)
    if -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values()) < 3.5:
        return False
    letters = len(_LETTERS.findall(token))
    vowels = len(_VOWELS.findall(token))
    if vowels * 100 <= letters * 22:
        return True
    in_words = sum(len(w) for w in _WORDS.findall(token) if _SYLLABLE.search(w))
    case_runs = len(_CASE_RUNS.findall(token))
    return vowels * 10 <= letters * 4 and (case_runs * 100 >= letters * 45 or in_words * 2 < letters)
