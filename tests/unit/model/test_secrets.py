"""The secret scrubber against the corpus of planted forms, its negative controls, deep nesting and time."""

from __future__ import annotations

import json
import time

import pytest

from ktrace.model.secrets import (
    MAX_DEPTH,
    REDACTED,
    TOO_DEEP,
    is_secret_key,
    scrub_argv,
    scrub_environment,
    scrub_mapping,
    scrub_strings,
    scrub_text,
)
from ktrace.testing.secrets_corpus import ARGV_FORMS, ENVIRONMENT, KEPT, TEXT_FORMS, Planted, all_secrets


def test_the_corpus_has_at_least_50_distinct_planted_forms() -> None:
    assert len(TEXT_FORMS) + len(ARGV_FORMS) + len(ENVIRONMENT) >= 50
    secrets = all_secrets()
    assert len(set(secrets)) == len(secrets)
    assert not [s for s in secrets for other in secrets if s != other and s in other]
    assert not [s for s in secrets for kept in KEPT if s in kept]


@pytest.mark.parametrize("planted", TEXT_FORMS, ids=[p.form for p in TEXT_FORMS])
def test_every_planted_form_is_redacted(planted: Planted) -> None:
    clean, n = scrub_text(planted.text)
    assert planted.secret not in clean and n >= 1 and REDACTED in clean, clean
    assert scrub_text(clean) == (clean, 0)  # scrubbing again changes nothing, counts nothing


@pytest.mark.parametrize("text", KEPT)
def test_innocent_names_are_kept(text: str) -> None:
    assert scrub_text(text) == (text, 0)


def test_a_secret_flag_value_in_the_next_argv_element_is_redacted_and_other_flags_kept() -> None:
    for argv, secret in ARGV_FORMS:
        planted = [a.format(s=secret) for a in argv]
        clean, n = scrub_argv(planted)
        assert secret not in " ".join(clean) and n == 1, clean
        assert len(clean) == len(planted)
    assert scrub_argv(["python", "serve.py", "--tp", "2", "-p", "8080", "--max-tokens", "2048"])[1] == 0
    assert scrub_argv(["ssh", "-p22", "host"])[0] == ["ssh", "-p22", "host"]  # -p is mysql's only


def test_an_environment_loses_every_secret_value_and_keeps_the_rest() -> None:
    env = {
        **ENVIRONMENT,
        "PATH": "/usr/bin:/bin",
        "TOKENIZERS_PARALLELISM": "false",
        "WANDB_MODE": "offline",
        "NCCL_DEBUG": "INFO",
        "HOT_KEY": "1",
    }
    clean, n = scrub_environment(env)
    assert n == len(ENVIRONMENT)
    assert all(clean[k] == REDACTED for k in ENVIRONMENT)
    assert {k: clean[k] for k in env if k not in ENVIRONMENT} == {k: v for k, v in env.items() if k not in ENVIRONMENT}


def test_structured_metadata_secrets_by_name_number_and_text() -> None:
    secrets = all_secrets()
    doc = {
        "env": dict(ENVIRONMENT),
        "args": [p.text for p in TEXT_FORMS],
        "PMI_SHARED_SECRET": 12345678901234567890,
        "credentials": {"user": "bob", "password": "Pwsecret9"},
        "max_tokens": 2048,
        "api_key_len": 7,
        3: "an int key is kept",
        "nested": ({"Authorization": "Basic QWxhZGRpbjpvcGVu"},),
    }
    clean, n = scrub_mapping(doc)
    text = repr(clean)
    assert not [s for s in secrets if s in text]
    assert "12345678901234567890" not in text and "Pwsecret9" not in text and "QWxhZGRpbjpvcGVu" not in text
    assert clean["max_tokens"] == 2048 and clean["api_key_len"] == 7 and clean[3] == "an int key is kept"
    assert clean["credentials"]["user"] == "bob"
    assert n >= len(secrets) - len(ARGV_FORMS)


def test_scrub_strings_agrees_with_scrub_text_one_by_one() -> None:
    values = [p.text for p in TEXT_FORMS] + list(KEPT)
    changes, n = scrub_strings(values)
    expected = {v: scrub_text(v) for v in values}
    assert changes == {v: c for v, (c, k) in expected.items() if k}
    assert n == sum(k for _, k in expected.values())
    assert scrub_strings(list(KEPT)) == ({}, 0)


@pytest.mark.parametrize("depth", [MAX_DEPTH - 2, 500, 100_000])
def test_deep_nesting_is_walked_without_recursion_and_cut_at_max_depth(depth: int) -> None:
    doc: dict[str, object] = {"password": "Pwdeep1"}
    for _ in range(depth):
        doc = {"metadata": doc, "list": [[["x"]]]}
    clean, n = scrub_mapping(doc)
    assert "Pwdeep1" not in json.dumps(clean)  # json and dataclasses.asdict recurse: they must manage it
    levels = 0
    while isinstance(clean, dict) and "metadata" in clean:
        clean, levels = clean["metadata"], levels + 1
    if depth < MAX_DEPTH:
        assert (levels, clean, n) == (depth, {"password": REDACTED}, 1)
    else:
        assert (levels, clean, n) == (MAX_DEPTH, TOO_DEEP, 0)


@pytest.mark.parametrize(
    "name, secret",
    [
        ("HF_TOKEN", True),
        ("hf_token", True),
        ("DB_PASS", True),
        ("MYSQL_PWD", True),
        ("AccountKey", True),
        ("apiKey", True),
        ("AWS_ACCESS_KEY_ID", True),
        ("--api-key", True),
        ("SENTRY_DSN", True),
        ("sig", True),
        ("OMPI_MCA_orte_precondition_transports", True),
        ("STRIPE_KEY", True),
        ("X-Api-Key", True),
        ("tokenizer", False),
        ("max_tokens", False),
        ("key_padding_mask", False),
        ("author", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("passes", False),
        ("bypass", False),
        ("keyboard", False),
        ("PWD", False),
        ("OLDPWD", False),
        ("TBE_CREDS_ADDR", False),
        ("PASSWORD_FILE", False),
        ("PGPASSWORD", True),
        ("tiktoken", False),
        ("SSH_AUTH_SOCK", True),
    ],
)
def test_names_of_secrets(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret


_MB = 1_000_000


def _repeat(unit: str, size: int = _MB) -> str:
    return (unit * (size // len(unit) + 1))[:size]


ADVERSARIAL = {
    "hex run": _repeat("0123456789abcdef"),
    "one letter": "a" * _MB,
    "identifier run": _repeat("abc_"),
    "a:// repeated": _repeat("a://"),
    "= repeated": "=" * _MB,
    "a= repeated": _repeat("a="),
    "a=b then a key word": _repeat("a=b ") + " key",
    "token= repeated": _repeat("token="),
    "token words in 100-char runs": _repeat("token" * 20 + " "),
    "--password repeated": _repeat("--password "),
    "password: repeated": _repeat("password: "),
    '"password": " repeated': _repeat('"password": "'),
    "eyJ repeated": _repeat("eyJ"),
    "JWT-like segments": _repeat("eyJaaaaaaaaaaaa."),
    "sk- repeated": _repeat("sk-"),
    "PEM headers": _repeat("-----BEGIN PRIVATE KEY-----"),
    "PEM header then letters": "-----BEGIN " + "A" * _MB,
    "Bearer repeated": _repeat("Bearer "),
    "URL then a long user": "x://" + "u" * _MB,
    ": repeated": ":" * _MB,
    ":: repeated": _repeat("a::"),
    "hf_ repeated": _repeat("hf_"),
    "AKIA repeated": _repeat("AKIA"),
    "key= repeated": _repeat("key= "),
    "flag then spaces": "--a" + " " * _MB,
    "user:pw URLs": _repeat("x://a:b"),
    "escaped JSON keys": _repeat('\\"password\\": \\"'),
    "keyword runs": _repeat("key_" * 60 + "x"),
    "pass words =": _repeat("passpasspass="),
    "slack hooks": _repeat("hooks.slack.com/services/"),
    "authorization headers": _repeat("Authorization: Bearer x "),
    "unicode": _repeat("Äpassword=ü "),
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_scrub_time_is_linear_on_1_mb_adversarial_strings(name: str) -> None:
    """A backtracking pattern with overlapping quantifiers takes minutes here (the old URL pattern: 30 s for
    200 KB); every pattern now costs a bounded number of steps a character. CPU time, so a busy machine's other
    processes do not count; the bound is ~5x the slowest case measured on the 2-core dev VM."""
    text = ADVERSARIAL[name]
    start = time.process_time()
    scrub_text(text)
    assert time.process_time() - start < 2.0


def test_a_200_kb_metadata_value_and_a_1_mb_hex_blob_in_a_mapping_are_quick() -> None:
    doc = {"metadata": {"blob": "0x" + _repeat("deadbeef"), "cmd": _repeat("--opt a://b " * 10, 200_000)}}
    start = time.process_time()
    clean, _ = scrub_mapping(doc)
    assert time.process_time() - start < 2.0
    assert clean["metadata"]["blob"] == doc["metadata"]["blob"]
