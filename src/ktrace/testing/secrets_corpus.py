"""The secret corpus: every planted form the scrubber must catch, and names it must leave alone.

Each secret is made here from a seeded generator (no literal token sits in the repository for a secret scanner
to trip on), each is distinct, and none is a substring of another or of any innocent text, so a test can look
for each in every byte of every output.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"
_rng = random.Random(20)


def _r(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _pw() -> str:
    """A password: short, plain, and not token-shaped (only its name or position says it is a secret)."""
    return "Pw" + _r(9) + "q"


@dataclass(frozen=True)
class Planted:
    """A secret as it appears in a trace string, and the part of it that must appear in no output."""

    form: str
    text: str
    secret: str


def _plant(form: str, template: str, secret: str) -> Planted:
    return Planted(form, template.format(s=secret), secret)


_JWT = (
    "eyJhbGciOiJIUzI1NiJ9."
    + base64.urlsafe_b64encode(b'{"sub":"' + _r(12).encode() + b'"}').decode().rstrip("=")
    + "."
    + _r(43, _ALNUM + "-_")
)
_PEM_BODY = "MIIEv" + _r(60, _ALNUM + "+/")
_SENTRY_KEY = _r(32, _HEX)
_BASIC = base64.b64encode(b"admin:" + _pw().encode()).decode()

TEXT_FORMS: tuple[Planted, ...] = (
    # a secret named on the command line (the issue: the old pattern needed a prefix before the keyword)
    _plant("--password=", "python train.py --password={s} --epochs 3", _pw()),
    _plant("--password VALUE (joined)", "python train.py --password {s} --tp 2", _pw()),
    _plant("--api-key=", "serve --api-key={s}", _r(24)),
    _plant("--token=", "launch --token={s}", _r(24)),
    _plant("--db-password=", "etl --db-password={s}", _pw()),
    _plant("password=", "password={s}", _pw()),
    _plant("-e NAME=value", "docker run -e MY_SERVICE_TOKEN={s} image", _r(30)),
    _plant("x=password=", "opts=password={s}", _pw()),
    _plant("tokenizer=password:", "tokenizer=password:{s}", _pw()),
    _plant("mysql -pPASSWORD (joined)", "mysql -u root -h db -p{s} prod < dump.sql", _pw()),
    # environment variables, as `NAME=value` text
    _plant("DB_PASS", "DB_PASS={s}", _pw()),
    _plant("MYSQL_PWD", "MYSQL_PWD={s}", _pw()),
    _plant("PGPASSWORD", "export PGPASSWORD={s}", _pw()),
    _plant("HF_TOKEN (not hf_-shaped)", "HF_TOKEN={s}", _r(20)),
    _plant("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY={s}", _r(40, _ALNUM + "/+")),
    _plant("DD_API_KEY (Datadog)", "DD_API_KEY={s}", _r(32, _HEX)),
    _plant("WANDB_API_KEY (W&B)", "WANDB_API_KEY={s}", _r(40, _HEX)),
    _plant("PMI_SHARED_SECRET", "PMI_SHARED_SECRET={s}", _r(20, "0123456789")),
    _plant("SLURM_JWT", "SLURM_JWT={s}", _r(48, _ALNUM + "._-")),
    _plant("OMPI PSM key", "OMPI_MCA_orte_precondition_transports={s}", _r(16, _HEX) + "-" + _r(16, _HEX)),
    _plant("NCCL/SLURM job credential", "SLURM_CRED={s}", _r(24)),
    _plant("client_secret", "client_secret={s}", _r(34, _ALNUM + "~_.-")),
    _plant("quoted value with a space", "PASSWORD='{s}'", "correct horse " + _r(6)),
    # JSON and YAML in free text
    _plant('JSON "password"', '{{"user": "bob", "password": "{s}"}}', _pw()),
    _plant('JSON "api_key"', '{{"api_key" : "{s}", "n": 3}}', _r(32)),
    _plant("JSON escaped inside a string", '{{\\"secret\\": \\"{s}\\"}}', _pw()),
    _plant("YAML password:", "db:\n  password: {s}\n", _pw()),
    _plant("YAML quoted token", 'ACCESS_TOKEN: "{s}"', _r(28)),
    # HTTP headers
    _plant("Authorization: Bearer", "curl -H 'Authorization: Bearer {s}' https://api.example.com", _r(40)),
    _plant("Authorization: Basic", "Authorization: Basic {s}", _BASIC),
    _plant("Authorization: token", "Authorization: token {s}", _r(40, _HEX)),
    _plant("bare Bearer", "retry with Bearer {s} after 401", _r(36)),
    _plant("X-Api-Key header", "X-Api-Key: {s}", _r(32)),
    _plant("Cookie header", "Cookie: session={s}", _r(32)),
    # connection strings and URLs
    _plant(
        "Azure AccountKey",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net",
        _r(86, _ALNUM + "+/") + "==",
    ),
    _plant(
        "Azure SAS sig=",
        "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2030-01-01&sig={s}",
        _r(43, _ALNUM + "%"),
    ),
    _plant("Sentry DSN", "https://{s}@o123456.ingest.sentry.io/7654321", _SENTRY_KEY),
    _plant("SENTRY_DSN=", "SENTRY_DSN=https://{s}@o1.ingest.us.sentry.io/2", _r(32, _HEX)),
    _plant("basic-auth URL", "https://alice:{s}@registry.example.com/v2/", _pw()),
    _plant("postgres://user:pw@", "postgres://app:{s}@db.internal:5432/prod", _pw()),
    _plant("redis://:pw@", "redis://:{s}@cache:6379/0", _pw()),
    _plant("mongodb+srv://", "mongodb+srv://svc:{s}@cluster0.abcde.mongodb.net/test", _pw()),
    _plant("token as URL user", "git clone https://{s}@github.com/org/repo.git", "ghp_" + _r(36)),
    _plant("Slack webhook", "https://hooks.slack.com/services/{s}", "T" + _r(8) + "/B" + _r(8) + "/" + _r(24)),
    _plant(
        "Discord webhook", "https://discord.com/api/webhooks/{s}", _r(18, "0123456789") + "/" + _r(68, _ALNUM + "_-")
    ),
    # vendor token formats, anywhere in a string
    _plant("Hugging Face", "login {s}", "hf_" + _r(34)),
    _plant("GitHub classic", "{s}", "ghp_" + _r(36)),
    _plant("GitHub fine-grained", "GH={s}", "github_pat_" + _r(22) + "_" + _r(59)),
    _plant("GitLab glpat-", "glab auth {s}", "glpat-" + _r(20, _ALNUM + "_-")),
    _plant("OpenAI sk-", "client(key {s})", "sk-" + _r(48)),
    _plant("OpenAI sk-proj-", "{s}", "sk-proj-" + _r(64, _ALNUM + "_-")),
    _plant("Anthropic sk-ant-", "{s}", "sk-ant-api03-" + _r(93, _ALNUM + "_-") + "AA"),
    _plant("Slack bot xoxb-", "{s}", "xoxb-" + _r(11, "0123456789") + "-" + _r(13, "0123456789") + "-" + _r(24)),
    _plant("Slack user xoxp-", "{s}", "xoxp-" + _r(11, "0123456789") + "-" + _r(32, _HEX)),
    _plant("Stripe sk_live_", "{s}", "sk_" + "live_" + _r(24)),
    _plant("Stripe rk_live_", "{s}", "rk_" + "live_" + _r(24)),
    _plant("Twilio SK", "twilio {s}", "SK" + _r(32, _HEX)),
    _plant("SendGrid SG.", "{s}", "SG." + _r(22, _ALNUM + "_-") + "." + _r(43, _ALNUM + "_-")),
    _plant("npm token", "//registry.npmjs.org/:_authToken={s}", "npm_" + _r(36)),
    _plant("PyPI token", "{s}", "pypi-AgEIcHlwaS5vcmc" + _r(60, _ALNUM + "_-")),
    _plant("AWS access key id", "aws {s}", "AKIA" + _r(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")),
    _plant("Google API key", "{s}", "AIza" + _r(35, _ALNUM + "_-")),
    _plant("Google OAuth ya29.", "{s}", "ya29." + _r(60, _ALNUM + "_-")),
    _plant("Databricks dapi", "{s}", "dapi" + _r(32, _HEX)),
    _plant("JWT", "session {s}", _JWT),
    _plant("PEM private key", "-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----", _PEM_BODY),
    _plant(
        "GCP service-account JSON private_key",
        '{{"type": "service_account", "private_key_id": "{s}", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + _r(64, _ALNUM + "+/")
        + '\\n-----END PRIVATE KEY-----\\n"}}',
        _r(40, _HEX),
    ),
    _plant("PEM key without END (cut short)", "key: -----BEGIN OPENSSH PRIVATE KEY-----\n{s}", _r(70, _ALNUM + "+/")),
)
"""Secrets in free text: metadata values, NVTX/annotation names, kernel names, command lines, notes."""

ARGV_FORMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("python", "-c", "pass", "--password", "{s}"), _pw()),
    (("python", "train.py", "--api-key", "{s}", "--tp", "2"), _r(24)),
    (("python", "train.py", "--token={s}"), _r(24)),
    (("mysql", "-uroot", "-p{s}", "prod"), _pw()),
)
"""A command line as argv: a secret flag's value may be the next element."""

ENVIRONMENT: dict[str, str] = {
    "HF_TOKEN": "hf_" + _r(34),
    "DB_PASS": _pw(),
    "MYSQL_PWD": _pw(),
    "PMI_SHARED_SECRET": _r(20, "0123456789"),
    "WANDB_API_KEY": _r(40, _HEX),
    "DD_API_KEY": _r(32, _HEX),
    "AZURE_STORAGE_KEY": _r(86, _ALNUM + "+/") + "==",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T" + _r(8) + "/B" + _r(8) + "/" + _r(24),
    "SENTRY_DSN": "https://" + _r(32, _HEX) + "@o9.ingest.sentry.io/9",
    "GITLAB_TOKEN": "glpat-" + _r(20),
    "NPM_TOKEN": "npm_" + _r(36),
    "SLURM_JWT": _r(40),
}
"""An environment as a mapping (Kineto metadata, nsys TARGET_INFO_SYSTEM_ENV): every value must go."""

KEPT: tuple[str, ...] = (
    "ampere_sgemm_128x64_tn",
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, float, char*)",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(key_padding_mask)",
    "KeyValueCache::update",
    "tokenizer",
    "tokenizer=gpt2",
    "max_tokens=2048",
    "--max-new-tokens 128",
    "python serve.py --tp 2 --pp 1",
    "TOKENIZERS_PARALLELISM=false",
    "NVTX_OPTIONS:TRACE_NVTX_RANGE_HOT_KEY=false",
    "USE_AUTH_EPHEM=1",
    "KINETO_USE_DAEMON=1",
    "tiktoken=0.5.1",
    "asttokens==2.4.1",
    "passes=3",
    "bypass_cache=true",
    "/home/user/.cache/huggingface/hub/models--google--owlv2",
    "https://github.com/pytorch/pytorch",
    "ssh://git@github.com/org/repo.git",
    "0x7f3a2b1c00",
    "3f786850e387550fdab836ed7e6dc881de23001b",
    "GPU-5a3c2b1e-8d7f-4e6a-9b0c-1d2e3f4a5b6c",
    "ProfilerStep#3",
    "nccl:all_reduce",
    "aten::scaled_dot_product_attention",
    "cudaLaunchKernel",
    "Memcpy HtoD (Pageable -> Device)",
    "author=someone",
    "sk-learn",
    "key",
    "Bearer",
    "Bearer token auth",
    "sort_key_kernel<128>",
    "cub::DeviceRadixSortPass<true>",
    "sig_handler",
    "mysql -u root -p mydb",
    "ssh -p22 host",
    "torchrun --nproc-per-node 8 -p 29500 train.py",
)
"""Names and settings that look a little like secrets and must come out unchanged. Hex pointers and hashes in
kernel names are kept: a long hex run is not redacted on its own look (see ktrace.model.secrets)."""


def all_secrets() -> list[str]:
    """Every planted value, for the byte-level checks of outputs."""
    return [p.secret for p in TEXT_FORMS] + [s for _, s in ARGV_FORMS] + list(ENVIRONMENT.values())
