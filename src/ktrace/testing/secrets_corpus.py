"""The secret corpus: every planted form the scrubber must catch, by syntax family, and names it must leave alone.

Each secret is made here from a seeded generator (no literal token sits in the repository for a secret scanner
to trip on), each is distinct, and none is a substring of another or of any innocent text, so a test can look
for each in every byte of every output. FAMILIES groups the text forms by the syntax that carries the secret
(at least 10 of each); ARGV_FORMS are command lines as argv; KEPT and ARGV_KEPT must come out unchanged.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"
_DIGITS = "0123456789"
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "_-"
_rng = random.Random(20)


def _r(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _pw() -> str:
    """A password: short, plain, and not token-shaped (only its name or position says it is a secret)."""
    return "Pw" + _r(9) + "4q"


@dataclass(frozen=True)
class Planted:
    """A secret as it appears in a trace string, and the part of it that must appear in no output."""

    form: str
    text: str
    secret: str
    family: str = ""


def _plant(form: str, template: str, secret: str) -> Planted:
    return Planted(form, template.format(s=secret), secret)


def _family(name: str, *forms: Planted) -> tuple[Planted, ...]:
    return tuple(Planted(p.form, p.text, p.secret, name) for p in forms)


_JWT = (
    "eyJhbGciOiJIUzI1NiJ9."
    + base64.urlsafe_b64encode(b'{"sub":"' + _r(12).encode() + b'"}').decode().rstrip("=")
    + "."
    + _r(43, _URLSAFE)
)
_BASIC = base64.b64encode(b"admin:" + _pw().encode()).decode()
_AGE = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"

ASSIGNMENTS = _family(
    "k=v",
    _plant("password=", "password={s}", _pw()),
    _plant("-e NAME=value", "docker run -e MY_SERVICE_TOKEN={s} image", _r(30)),
    _plant("x=password=", "opts=password={s}", _pw()),
    _plant("tokenizer=password:", "tokenizer=password:{s}", _pw()),
    _plant("DB_PASS", "DB_PASS={s}", _pw()),
    _plant("MYSQL_PWD", "MYSQL_PWD={s}", _pw()),
    _plant("PGPASSWORD", "export PGPASSWORD={s}", _pw()),
    _plant("HF_TOKEN (not hf_-shaped)", "HF_TOKEN={s}", _r(20)),
    _plant("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY={s}", _r(40, _B64)),
    _plant("DD_API_KEY (Datadog)", "DD_API_KEY={s}", _r(32, _HEX)),
    _plant("WANDB_API_KEY (W&B)", "WANDB_API_KEY={s}", _r(40, _HEX)),
    _plant("PMI_SHARED_SECRET", "PMI_SHARED_SECRET={s}", _r(20, _DIGITS)),
    _plant("SLURM_JWT", "SLURM_JWT={s}", _r(48, _ALNUM + "._-")),
    _plant("OMPI PSM key", "OMPI_MCA_orte_precondition_transports={s}", _r(16, _HEX) + "-" + _r(16, _HEX)),
    _plant("NCCL/SLURM job credential", "SLURM_CRED={s}", _r(24)),
    _plant("client_secret", "client_secret={s}", _r(34, _ALNUM + "~_.-")),
    _plant("quoted value with a space", "PASSWORD='{s}'", "correct horse " + _r(6)),
    _plant("mixed-case PassWord=", "PassWord={s}", _pw()),
    _plant("lower-case dbpassword=", "dbpassword={s}", _pw()),
    _plant("JSESSIONID=", "JSESSIONID={s}", _r(32, _HEX.upper())),
    _plant("session_token=", "session_token={s}", _r(28)),
    _plant("private_key=", "private_key={s}", _r(44, _B64)),
    _plant("Access-Key=", "Access-Key={s}", _r(26)),
    _plant("credential=", "credential={s}", _pw()),
    _plant("auth=", "?auth={s}&page=2", _r(22)),
    _plant("PHP 'password' =>", "'password' => '{s}'", _pw()),
    _plant("Go password :=", "password := {s}", _pw()),
)
"""A name, `=`, a value: environment variables, shell, query strings, code."""

COLON_FORMS = _family(
    "k: v",
    _plant("YAML password:", "db:\n  password: {s}\n", _pw()),
    _plant("YAML quoted token", 'ACCESS_TOKEN: "{s}"', _r(28)),
    _plant("Password: (capital)", "Password: {s}", _pw()),
    _plant("api_key:", "api_key: {s}", _r(32)),
    _plant("YAML secret: in a list", "- name: db\n  secret: {s}\n", _pw()),
    _plant("access-key:", "access-key: {s}", _r(20, _ALNUM.upper())),
    _plant("private_key: single-quoted", "private_key: '{s}'", _r(40, _B64)),
    _plant("credentials:", "credentials: {s}", _pw()),
    _plant("session:", "session: {s}", _r(30)),
    _plant("auth_token with spaces before :", "auth_token : {s}", _r(36)),
    _plant("Java properties db.password:", "spring.datasource.password:{s}", _pw()),
)
"""A name, `:`, a value: YAML, properties, log lines."""

JSON_FORMS = _family(
    "json",
    _plant('JSON "password"', '{{"user": "bob", "password": "{s}"}}', _pw()),
    _plant('JSON "api_key"', '{{"api_key" : "{s}", "n": 3}}', _r(32)),
    _plant("JSON escaped inside a string", '{{\\"secret\\": \\"{s}\\"}}', _pw()),
    _plant(
        "GCP service-account JSON private_key",
        '{{"type": "service_account", "private_key_id": "{s}", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + _r(64, _B64)
        + '\\n-----END PRIVATE KEY-----\\n"}}',
        _r(40, _HEX),
    ),
    _plant('JSON "Password" without spaces', '{{"Password":"{s}"}}', _pw()),
    _plant('JSON "token"', '{{"token": "{s}", "expires": 3600}}', _r(40)),
    _plant('JSON camelCase "accessKey"', '{{"accessKey": "{s}"}}', _r(20, _ALNUM.upper())),
    _plant('JSON "client_secret"', '{{"client_id": "app", "client_secret": "{s}"}}', _r(34)),
    _plant("Python dict repr", "{{'password': '{s}', 'user': 'root'}}", _pw()),
    _plant("JSON nested auth.token", '{{"auth": {{"token": "{s}"}}}}', _r(36)),
    _plant('JSON "session_id"', '{{"session_id": "{s}"}}', _r(32, _HEX)),
    _plant('JSON "privateKey"', '{{"privateKey": "{s}"}}', _r(44, _B64)),
)
"""`"k": "v"` in JSON, escaped JSON and Python reprs."""

XML_FORMS = _family(
    "xml",
    _plant("XML <password>", "<password>{s}</password>", _pw()),
    _plant("XML <Password> in a document", "<db><user>sa</user><Password>{s}</Password></db>", _pw()),
    _plant("XML <apiKey>", "<apiKey>{s}</apiKey>", _r(32)),
    _plant("XML <secret>", "<secret>{s}</secret>", _r(24)),
    _plant("XML <token> with an attribute", '<token type="bearer">{s}</token>', _r(40)),
    _plant("XML <access_key>", "<access_key>{s}</access_key>", _r(20, _ALNUM.upper())),
    _plant("XML <credential>", "<credential>{s}</credential>", _pw()),
    _plant("XML <privateKey>", "<privateKey>{s}</privateKey>", _r(44, _B64)),
    _plant("XML <auth>", "<auth>{s}</auth>", _r(26)),
    _plant("XML <sessionId>", "<sessionId>{s}</sessionId>", _r(32, _HEX)),
    _plant("XML attribute password=", '<connection user="sa" password="{s}"/>', _pw()),
)
"""`<k>v</k>` and XML attributes."""

INI_FORMS = _family(
    "ini/odbc",
    _plant("ODBC PWD=...;", "Driver={{ODBC Driver 17}};Server=db;UID=sa;PWD={s};", _pw()),
    _plant("ODBC pwd= (lower case, last)", "dsn=prod;uid=app;pwd={s}", _pw()),
    _plant("ODBC Pwd={braced;value}", "Server=db;Uid=sa;Pwd={{{s};x}};", _pw()),
    _plant("INI password = value", "[database]\nhost = db\npassword = {s}\n", _pw()),
    _plant("JDBC ;password=", "jdbc:sqlserver://db:1433;user=sa;password={s};encrypt=true", _pw()),
    _plant("ADO.NET Password=;", "Server=db;Database=x;User Id=sa;Password={s};Persist Security Info=False", _pw()),
    _plant("INI secret_key =", "[default]\nsecret_key = {s}\n", _r(40, _B64)),
    _plant("~/.aws/credentials", "[default]\naws_access_key_id = AKIA\naws_secret_access_key = {s}", _r(40, _B64)),
    _plant(
        "Azure AccountKey",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=x",
        _r(86, _B64) + "==",
    ),
    _plant(
        "Azure Service Bus SharedAccessKey",
        "Endpoint=sb://ns/;SharedAccessKeyName=root;SharedAccessKey={s}",
        _r(44, _B64),
    ),
    _plant("INI token=;", "token={s};timeout=30", _r(32)),
)
"""INI files and ODBC/JDBC/ADO connection strings."""

NETRC_FORMS = _family(
    "netrc",
    _plant("netrc one line", "machine h login u password {s}", _pw()),
    _plant("netrc W&B", "machine api.wandb.ai login user password {s}", _r(40, _HEX)),
    _plant("netrc github", "machine github.com login bot password {s}", _r(40)),
    _plant("netrc with account", "machine h login u password {s} account a", _pw()),
    _plant("netrc default", "default login anonymous password {s}", _pw()),
    _plant("netrc multi-line", "machine h.example.com\n\tlogin me\n\tpassword {s}\n", _pw()),
    _plant("netrc pypi __token__", "machine pypi.org login __token__ password {s}", _r(50, _URLSAFE)),
    _plant("netrc two machines", "machine a login u password x1 machine b login v password {s}", _pw()),
    _plant("passwd VALUE in text", "set passwd {s} for the job", _pw()),
    _plant("passphrase VALUE in text", "unlock with passphrase {s}", _pw()),
    _plant("Password VALUE (capital)", "login failed: Password {s} rejected", _pw()),
)
"""netrc's `password VALUE` (no `=`), and the same in free text where the value is no plain word."""

CLI_FORMS = _family(
    "cli flag",
    _plant("--password=", "python train.py --password={s} --epochs 3", _pw()),
    _plant("--password VALUE (joined)", "python train.py --password {s} --tp 2", _pw()),
    _plant("--api-key=", "serve --api-key={s}", _r(24)),
    _plant("--token=", "launch --token={s}", _r(24)),
    _plant("--db-password=", "etl --db-password={s}", _pw()),
    _plant("--PASSWORD VALUE (upper case)", "tool --PASSWORD {s}", _pw()),
    _plant("-password VALUE (single dash)", "java -jar app.jar -password {s}", _pw()),
    _plant("--secret-key VALUE", "minio --secret-key {s}", _r(40)),
    _plant("--access-key=", "s3cmd --access-key={s}", _r(20, _ALNUM.upper())),
    _plant("--private-key-passphrase VALUE", "sign --private-key-passphrase {s}", _pw()),
    _plant("--auth VALUE", "client --auth {s}", _r(24)),
    _plant("--session-token VALUE", "aws --session-token {s}", _r(60, _B64)),
    _plant("--cookie VALUE", "fetch --cookie {s}", _r(32)),
    _plant("--credential=", "gh --credential={s}", _pw()),
)
"""`--k v` and `--k=v` in a command line joined into one string."""

TOOL_FORMS = _family(
    "tool option",
    _plant("mysql -pPASSWORD (joined)", "mysql -u root -h db -p{s} prod < dump.sql", _pw()),
    _plant("sshpass -p VALUE", "sshpass -p {s} ssh -p 22 user@host", _pw()),
    _plant("sshpass -pVALUE", "sshpass -p{s} scp a host:b", _pw()),
    _plant("curl -u user:pass", "curl -s -u admin:{s} https://api.example.com", _pw()),
    _plant("curl --user user:pass", "curl --user admin:{s} https://h", _pw()),
    _plant("curl -uuser:pass", "curl -uadmin:{s} https://h", _pw()),
    _plant("curl -u 'user:pass' quoted", "curl -u 'admin:{s}' https://h", _pw()),
    _plant("redis-cli -a", "redis-cli -h cache -a {s} ping", _pw()),
    _plant("mongosh -p", "mongosh --host db -u admin -p {s}", _pw()),
    _plant("smbclient -U user%pass", "smbclient //srv/share -U user%{s}", _pw()),
    _plant("ipmitool -P", "ipmitool -H bmc -U admin -P {s} power status", _pw()),
    _plant("sqlcmd -P", "sqlcmd -S db -U sa -P {s}", _pw()),
    _plant("docker login -p", "docker login -u me -p {s} registry.example.com", _pw()),
    _plant("openssl -pass pass:", "openssl enc -aes256 -pass pass:{s} -in f", _pw()),
)
"""Tools that take a password by position (`-p X`, `-pX`, `-u user:X`)."""

ENCODED_FORMS = _family(
    "encoded",
    _plant("URL-encoded password%3D", "password%3D{s}", _pw()),
    _plant("URL-encoded query in a query", "/search?q=a%26password%3D{s}%26b%3D1", _pw()),
    _plant("URL-encoded api_key%3A%20", "api_key%3A%20{s}", _r(32)),
    _plant("URL-encoded JSON", "%7B%22password%22%3A%22{s}%22%7D", _pw()),
    _plant("JSON key written with \\u escapes", '{{"\\u0070assword": "{s}"}}', _pw()),
    _plant("JSON key with one \\u escape inside", '{{"pass\\u0077ord":"{s}"}}', _pw()),
    _plant("\\u003d for =", "token\\u003d{s}", _r(30)),
    _plant("HTML &quot; entities", "&quot;password&quot;: &quot;{s}&quot;", _pw()),
    _plant("HTML numeric &#61;", "password&#61;{s}", _pw()),
    _plant("double URL-encoding %253D", "secret%253D{s}", _pw()),
    _plant("\\x escape", "\\x70assword={s}", _pw()),
)
"""A secret's name or its `=` written escaped."""

URL_FORMS = _family(
    "url userinfo",
    _plant("basic-auth URL", "https://alice:{s}@registry.example.com/v2/", _pw()),
    _plant("postgres://user:pw@", "postgres://app:{s}@db.internal:5432/prod", _pw()),
    _plant("redis://:pw@", "redis://:{s}@cache:6379/0", _pw()),
    _plant("mongodb+srv://", "mongodb+srv://svc:{s}@cluster0.abcde.mongodb.net/test", _pw()),
    _plant("token as URL user", "git clone https://{s}@github.com/org/repo.git", "ghp_" + _r(36)),
    _plant("Sentry DSN", "https://{s}@o123456.ingest.sentry.io/7654321", _r(32, _HEX)),
    _plant("SENTRY_DSN=", "SENTRY_DSN=https://{s}@o1.ingest.us.sentry.io/2", _r(32, _HEX)),
    _plant("amqp://", "amqp://guest:{s}@rabbit:5672/", _pw()),
    _plant("ftp://", "ftp://u:{s}@ftp.example.com/pub", _pw()),
    _plant("mysql://", "mysql://root:{s}@db/x", _pw()),
    _plant("git+https://oauth2:", "pip install git+https://oauth2:{s}@gitlab.com/g/p.git", _r(20)),
)
"""scheme://user:password@host."""

HEADER_FORMS = _family(
    "header",
    _plant("Authorization: Bearer", "curl -H 'Authorization: Bearer {s}' https://api.example.com", _r(40)),
    _plant("Authorization: Basic", "Authorization: Basic {s}", _BASIC),
    _plant("Authorization: token", "Authorization: token {s}", _r(40, _HEX)),
    _plant("bare Bearer", "retry with Bearer {s} after 401", _r(36)),
    _plant("X-Api-Key header", "X-Api-Key: {s}", _r(32)),
    _plant("Cookie header", "Cookie: session={s}", _r(32)),
    _plant("Cookie header, second cookie", "Cookie: theme=dark; sid={s}; lang=en", _r(32)),
    _plant("Set-Cookie", "Set-Cookie: id={s}; Path=/; HttpOnly", _r(32)),
    _plant("Proxy-Authorization", "Proxy-Authorization: Basic {s}", _r(24, _B64)),
    _plant("Authorization: Digest", 'Authorization: Digest username="u", nonce="n", response={s}', _r(32, _HEX)),
    _plant("Authorization: raw key", "authorization: {s}", _r(40)),
    _plant("PRIVATE-TOKEN header", "PRIVATE-TOKEN: {s}", _r(20)),
)
"""HTTP headers that carry credentials."""

PEM_FORMS = _family(
    "pem",
    _plant("PEM RSA", "-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----", "MIIEv" + _r(60, _B64)),
    _plant("PEM key without END (cut short)", "key: -----BEGIN OPENSSH PRIVATE KEY-----\n{s}", _r(70, _B64)),
    _plant("PEM EC", "-----BEGIN EC PRIVATE KEY-----\n{s}\n-----END EC PRIVATE KEY-----", _r(64, _B64)),
    _plant("PEM PKCS#8", "-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----", _r(64, _B64)),
    _plant(
        "PEM encrypted", "-----BEGIN ENCRYPTED PRIVATE KEY-----\n{s}\n-----END ENCRYPTED PRIVATE KEY-----", _r(64, _B64)
    ),
    _plant(
        "PGP private key block",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{s}\n-----END PGP PRIVATE KEY BLOCK-----",
        _r(64, _B64),
    ),
    _plant("PEM DSA", "-----BEGIN DSA PRIVATE KEY-----\n{s}\n-----END DSA PRIVATE KEY-----", _r(64, _B64)),
    _plant(
        "PEM with escaped newlines", "-----BEGIN PRIVATE KEY-----\\n{s}\\n-----END PRIVATE KEY-----\\n", _r(64, _B64)
    ),
    _plant("PEM on one line", "-----BEGIN RSA PRIVATE KEY----- {s} -----END RSA PRIVATE KEY-----", _r(64, _B64)),
    _plant(
        "OpenSSH key with END",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{s}\n-----END OPENSSH PRIVATE KEY-----",
        _r(70, _B64),
    ),
    _plant(
        "PEM body with '-' inside",
        "-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----",
        _r(30, _B64) + "-" + _r(30, _B64),
    ),
)
"""PEM blocks: the body goes, the BEGIN/END lines stay."""

VENDOR_FORMS = _family(
    "vendor token",
    _plant("Hugging Face", "login {s}", "hf_" + _r(34)),
    _plant("GitHub classic", "{s}", "ghp_" + _r(36)),
    _plant("GitHub fine-grained", "GH={s}", "github_pat_" + _r(22) + "_" + _r(59)),
    _plant("GitLab glpat-", "glab auth {s}", "glpat-" + _r(20, _URLSAFE)),
    _plant("OpenAI sk-", "client(key {s})", "sk-" + _r(48)),
    _plant("OpenAI sk-proj-", "{s}", "sk-proj-" + _r(64, _URLSAFE)),
    _plant("Anthropic sk-ant-", "{s}", "sk-ant-api03-" + _r(93, _URLSAFE) + "AA"),
    _plant("Slack bot xoxb-", "{s}", "xoxb-" + _r(11, _DIGITS) + "-" + _r(13, _DIGITS) + "-" + _r(24)),
    _plant("Slack user xoxp-", "{s}", "xoxp-" + _r(11, _DIGITS) + "-" + _r(32, _HEX)),
    _plant("Stripe sk_live_", "{s}", "sk_" + "live_" + _r(24)),
    _plant("Stripe rk_live_", "{s}", "rk_" + "live_" + _r(24)),
    _plant("Stripe whsec_", "webhook secret {s}", "whsec_" + _r(32)),
    _plant("Twilio SK", "twilio {s}", "SK" + _r(32, _HEX)),
    _plant("SendGrid SG.", "{s}", "SG." + _r(22, _URLSAFE) + "." + _r(43, _URLSAFE)),
    _plant("npm token", "//registry.npmjs.org/:_authToken={s}", "npm_" + _r(36)),
    _plant("PyPI token", "{s}", "pypi-AgEIcHlwaS5vcmc" + _r(60, _URLSAFE)),
    _plant("AWS access key id", "aws {s}", "AKIA" + _r(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")),
    _plant("Google API key", "{s}", "AIza" + _r(35, _URLSAFE)),
    _plant("Google OAuth ya29.", "{s}", "ya29." + _r(60, _URLSAFE)),
    _plant("Databricks dapi", "{s}", "dapi" + _r(32, _HEX)),
    _plant("JWT", "session {s}", _JWT),
    _plant("Slack webhook", "https://hooks.slack.com/services/{s}", "T" + _r(8) + "/B" + _r(8) + "/" + _r(24)),
    _plant("Discord webhook", "https://discord.com/api/webhooks/{s}", _r(18, _DIGITS) + "/" + _r(68, _URLSAFE)),
    _plant("Vault hvs.", "VAULT {s}", "hvs." + _r(24) + _r(70, _URLSAFE)),
    _plant(
        "Telegram bot token", "https://api.telegram.org/bot{s}/sendMessage", _r(10, _DIGITS) + ":AA" + _r(33, _URLSAFE)
    ),
    _plant("Azure AD client secret 8Q~", "az login --sp {s}", _r(3) + "8Q~" + _r(34, _ALNUM + "_~.-")),
    _plant("age secret key", "{s}", "AGE-SECRET-KEY-1" + _r(58, _AGE)),
    _plant("Shopify shpat_", "shop {s}", "shpat_" + _r(32, _HEX)),
    _plant("Atlassian ATATT3x", "jira {s}", "ATATT3x" + _r(180, _URLSAFE + "=")),
    _plant("DigitalOcean dop_v1_", "doctl {s}", "dop_v1_" + _r(64, _HEX)),
    _plant("Grafana glsa_", "grafana {s}", "glsa_" + _r(32) + "_" + _r(8, _HEX)),
    _plant("Groq gsk_", "groq {s}", "gsk_" + _r(52)),
    _plant("LangSmith lsv2_pt_", "trace {s}", "lsv2_pt_" + _r(32, _HEX) + "_" + _r(10, _HEX)),
    _plant("Mailgun key-", "mg {s}", "key-" + _r(32, _HEX)),
    _plant("Perplexity pplx-", "pplx {s}", "pplx-" + _r(48)),
    _plant("NVIDIA nvapi-", "ngc {s}", "nvapi-" + _r(64, _URLSAFE)),
    _plant("Docker Hub dckr_pat_", "{s}", "dckr_pat_" + _r(27, _URLSAFE)),
    _plant("Replicate r8_", "{s}", "r8_" + _r(37)),
    _plant("GitLab runner glrt-", "{s}", "glrt-" + _r(20, _URLSAFE)),
    _plant("Grafana cloud glc_", "{s}", "glc_" + _r(40, _B64)),
    _plant("Notion ntn_", "{s}", "ntn_" + _r(11, _DIGITS) + _r(35)),
    _plant("Linear lin_api_", "{s}", "lin_api_" + _r(40)),
    _plant("Postman PMAK-", "{s}", "PMAK-" + _r(24, _HEX) + "-" + _r(34, _HEX)),
    _plant("Pulumi pul-", "{s}", "pul-" + _r(40, _HEX)),
    _plant("Prefect pnu_", "{s}", "pnu_" + _r(36)),
    _plant("Doppler dp.pt.", "{s}", "dp.pt." + _r(43)),
    _plant("PlanetScale pscale_tkn_", "{s}", "pscale_tkn_" + _r(43)),
    _plant("Sentry sntryu_", "{s}", "sntryu_" + _r(64, _HEX)),
    _plant("1Password ops_eyJ", "{s}", "ops_eyJ" + _r(250, _B64)),
    _plant("Alibaba LTAI", "{s}", "LTAI" + _r(20)),
    _plant("Heroku HRKU-AA", "{s}", "HRKU-AA" + _r(58, _URLSAFE)),
    _plant("Dynatrace dt0c01.", "{s}", "dt0c01." + _r(24) + "." + _r(64)),
    _plant("Square EAAA", "{s}", "EAAA" + _r(60, _URLSAFE)),
    _plant("Tailscale tskey-auth-", "{s}", "tskey-auth-" + _r(12) + "-" + _r(30)),
    _plant("xAI xai-", "{s}", "xai-" + _r(80)),
    _plant("RubyGems rubygems_", "{s}", "rubygems_" + _r(48, _HEX)),
)
"""Vendor token formats, anywhere in a string (ktrace.model.secret_formats)."""

FAMILIES: dict[str, tuple[Planted, ...]] = {
    forms[0].family: forms
    for forms in (
        ASSIGNMENTS,
        COLON_FORMS,
        JSON_FORMS,
        XML_FORMS,
        INI_FORMS,
        NETRC_FORMS,
        CLI_FORMS,
        TOOL_FORMS,
        ENCODED_FORMS,
        URL_FORMS,
        HEADER_FORMS,
        PEM_FORMS,
        VENDOR_FORMS,
    )
}
"""Every syntax family of text forms, each with at least 10 forms."""

TEXT_FORMS: tuple[Planted, ...] = tuple(p for forms in FAMILIES.values() for p in forms)
"""Secrets in free text: metadata values, NVTX/annotation names, kernel names, command lines, notes."""

ARGV_FORMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("python", "-c", "pass", "--password", "{s}"), _pw()),
    (("python", "train.py", "--api-key", "{s}", "--tp", "2"), _r(24)),
    (("python", "train.py", "--token={s}"), _r(24)),
    (("mysql", "-uroot", "-p{s}", "prod"), _pw()),
    (("sshpass", "-p", "{s}", "ssh", "-p", "22", "host"), _pw()),
    (("/usr/bin/curl", "-u", "admin:{s}", "https://h"), _pw()),
    (("curl", "--user=admin:{s}", "https://h"), _pw()),
    (("redis-cli", "-a", "{s}", "ping"), _pw()),
    (("docker", "login", "-u", "me", "-p", "{s}", "registry"), _pw()),
    (("python", "serve.py", "{s}"), _r(40)),
    (("python", "serve.py", "--run-key-material={s}"), _r(32, _B64)),
    (("env", "UPSTREAM_CONF={s}", "python", "job.py"), _r(36)),
    (("openssl", "enc", "-passin", "pass:{s}"), _pw()),
)
"""A command line as argv: a secret flag's value may be the next element, a tool's option gives a password by
position, and a long random argument is a key whatever its name."""

ENVIRONMENT: dict[str, str] = {
    "HF_TOKEN": "hf_" + _r(34),
    "DB_PASS": _pw(),
    "MYSQL_PWD": _pw(),
    "PMI_SHARED_SECRET": _r(20, _DIGITS),
    "WANDB_API_KEY": _r(40, _HEX),
    "DD_API_KEY": _r(32, _HEX),
    "AZURE_STORAGE_KEY": _r(86, _B64) + "==",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T" + _r(8) + "/B" + _r(8) + "/" + _r(24),
    "SENTRY_DSN": "https://" + _r(32, _HEX) + "@o9.ingest.sentry.io/9",
    "GITLAB_TOKEN": "glpat-" + _r(20),
    "NPM_TOKEN": "npm_" + _r(36),
    "SLURM_JWT": _r(40),
    "GROQ_API_KEY": "gsk_" + _r(52),
    "LANGCHAIN_API_KEY": "lsv2_sk_" + _r(32, _HEX) + "_" + _r(10, _HEX),
    "NGC_API_KEY": _r(84, _B64),
}
"""An environment as a mapping (Kineto metadata, nsys TARGET_INFO_SYSTEM_ENV): every value must go."""

KEPT: tuple[str, ...] = (
    "ampere_sgemm_128x64_tn",
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, float, char*)",
    "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_relu_f16_256x128_32x3_nn_align8>(Params)",
    "sm80_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(key_padding_mask)",
    "KeyValueCache::update",
    "tokenizer",
    "tokenizer=gpt2",
    "max_tokens=2048",
    "--max-new-tokens 128",
    "--token-budget 4096",
    "token_count=4096",
    "key_size=2048",
    "session_timeout=30",
    "PWD=/home/user/work",
    "OLDPWD=~/src",
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
    "/data/ckpt/ResNet50_ImageNet_Pretrained_v2.pt",
    "https://github.com/pytorch/pytorch",
    "ssh://git@github.com/org/repo.git",
    "0x7f3a2b1c00",
    "3f786850e387550fdab836ed7e6dc881de23001b",
    "GPU-5a3c2b1e-8d7f-4e6a-9b0c-1d2e3f4a5b6c",
    "[[8, 3, 224, 224], [64, 3, 7, 7], [], [1]]",
    "ProfilerStep#3",
    "nccl:all_reduce",
    "aten::scaled_dot_product_attention",
    "<built-in method to of Tensor object at 0x7f3a2b1c00>",
    "cudaLaunchKernel",
    "Memcpy HtoD (Pageable -> Device)",
    "author=someone",
    "sk-learn",
    "key",
    "key-value cache",
    "Bearer",
    "Bearer token auth",
    "sort_key_kernel<128>",
    "cub::DeviceRadixSortPass<true>",
    "sig_handler",
    "mysql -u root -p mydb",
    "ssh -p22 host",
    "docker run -p 8080:80 image",
    "torchrun --nproc-per-node 8 -p 29500 train.py",
    "password reset required",
    "enter your password for the key store",
    "secret_name=my-secret",
    "100% done",
    "<password></password>",
    "<token_count>5</token_count>",
)
"""Names and settings that look a little like secrets and must come out unchanged. Hex pointers and hashes in
kernel names are kept: a long hex run is not redacted on its own look (see ktrace.model.secrets)."""

ARGV_KEPT: tuple[tuple[str, ...], ...] = (
    ("python", "serve.py", "--tp", "2", "-p", "8080", "--max-tokens", "2048"),
    ("ssh", "-p22", "host"),
    ("sshpass", "-f", "/run/pw", "ssh", "-p", "22", "host"),
    ("docker", "run", "-p", "8080:80", "image"),
    ("mysql", "-u", "root", "-p", "mydb"),
    ("torchrun", "--nproc-per-node", "8", "train.py", "--model", "meta-llama/Llama-2-7b-hf"),
    ("python", "train.py", "--output", "/data/ckpt/ResNet50_ImageNet_Pretrained_v2", "--token-budget", "4096"),
    ("python", "eval.py", "--resume", "3f786850e387550fdab836ed7e6dc881de23001b", "--lr", "3e-4"),
    ("python", "run.py", "--gpu", "GPU-5a3c2b1e-8d7f-4e6a-9b0c-1d2e3f4a5b6c", "--seed", "12345678901234567890"),
    ("python", "-m", "ktrace.bench", "ResNet50ImageNetPretrainedV2", "Qwen/Qwen2.5-7B-Instruct"),
)
"""Command lines that hold no secret and must come out unchanged (ports, paths, hashes, model names)."""


def all_secrets() -> list[str]:
    """Every planted value, for the byte-level checks of outputs."""
    return [p.secret for p in TEXT_FORMS] + [s for _, s in ARGV_FORMS] + list(ENVIRONMENT.values())
