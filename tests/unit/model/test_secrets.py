"""The secret scrubber against the corpus of planted forms, its negative controls, deep nesting and time."""

from __future__ import annotations

import json
import time

import pytest

from ktrace.model.secret_names import is_secret_value, looks_random
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
from ktrace.testing.secrets_corpus import (
    ARGV_FORMS,
    ARGV_KEPT,
    ENVIRONMENT,
    FAMILIES,
    KEPT,
    TEXT_FORMS,
    Planted,
    all_secrets,
)


def test_the_corpus_has_at_least_150_distinct_planted_forms_and_10_of_each_syntax_family() -> None:
    assert len(TEXT_FORMS) + len(ARGV_FORMS) + len(ENVIRONMENT) >= 150
    assert {family: len(forms) for family, forms in FAMILIES.items() if len(forms) < 10} == {}
    assert len(FAMILIES) >= 13 and len(ARGV_FORMS) >= 10
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
    assert scrub_text(json.dumps([text]))[1] == 0


def test_every_form_written_inside_a_json_string_is_redacted() -> None:
    """A text JSON-encoded into another (Kineto's `Input Dims` list, a JSON value in a JSON string) hides its
    newlines, tabs and quotes behind backslashes: `\\n\\tpassword X`, `{\\"secret\\": ...}`, `["sshpass -p X"]`.
    The scrubber decodes before it looks (the old rules missed 89 of these encodings, 3 of forms they caught plain)."""
    for planted in TEXT_FORMS:
        for encoded in (json.dumps([[8, 3], [planted.text]]), json.dumps({"k": [planted.text]}, separators=(",", ":"))):
            clean, n = scrub_text(encoded)
            assert planted.secret not in clean and n >= 1, (planted.form, clean)


def test_a_secret_flag_value_in_the_next_argv_element_is_redacted_and_other_flags_kept() -> None:
    for argv, secret in ARGV_FORMS:
        planted = [a.format(s=secret) for a in argv]
        clean, n = scrub_argv(planted)
        assert secret not in " ".join(clean) and n == 1, clean
        assert len(clean) == len(planted)


@pytest.mark.parametrize("argv", ARGV_KEPT, ids=[" ".join(a)[:40] for a in ARGV_KEPT])
def test_a_command_line_without_secrets_is_kept(argv: tuple[str, ...]) -> None:
    """Ports (`-p 8080`, `ssh -p 22` after sshpass), `mysql -p` alone (it prompts), paths, hashes, model names."""
    assert scrub_argv(argv) == (list(argv), 0)


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
        ("PWD", True),
        ("OLDPWD", True),
        ("token_budget", False),
        ("key_size", False),
        ("PassWord", True),
        ("dbpassword", True),
        ("JSESSIONID", True),
        ("session_token", True),
        ("Access-Key", True),
        ("privateKey", True),
        ("credential", True),
        ("auth", True),
        ("cookie", True),
        ("TBE_CREDS_ADDR", False),
        ("PASSWORD_FILE", False),
        ("PGPASSWORD", True),
        ("tiktoken", False),
        ("SSH_AUTH_SOCK", True),
    ],
)
def test_names_of_secrets(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret


def test_the_shells_working_directory_is_kept_and_an_odbc_pwd_is_not() -> None:
    assert not is_secret_value("PWD", "/home/u/work") and not is_secret_value("OLDPWD", "~/src")
    assert not is_secret_value("pwd", "C:\\Users\\u")
    assert is_secret_value("PWD", "hunter2x") and is_secret_value("pwd", "{p;w}")
    assert scrub_environment({"PWD": "/home/u", "OLDPWD": "/tmp"}) == ({"PWD": "/home/u", "OLDPWD": "/tmp"}, 0)


ISSUE_FORMS = (
    "ODBC PWD=...;",
    "ODBC pwd= (lower case, last)",
    "netrc one line",
    "sshpass -p VALUE",
    "curl -u user:pass",
    "XML <password>",
    "URL-encoded password%3D",
    "JSON key written with \\u escapes",
    "Vault hvs.",
    "Stripe whsec_",
    "Telegram bot token",
    "Azure AD client secret 8Q~",
    "age secret key",
    "Shopify shpat_",
    "Atlassian ATATT3x",
    "DigitalOcean dop_v1_",
    "Grafana glsa_",
    "Groq gsk_",
    "LangSmith lsv2_pt_",
    "Mailgun key-",
    "Perplexity pplx-",
)


def test_every_form_the_issue_found_surviving_is_in_the_corpus() -> None:
    """Issue 27: these forms were kept verbatim by the old rules (the parametrized test above fails on them)."""
    assert [f for f in ISSUE_FORMS if f not in {p.form for p in TEXT_FORMS}] == []


def test_long_random_arguments_are_redacted_and_names_made_of_words_are_not() -> None:
    import random

    rng = random.Random(7)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    keys = ["".join(rng.choice(alphabet) for _ in range(40)) for _ in range(500)]
    assert sum(map(looks_random, keys)) >= 480  # measured 98.5 %: a heuristic, not a promise
    names = [
        "ResNet50ImageNetPretrainedV2",
        "AutoModelForCausalLM",
        "BertForSequenceClassification",
        "HuggingFaceH4/zephyr-7b-beta",
        "MyExperimentRun2024Final",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "XLMRobertaForTokenClassification",
        "3f786850e387550fdab836ed7e6dc881de23001b",
        "GPU-5a3c2b1e-8d7f-4e6a-9b0c-1d2e3f4a5b6c",
        "/data/ckpt/Zx8Qw2Lk9Pm4Rt7Yv3Bn6Hj1",
    ]
    assert [n for n in names if looks_random(n)] == []
    key = keys[0] if looks_random(keys[0]) else keys[1]
    assert scrub_argv(["python", "job.py", key, f"--seed-material={key}", f"NAME={key}"]) == (
        ["python", "job.py", REDACTED, f"--seed-material={REDACTED}", f"NAME={REDACTED}"],
        3,
    )


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
    "curl -u repeated": _repeat("curl -u "),
    "sshpass -p repeated": _repeat("sshpass -p "),
    "tool words only": _repeat("mysql redis-cli login docker "),
    "<password> repeated": _repeat("<password>"),
    "<password> then text without <": "<password>" + "a" * _MB,
    "<token with long attributes": _repeat("<token " + "a" * 300),
    "%3D repeated": _repeat("password%3D"),
    "percent escapes": _repeat("%41"),
    "\\u escapes": _repeat("\\u0070"),
    "&quot; repeated": _repeat("&quot;password&quot;: "),
    "password then a word": _repeat("password reset "),
    "netrc words": _repeat("machine login password "),
    "Cookie: with quotes": _repeat('Cookie: "a'),
    'Authorization: " then letters': 'Authorization: "' + "a" * _MB,
    "Q~ runs": _repeat("abc8Q~"),
    "digits then :A": _repeat("12345678:A"),
    "key- runs": _repeat("key-0123456789abcdef"),
    "hvs. runs": _repeat("hvs."),
    "PEM BEGIN any label": _repeat("-----BEGIN X-----"),
    "ODBC braces": _repeat("pwd={"),
    "XML tags closed": _repeat("<password>a</"),
    "XML value without its close": "<password>" + "a" * _MB + "</",
    "XML attributes then a close": _repeat("<token " + "a" * 300 + ">b</"),
    "%25 repeated": _repeat("%25"),
    "backslashes": "\\" * _MB,
    "JSON escapes": _repeat('\\"\\n\\t'),
    "=> and :=": _repeat("password=>:="),
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


def test_a_1_mb_argument_is_quick() -> None:
    start = time.process_time()
    scrub_argv(["curl", "-u", "a:" + "b" * _MB, "A1b2" * (_MB // 4), "--x=" + "Zq9" * (_MB // 3)])
    assert time.process_time() - start < 2.0


def test_a_200_kb_metadata_value_and_a_1_mb_hex_blob_in_a_mapping_are_quick() -> None:
    doc = {"metadata": {"blob": "0x" + _repeat("deadbeef"), "cmd": _repeat("--opt a://b " * 10, 200_000)}}
    start = time.process_time()
    clean, _ = scrub_mapping(doc)
    assert time.process_time() - start < 2.0
    assert clean["metadata"]["blob"] == doc["metadata"]["blob"]


def test_every_vendor_form_is_caught_by_a_named_vendor_format() -> None:
    """Each planted vendor token is found by a format of ktrace.model.secret_formats (not only by a name before
    it), and every format names its source: a gitleaks rule, or the vendor's documentation."""
    import re

    from ktrace.model.secret_formats import TOKEN_FORMATS
    from ktrace.testing.secrets_corpus_tokens import VENDOR_FORMS

    assert len(TOKEN_FORMATS) >= 80
    assert [f.source for f in TOKEN_FORMATS if not f.source.startswith(("gitleaks:", "vendor:"))] == []
    patterns = [re.compile(f.pattern) for f in TOKEN_FORMATS]
    for planted in VENDOR_FORMS:
        spans = [m.span("s" if "s" in m.re.groupindex else 0) for p in patterns for m in p.finditer(planted.text)]
        start = planted.text.index(planted.secret)
        assert any(a <= start and start + len(planted.secret) <= b for a, b in spans), planted.form
