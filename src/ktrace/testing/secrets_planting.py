"""How the secret corpus makes its planted secrets: seeded random texts (no literal token sits in the repository
for a secret scanner to trip on), and `Planted`, a secret as it appears in a text."""

from __future__ import annotations

import random
from dataclasses import dataclass

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
HEX = "0123456789abcdef"
DIGITS = "0123456789"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"
_rng = random.Random(20)


def random_text(n: int, alphabet: str = ALNUM) -> str:
    """`n` characters of `alphabet`, from the corpus' seeded generator."""
    return "".join(_rng.choice(alphabet) for _ in range(n))


def password() -> str:
    """A password: short, plain, and not token-shaped (only its name or position says it is a secret)."""
    return "Pw" + random_text(9) + "4q"


@dataclass(frozen=True)
class Planted:
    """A secret as it appears in a trace string, and the part of it that must appear in no output."""

    form: str
    text: str
    secret: str
    family: str = ""


def plant(form: str, template: str, secret: str) -> Planted:
    """`secret` planted in `template` at `{s}`."""
    return Planted(form, template.format(s=secret), secret)


def family(name: str, *forms: Planted) -> tuple[Planted, ...]:
    """`forms`, marked as the syntax family `name`."""
    return tuple(Planted(p.form, p.text, p.secret, name) for p in forms)
