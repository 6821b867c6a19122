"""The secret corpus' token forms: PEM blocks and vendor token formats (ktrace.model.secret_formats), planted."""

from __future__ import annotations

import base64

from ktrace.testing.secrets_planting import ALNUM, B64, DIGITS, HEX, URLSAFE, family, plant, random_text

_JWT = (
    "eyJhbGciOiJIUzI1NiJ9."
    + base64.urlsafe_b64encode(b'{"sub":"' + random_text(12).encode() + b'"}').decode().rstrip("=")
    + "."
    + random_text(43, URLSAFE)
)
_AGE = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"

PEM_FORMS = family(
    "pem",
    plant(
        "PEM RSA", "-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----", "MIIEv" + random_text(60, B64)
    ),
    plant("PEM key without END (cut short)", "key: -----BEGIN OPENSSH PRIVATE KEY-----\n{s}", random_text(70, B64)),
    plant("PEM EC", "-----BEGIN EC PRIVATE KEY-----\n{s}\n-----END EC PRIVATE KEY-----", random_text(64, B64)),
    plant("PEM PKCS#8", "-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----", random_text(64, B64)),
    plant(
        "PEM encrypted",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\n{s}\n-----END ENCRYPTED PRIVATE KEY-----",
        random_text(64, B64),
    ),
    plant(
        "PGP private key block",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{s}\n-----END PGP PRIVATE KEY BLOCK-----",
        random_text(64, B64),
    ),
    plant("PEM DSA", "-----BEGIN DSA PRIVATE KEY-----\n{s}\n-----END DSA PRIVATE KEY-----", random_text(64, B64)),
    plant(
        "PEM with escaped newlines",
        "-----BEGIN PRIVATE KEY-----\\n{s}\\n-----END PRIVATE KEY-----\\n",
        random_text(64, B64),
    ),
    plant("PEM on one line", "-----BEGIN RSA PRIVATE KEY----- {s} -----END RSA PRIVATE KEY-----", random_text(64, B64)),
    plant(
        "OpenSSH key with END",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{s}\n-----END OPENSSH PRIVATE KEY-----",
        random_text(70, B64),
    ),
    plant(
        "PEM body with '-' inside",
        "-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----",
        random_text(30, B64) + "-" + random_text(30, B64),
    ),
)
"""PEM blocks: the body goes, the BEGIN/END lines stay."""

VENDOR_FORMS = family(
    "vendor token",
    plant("Hugging Face", "login {s}", "hf_" + random_text(34)),
    plant("GitHub classic", "{s}", "ghp_" + random_text(36)),
    plant("GitHub fine-grained", "GH={s}", "github_pat_" + random_text(22) + "_" + random_text(59)),
    plant("GitLab glpat-", "glab auth {s}", "glpat-" + random_text(20, URLSAFE)),
    plant("OpenAI sk-", "client(key {s})", "sk-" + random_text(48)),
    plant("OpenAI sk-proj-", "{s}", "sk-proj-" + random_text(64, URLSAFE)),
    plant("Anthropic sk-ant-", "{s}", "sk-ant-api03-" + random_text(93, URLSAFE) + "AA"),
    plant(
        "Slack bot xoxb-",
        "{s}",
        "xoxb-" + random_text(11, DIGITS) + "-" + random_text(13, DIGITS) + "-" + random_text(24),
    ),
    plant("Slack user xoxp-", "{s}", "xoxp-" + random_text(11, DIGITS) + "-" + random_text(32, HEX)),
    plant("Stripe sk_live_", "{s}", "sk_" + "live_" + random_text(24)),
    plant("Stripe rk_live_", "{s}", "rk_" + "live_" + random_text(24)),
    plant("Stripe whsec_", "webhook secret {s}", "whsec_" + random_text(32)),
    plant("Twilio SK", "twilio {s}", "SK" + random_text(32, HEX)),
    plant("SendGrid SG.", "{s}", "SG." + random_text(22, URLSAFE) + "." + random_text(43, URLSAFE)),
    plant("npm token", "//registry.npmjs.org/:_authToken={s}", "npm_" + random_text(36)),
    plant("PyPI token", "{s}", "pypi-AgEIcHlwaS5vcmc" + random_text(60, URLSAFE)),
    plant("AWS access key id", "aws {s}", "AKIA" + random_text(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")),
    plant("Google API key", "{s}", "AIza" + random_text(35, URLSAFE)),
    plant("Google OAuth ya29.", "{s}", "ya29." + random_text(60, URLSAFE)),
    plant("Databricks dapi", "{s}", "dapi" + random_text(32, HEX)),
    plant("JWT", "session {s}", _JWT),
    plant(
        "Slack webhook",
        "https://hooks.slack.com/services/{s}",
        "T" + random_text(8) + "/B" + random_text(8) + "/" + random_text(24),
    ),
    plant(
        "Discord webhook",
        "https://discord.com/api/webhooks/{s}",
        random_text(18, DIGITS) + "/" + random_text(68, URLSAFE),
    ),
    plant("Vault hvs.", "VAULT {s}", "hvs." + random_text(24) + random_text(70, URLSAFE)),
    plant(
        "Telegram bot token",
        "https://api.telegram.org/bot{s}/sendMessage",
        random_text(10, DIGITS) + ":AA" + random_text(33, URLSAFE),
    ),
    plant("Azure AD client secret 8Q~", "az login --sp {s}", random_text(3) + "8Q~" + random_text(34, ALNUM + "_~.-")),
    plant("age secret key", "{s}", "AGE-SECRET-KEY-1" + random_text(58, _AGE)),
    plant("Shopify shpat_", "shop {s}", "shpat_" + random_text(32, HEX)),
    plant("Atlassian ATATT3x", "jira {s}", "ATATT3x" + random_text(180, URLSAFE + "=")),
    plant("DigitalOcean dop_v1_", "doctl {s}", "dop_v1_" + random_text(64, HEX)),
    plant("Grafana glsa_", "grafana {s}", "glsa_" + random_text(32) + "_" + random_text(8, HEX)),
    plant("Groq gsk_", "groq {s}", "gsk_" + random_text(52)),
    plant("LangSmith lsv2_pt_", "trace {s}", "lsv2_pt_" + random_text(32, HEX) + "_" + random_text(10, HEX)),
    plant("Mailgun key-", "mg {s}", "key-" + random_text(32, HEX)),
    plant("Perplexity pplx-", "pplx {s}", "pplx-" + random_text(48)),
    plant("NVIDIA nvapi-", "ngc {s}", "nvapi-" + random_text(64, URLSAFE)),
    plant("Docker Hub dckr_pat_", "{s}", "dckr_pat_" + random_text(27, URLSAFE)),
    plant("Replicate r8_", "{s}", "r8_" + random_text(37)),
    plant("GitLab runner glrt-", "{s}", "glrt-" + random_text(20, URLSAFE)),
    plant("Grafana cloud glc_", "{s}", "glc_" + random_text(40, B64)),
    plant("Notion ntn_", "{s}", "ntn_" + random_text(11, DIGITS) + random_text(35)),
    plant("Linear lin_api_", "{s}", "lin_api_" + random_text(40)),
    plant("Postman PMAK-", "{s}", "PMAK-" + random_text(24, HEX) + "-" + random_text(34, HEX)),
    plant("Pulumi pul-", "{s}", "pul-" + random_text(40, HEX)),
    plant("Prefect pnu_", "{s}", "pnu_" + random_text(36)),
    plant("Doppler dp.pt.", "{s}", "dp.pt." + random_text(43)),
    plant("PlanetScale pscale_tkn_", "{s}", "pscale_tkn_" + random_text(43)),
    plant("Sentry sntryu_", "{s}", "sntryu_" + random_text(64, HEX)),
    plant("1Password ops_eyJ", "{s}", "ops_eyJ" + random_text(250, B64)),
    plant("Alibaba LTAI", "{s}", "LTAI" + random_text(20)),
    plant("Heroku HRKU-AA", "{s}", "HRKU-AA" + random_text(58, URLSAFE)),
    plant("Dynatrace dt0c01.", "{s}", "dt0c01." + random_text(24) + "." + random_text(64)),
    plant("Square EAAA", "{s}", "EAAA" + random_text(60, URLSAFE)),
    plant("Tailscale tskey-auth-", "{s}", "tskey-auth-" + random_text(12) + "-" + random_text(30)),
    plant("xAI xai-", "{s}", "xai-" + random_text(80)),
    plant("RubyGems rubygems_", "{s}", "rubygems_" + random_text(48, HEX)),
)
"""Vendor token formats, anywhere in a string (ktrace.model.secret_formats)."""
