"""The secret corpus: every planted form the scrubber must catch, by syntax family, and names it must leave alone.

Each secret is made here from a seeded generator (no literal token sits in the repository for a secret scanner
to trip on), each is distinct, and none is a substring of another or of any innocent text, so a test can look
for each in every byte of every output. FAMILIES groups the text forms by the syntax that carries the secret
(at least 10 of each); ARGV_FORMS are command lines as argv; KEPT and ARGV_KEPT must come out unchanged.
"""

from __future__ import annotations

import base64

from ktrace.testing.secrets_corpus_tokens import PEM_FORMS, VENDOR_FORMS
from ktrace.testing.secrets_planting import (
    ALNUM,
    B64,
    DIGITS,
    HEX,
    URLSAFE,
    Planted,
    family,
    password,
    plant,
    random_text,
)

_BASIC = base64.b64encode(b"admin:" + password().encode()).decode()

ASSIGNMENTS = family(
    "k=v",
    plant("password=", "password={s}", password()),
    plant("-e NAME=value", "docker run -e MY_SERVICE_TOKEN={s} image", random_text(30)),
    plant("x=password=", "opts=password={s}", password()),
    plant("tokenizer=password:", "tokenizer=password:{s}", password()),
    plant("DB_PASS", "DB_PASS={s}", password()),
    plant("MYSQL_PWD", "MYSQL_PWD={s}", password()),
    plant("PGPASSWORD", "export PGPASSWORD={s}", password()),
    plant("HF_TOKEN (not hf_-shaped)", "HF_TOKEN={s}", random_text(20)),
    plant("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY={s}", random_text(40, B64)),
    plant("DD_API_KEY (Datadog)", "DD_API_KEY={s}", random_text(32, HEX)),
    plant("WANDB_API_KEY (W&B)", "WANDB_API_KEY={s}", random_text(40, HEX)),
    plant("PMI_SHARED_SECRET", "PMI_SHARED_SECRET={s}", random_text(20, DIGITS)),
    plant("SLURM_JWT", "SLURM_JWT={s}", random_text(48, ALNUM + "._-")),
    plant(
        "OMPI PSM key", "OMPI_MCA_orte_precondition_transports={s}", random_text(16, HEX) + "-" + random_text(16, HEX)
    ),
    plant("NCCL/SLURM job credential", "SLURM_CRED={s}", random_text(24)),
    plant("client_secret", "client_secret={s}", random_text(34, ALNUM + "~_.-")),
    plant("quoted value with a space", "PASSWORD='{s}'", "correct horse " + random_text(6)),
    plant("mixed-case PassWord=", "PassWord={s}", password()),
    plant("lower-case dbpassword=", "dbpassword={s}", password()),
    plant("JSESSIONID=", "JSESSIONID={s}", random_text(32, HEX.upper())),
    plant("session_token=", "session_token={s}", random_text(28)),
    plant("private_key=", "private_key={s}", random_text(44, B64)),
    plant("Access-Key=", "Access-Key={s}", random_text(26)),
    plant("credential=", "credential={s}", password()),
    plant("auth=", "?auth={s}&page=2", random_text(22)),
    plant("PHP 'password' =>", "'password' => '{s}'", password()),
    plant("Go password :=", "password := {s}", password()),
)
"""A name, `=`, a value: environment variables, shell, query strings, code."""

COLON_FORMS = family(
    "k: v",
    plant("YAML password:", "db:\n  password: {s}\n", password()),
    plant("YAML quoted token", 'ACCESS_TOKEN: "{s}"', random_text(28)),
    plant("Password: (capital)", "Password: {s}", password()),
    plant("api_key:", "api_key: {s}", random_text(32)),
    plant("YAML secret: in a list", "- name: db\n  secret: {s}\n", password()),
    plant("access-key:", "access-key: {s}", random_text(20, ALNUM.upper())),
    plant("private_key: single-quoted", "private_key: '{s}'", random_text(40, B64)),
    plant("credentials:", "credentials: {s}", password()),
    plant("session:", "session: {s}", random_text(30)),
    plant("auth_token with spaces before :", "auth_token : {s}", random_text(36)),
    plant("Java properties db.password:", "spring.datasource.password:{s}", password()),
)
"""A name, `:`, a value: YAML, properties, log lines."""

JSON_FORMS = family(
    "json",
    plant('JSON "password"', '{{"user": "bob", "password": "{s}"}}', password()),
    plant('JSON "api_key"', '{{"api_key" : "{s}", "n": 3}}', random_text(32)),
    plant("JSON escaped inside a string", '{{\\"secret\\": \\"{s}\\"}}', password()),
    plant(
        "GCP service-account JSON private_key",
        '{{"type": "service_account", "private_key_id": "{s}", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + random_text(64, B64)
        + '\\n-----END PRIVATE KEY-----\\n"}}',
        random_text(40, HEX),
    ),
    plant('JSON "Password" without spaces', '{{"Password":"{s}"}}', password()),
    plant('JSON "token"', '{{"token": "{s}", "expires": 3600}}', random_text(40)),
    plant('JSON camelCase "accessKey"', '{{"accessKey": "{s}"}}', random_text(20, ALNUM.upper())),
    plant('JSON "client_secret"', '{{"client_id": "app", "client_secret": "{s}"}}', random_text(34)),
    plant("Python dict repr", "{{'password': '{s}', 'user': 'root'}}", password()),
    plant("JSON nested auth.token", '{{"auth": {{"token": "{s}"}}}}', random_text(36)),
    plant('JSON "session_id"', '{{"session_id": "{s}"}}', random_text(32, HEX)),
    plant('JSON "privateKey"', '{{"privateKey": "{s}"}}', random_text(44, B64)),
)
"""`"k": "v"` in JSON, escaped JSON and Python reprs."""

XML_FORMS = family(
    "xml",
    plant("XML <password>", "<password>{s}</password>", password()),
    plant("XML <Password> in a document", "<db><user>sa</user><Password>{s}</Password></db>", password()),
    plant("XML <apiKey>", "<apiKey>{s}</apiKey>", random_text(32)),
    plant("XML <secret>", "<secret>{s}</secret>", random_text(24)),
    plant("XML <token> with an attribute", '<token type="bearer">{s}</token>', random_text(40)),
    plant("XML <access_key>", "<access_key>{s}</access_key>", random_text(20, ALNUM.upper())),
    plant("XML <credential>", "<credential>{s}</credential>", password()),
    plant("XML <privateKey>", "<privateKey>{s}</privateKey>", random_text(44, B64)),
    plant("XML <auth>", "<auth>{s}</auth>", random_text(26)),
    plant("XML <sessionId>", "<sessionId>{s}</sessionId>", random_text(32, HEX)),
    plant("XML attribute password=", '<connection user="sa" password="{s}"/>', password()),
)
"""`<k>v</k>` and XML attributes."""

INI_FORMS = family(
    "ini/odbc",
    plant("ODBC PWD=...;", "Driver={{ODBC Driver 17}};Server=db;UID=sa;PWD={s};", password()),
    plant("ODBC pwd= (lower case, last)", "dsn=prod;uid=app;pwd={s}", password()),
    plant("ODBC Pwd={braced;value}", "Server=db;Uid=sa;Pwd={{{s};x}};", password()),
    plant("INI password = value", "[database]\nhost = db\npassword = {s}\n", password()),
    plant("JDBC ;password=", "jdbc:sqlserver://db:1433;user=sa;password={s};encrypt=true", password()),
    plant("ADO.NET Password=;", "Server=db;Database=x;User Id=sa;Password={s};Persist Security Info=False", password()),
    plant("INI secret_key =", "[default]\nsecret_key = {s}\n", random_text(40, B64)),
    plant(
        "~/.aws/credentials", "[default]\naws_access_key_id = AKIA\naws_secret_access_key = {s}", random_text(40, B64)
    ),
    plant(
        "Azure AccountKey",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=x",
        random_text(86, B64) + "==",
    ),
    plant(
        "Azure Service Bus SharedAccessKey",
        "Endpoint=sb://ns/;SharedAccessKeyName=root;SharedAccessKey={s}",
        random_text(44, B64),
    ),
    plant("INI token=;", "token={s};timeout=30", random_text(32)),
)
"""INI files and ODBC/JDBC/ADO connection strings."""

NETRC_FORMS = family(
    "netrc",
    plant("netrc one line", "machine h login u password {s}", password()),
    plant("netrc W&B", "machine api.wandb.ai login user password {s}", random_text(40, HEX)),
    plant("netrc github", "machine github.com login bot password {s}", random_text(40)),
    plant("netrc with account", "machine h login u password {s} account a", password()),
    plant("netrc default", "default login anonymous password {s}", password()),
    plant("netrc multi-line", "machine h.example.com\n\tlogin me\n\tpassword {s}\n", password()),
    plant("netrc pypi __token__", "machine pypi.org login __token__ password {s}", random_text(50, URLSAFE)),
    plant("netrc two machines", "machine a login u password x1 machine b login v password {s}", password()),
    plant("passwd VALUE in text", "set passwd {s} for the job", password()),
    plant("passphrase VALUE in text", "unlock with passphrase {s}", password()),
    plant("Password VALUE (capital)", "login failed: Password {s} rejected", password()),
)
"""netrc's `password VALUE` (no `=`), and the same in free text where the value is no plain word."""

CLI_FORMS = family(
    "cli flag",
    plant("--password=", "python train.py --password={s} --epochs 3", password()),
    plant("--password VALUE (joined)", "python train.py --password {s} --tp 2", password()),
    plant("--api-key=", "serve --api-key={s}", random_text(24)),
    plant("--token=", "launch --token={s}", random_text(24)),
    plant("--db-password=", "etl --db-password={s}", password()),
    plant("--PASSWORD VALUE (upper case)", "tool --PASSWORD {s}", password()),
    plant("-password VALUE (single dash)", "java -jar app.jar -password {s}", password()),
    plant("--secret-key VALUE", "minio --secret-key {s}", random_text(40)),
    plant("--access-key=", "s3cmd --access-key={s}", random_text(20, ALNUM.upper())),
    plant("--private-key-passphrase VALUE", "sign --private-key-passphrase {s}", password()),
    plant("--auth VALUE", "client --auth {s}", random_text(24)),
    plant("--session-token VALUE", "aws --session-token {s}", random_text(60, B64)),
    plant("--cookie VALUE", "fetch --cookie {s}", random_text(32)),
    plant("--credential=", "gh --credential={s}", password()),
)
"""`--k v` and `--k=v` in a command line joined into one string."""

TOOL_FORMS = family(
    "tool option",
    plant("mysql -pPASSWORD (joined)", "mysql -u root -h db -p{s} prod < dump.sql", password()),
    plant("sshpass -p VALUE", "sshpass -p {s} ssh -p 22 user@host", password()),
    plant("sshpass -pVALUE", "sshpass -p{s} scp a host:b", password()),
    plant("curl -u user:pass", "curl -s -u admin:{s} https://api.example.com", password()),
    plant("curl --user user:pass", "curl --user admin:{s} https://h", password()),
    plant("curl -uuser:pass", "curl -uadmin:{s} https://h", password()),
    plant("curl -u 'user:pass' quoted", "curl -u 'admin:{s}' https://h", password()),
    plant("redis-cli -a", "redis-cli -h cache -a {s} ping", password()),
    plant("mongosh -p", "mongosh --host db -u admin -p {s}", password()),
    plant("smbclient -U user%pass", "smbclient //srv/share -U user%{s}", password()),
    plant("ipmitool -P", "ipmitool -H bmc -U admin -P {s} power status", password()),
    plant("sqlcmd -P", "sqlcmd -S db -U sa -P {s}", password()),
    plant("docker login -p", "docker login -u me -p {s} registry.example.com", password()),
    plant("openssl -pass pass:", "openssl enc -aes256 -pass pass:{s} -in f", password()),
)
"""Tools that take a password by position (`-p X`, `-pX`, `-u user:X`)."""

ENCODED_FORMS = family(
    "encoded",
    plant("URL-encoded password%3D", "password%3D{s}", password()),
    plant("URL-encoded query in a query", "/search?q=a%26password%3D{s}%26b%3D1", password()),
    plant("URL-encoded api_key%3A%20", "api_key%3A%20{s}", random_text(32)),
    plant("URL-encoded JSON", "%7B%22password%22%3A%22{s}%22%7D", password()),
    plant("JSON key written with \\u escapes", '{{"\\u0070assword": "{s}"}}', password()),
    plant("JSON key with one \\u escape inside", '{{"pass\\u0077ord":"{s}"}}', password()),
    plant("\\u003d for =", "token\\u003d{s}", random_text(30)),
    plant("HTML &quot; entities", "&quot;password&quot;: &quot;{s}&quot;", password()),
    plant("HTML numeric &#61;", "password&#61;{s}", password()),
    plant("double URL-encoding %253D", "secret%253D{s}", password()),
    plant("\\x escape", "\\x70assword={s}", password()),
)
"""A secret's name or its `=` written escaped."""

URL_FORMS = family(
    "url userinfo",
    plant("basic-auth URL", "https://alice:{s}@registry.example.com/v2/", password()),
    plant("postgres://user:pw@", "postgres://app:{s}@db.internal:5432/prod", password()),
    plant("redis://:pw@", "redis://:{s}@cache:6379/0", password()),
    plant("mongodb+srv://", "mongodb+srv://svc:{s}@cluster0.abcde.mongodb.net/test", password()),
    plant("token as URL user", "git clone https://{s}@github.com/org/repo.git", "ghp_" + random_text(36)),
    plant("Sentry DSN", "https://{s}@o123456.ingest.sentry.io/7654321", random_text(32, HEX)),
    plant("SENTRY_DSN=", "SENTRY_DSN=https://{s}@o1.ingest.us.sentry.io/2", random_text(32, HEX)),
    plant("amqp://", "amqp://guest:{s}@rabbit:5672/", password()),
    plant("ftp://", "ftp://u:{s}@ftp.example.com/pub", password()),
    plant("mysql://", "mysql://root:{s}@db/x", password()),
    plant("git+https://oauth2:", "pip install git+https://oauth2:{s}@gitlab.com/g/p.git", random_text(20)),
)
"""scheme://user:password@host."""

HEADER_FORMS = family(
    "header",
    plant("Authorization: Bearer", "curl -H 'Authorization: Bearer {s}' https://api.example.com", random_text(40)),
    plant("Authorization: Basic", "Authorization: Basic {s}", _BASIC),
    plant("Authorization: token", "Authorization: token {s}", random_text(40, HEX)),
    plant("bare Bearer", "retry with Bearer {s} after 401", random_text(36)),
    plant("X-Api-Key header", "X-Api-Key: {s}", random_text(32)),
    plant("Cookie header", "Cookie: session={s}", random_text(32)),
    plant("Cookie header, second cookie", "Cookie: theme=dark; sid={s}; lang=en", random_text(32)),
    plant("Set-Cookie", "Set-Cookie: id={s}; Path=/; HttpOnly", random_text(32)),
    plant("Proxy-Authorization", "Proxy-Authorization: Basic {s}", random_text(24, B64)),
    plant("Authorization: Digest", 'Authorization: Digest username="u", nonce="n", response={s}', random_text(32, HEX)),
    plant("Authorization: raw key", "authorization: {s}", random_text(40)),
    plant("PRIVATE-TOKEN header", "PRIVATE-TOKEN: {s}", random_text(20)),
)
"""HTTP headers that carry credentials."""

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
    (("python", "-c", "pass", "--password", "{s}"), password()),
    (("python", "train.py", "--api-key", "{s}", "--tp", "2"), random_text(24)),
    (("python", "train.py", "--token={s}"), random_text(24)),
    (("mysql", "-uroot", "-p{s}", "prod"), password()),
    (("sshpass", "-p", "{s}", "ssh", "-p", "22", "host"), password()),
    (("/usr/bin/curl", "-u", "admin:{s}", "https://h"), password()),
    (("curl", "--user=admin:{s}", "https://h"), password()),
    (("redis-cli", "-a", "{s}", "ping"), password()),
    (("docker", "login", "-u", "me", "-p", "{s}", "registry"), password()),
    (("python", "serve.py", "{s}"), random_text(40)),
    (("python", "serve.py", "--run-key-material={s}"), random_text(32, B64)),
    (("env", "UPSTREAM_CONF={s}", "python", "job.py"), random_text(36)),
    (("openssl", "enc", "-passin", "pass:{s}"), password()),
)
"""A command line as argv: a secret flag's value may be the next element, a tool's option gives a password by
position, and a long random argument is a key whatever its name."""

ENVIRONMENT: dict[str, str] = {
    "HF_TOKEN": "hf_" + random_text(34),
    "DB_PASS": password(),
    "MYSQL_PWD": password(),
    "PMI_SHARED_SECRET": random_text(20, DIGITS),
    "WANDB_API_KEY": random_text(40, HEX),
    "DD_API_KEY": random_text(32, HEX),
    "AZURE_STORAGE_KEY": random_text(86, B64) + "==",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T"
    + random_text(8)
    + "/B"
    + random_text(8)
    + "/"
    + random_text(24),
    "SENTRY_DSN": "https://" + random_text(32, HEX) + "@o9.ingest.sentry.io/9",
    "GITLAB_TOKEN": "glpat-" + random_text(20),
    "NPM_TOKEN": "npm_" + random_text(36),
    "SLURM_JWT": random_text(40),
    "GROQ_API_KEY": "gsk_" + random_text(52),
    "LANGCHAIN_API_KEY": "lsv2_sk_" + random_text(32, HEX) + "_" + random_text(10, HEX),
    "NGC_API_KEY": random_text(84, B64),
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
