"""Passwords that a command line gives by position: the options of the tools that take one (`sshpass -p X`,
`mysql -pX`, `curl -u user:X`, `redis-cli -a X`, `smbclient -U user%X`, `docker login -p X`), for
ktrace.model.secrets, over an argv or over a command line joined into one string.

A tool's options apply from its name to the next `|`, `&&`, `||` or `;`; sshpass's end at the command it runs
(`sshpass -p X ssh -p 22 host` keeps ssh's port). `mysql -p` alone prompts, so only `-pX` is a password there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, NamedTuple

Kind = Literal["value", "attached", "userinfo", "smb", "passarg"]
"""What of an option's value is the secret: all of it; all of it, only when written onto the flag (`-pX`); what
follows the first `:` (`user:pass`); what follows the first `%` (`user%pass`); what follows `pass:` (openssl)."""


class Tool(NamedTuple):
    """The options of one tool (or family) that give a password."""

    options: tuple[tuple[str, Kind], ...]
    ends_at_command: bool = False
    """True when the tool runs a command given after its options (sshpass): that command's options are its own."""


_MONGO = Tool((("-p", "value"), ("--password", "value")))
_CURL = Tool((("-u", "userinfo"), ("--user", "userinfo"), ("-U", "userinfo"), ("--proxy-user", "userinfo")))
_MYSQL = Tool((("-p", "attached"),))
_LOGIN = Tool((("-p", "value"),))
TOOLS: dict[str, Tool] = {
    "sshpass": Tool((("-p", "value"),), ends_at_command=True),
    **dict.fromkeys(
        ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mariadb", "mariadb-dump"), _MYSQL
    ),
    "redis-cli": Tool((("-a", "value"),)),
    **dict.fromkeys(("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport"), _MONGO),
    **dict.fromkeys(("curl", "wget"), _CURL),
    **dict.fromkeys(("smbclient", "rpcclient"), Tool((("-U", "smb"), ("--user", "smb")))),
    "ipmitool": Tool((("-P", "value"),)),
    **dict.fromkeys(("sqlcmd", "bcp"), Tool((("-P", "value"),))),
    "openssl": Tool((("-passin", "passarg"), ("-passout", "passarg"), ("-pass", "passarg"), ("-k", "value"))),
}
"""Tools by program name (lower case, without a directory or `.exe`)."""
_LOGIN_AFTER = frozenset({"docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras"})
"""`docker login -p X`: `login` after these is a tool of its own (`docker run -p 80:80` is a port)."""
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&"})
NAMES = (*TOOLS, "login")
"""Strings one of which a (case-folded) text must hold for a tool's options to be looked for."""
_WORD = re.compile(r"[^\s\"'\[\](){}]+")
"""A word of a command line joined into one string: quotes and brackets (a JSON list of its words) end it."""


def _program(token: str) -> str:
    name = token.rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower()
    return name[:-4] if name.endswith(".exe") else name


def _value_span(kind: Kind, value: str) -> tuple[int, int] | None:
    """The secret's span within an option's value (quotes around it excluded), or None if it holds none."""
    start, end = 0, len(value)
    while start < end and value[start] in "\"'":
        start += 1
    while end > start and value[end - 1] in "\"'":
        end -= 1
    if kind == "userinfo" or kind == "smb":
        cut = value.find(":" if kind == "userinfo" else "%", start, end)
        start = -1 if cut < 0 else cut + 1
    elif kind == "passarg":
        start = start + 5 if value.startswith("pass:", start) else -1
    return (start, end) if 0 <= start < end else None


def _attached(flag: str, kind: Kind, token: str) -> tuple[int, int] | None:
    """The secret in `token` when it is `flag` with its value written onto it (`-pX`, `--user=u:X`)."""
    if len(flag) == 2 and token.startswith(flag) and len(token) > 2 and token[2] != "-":
        offset = 3 if token[2] == "=" else 2
    elif token.startswith(flag + "="):
        offset = len(flag) + 1
    else:
        return None
    span = _value_span("value" if kind == "attached" else kind, token[offset:])
    return None if span is None else (span[0] + offset, span[1] + offset)


def _option(tool: Tool, token: str) -> tuple[Kind | None, tuple[int, int] | None]:
    """For an option `token` of `tool`: the kind of secret its next token is, or the secret's span in it."""
    for flag, kind in tool.options:
        if token == flag and kind != "attached":
            return kind, None
        span = _attached(flag, kind, token)
        if span is not None:
            return None, span
    return None, None


def option_secrets(tokens: Sequence[str]) -> list[tuple[int, int, int]]:
    """(index of the token, start, end within it) of each password that a tool's option gives in `tokens`
    (an argv, or the words of a command line)."""
    found: list[tuple[int, int, int]] = []
    tool: Tool | None = None
    pending: Kind | None = None
    previous = ""
    for i, token in enumerate(tokens):
        if pending is not None:
            span = _value_span(pending, token)
            pending = None
        else:
            program = _program(token.strip("\"'[](){},;"))
            span = None
            if token in _SEPARATORS:
                tool = None
            elif program in TOOLS or (program == "login" and previous in _LOGIN_AFTER):
                tool = TOOLS.get(program, _LOGIN)
            elif tool is not None and token.startswith("-"):
                pending, span = _option(tool, token)
            elif tool is not None and tool.ends_at_command:
                tool = None
            previous = program
        if span is not None:
            found.append((i, *span))
    return found


def text_option_secrets(text: str) -> list[tuple[int, int]]:
    """(start, end) in `text`, a command line joined into one string, of each password a tool's option gives."""
    words = list(_WORD.finditer(text))
    spans = option_secrets([w[0] for w in words])
    return [(words[i].start() + start, words[i].start() + end) for i, start, end in spans]
