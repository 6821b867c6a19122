"""Vendor token formats: the published shapes of API keys and tokens, as data, each with the source it is from.

The reference is gitleaks' rule set (MIT; `config/gitleaks.toml` at gitleaks/gitleaks@009e025, read 2026-11-27):
a rule named `gitleaks:<id>` below is that rule's token shape, rewritten by us for Python's `re` (gitleaks' are RE2)
and kept linear-time: every pattern starts a match only at the start of a token (a look-behind on the token's
characters) and has bounded or final repetitions, so a long run is never rescanned from each of its positions.
gitleaks' rules that need a vendor's name beside the value (`twitter ... = VALUE`) are left to the name rules of
ktrace.model.secrets. A rule named `vendor:` is a format gitleaks did not have at that commit, from the vendor's
own documentation of its keys. A new format is one line here; testing/secrets_corpus_tokens.py plants the issue's
and the common ones, and tests/unit/model/test_secrets.py checks each planted one is found by a format here.
"""

from __future__ import annotations

from typing import NamedTuple

_START = r"(?<![A-Za-z0-9_])"
"""A token starts at the start of a word: without this, a long run is rescanned from each of its positions."""
_START_DASH = r"(?<![A-Za-z0-9_-])"


class TokenFormat(NamedTuple):
    """One vendor's token shape."""

    source: str
    """`gitleaks:<rule id>` or `vendor:<who documents it>`."""
    literals: tuple[str, ...]
    """Strings one of which every match holds: the pattern runs only on a text holding one."""
    pattern: str
    """The token as a regular expression; a group `s` is what is redacted, else the whole match."""


TOKEN_FORMATS: tuple[TokenFormat, ...] = (
    TokenFormat("gitleaks:huggingface-access-token", ("hf_",), _START + r"hf_[A-Za-z0-9]{20,}"),
    TokenFormat("gitleaks:huggingface-organization-api-token", ("api_org_",), _START + r"api_org_[A-Za-z]{30,}"),
    TokenFormat(
        "gitleaks:github-pat, github-oauth, github-app-token, github-refresh-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _START + r"gh[pousr]_[A-Za-z0-9]{20,}",
    ),
    TokenFormat("gitleaks:github-fine-grained-pat", ("github_pat_",), _START + r"github_pat_[A-Za-z0-9_]{20,}"),
    TokenFormat(
        "gitleaks:gitlab-pat, gitlab-deploy-token, gitlab-runner-authentication-token, gitlab-ptt, gitlab-*",
        ("gl",),
        _START + r"gl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent|ffct)-[A-Za-z0-9_-]{20,}",
    ),
    TokenFormat("gitleaks:gitlab-rrt", ("GR1348941",), _START + r"GR1348941[A-Za-z0-9_-]{20,}"),
    TokenFormat(
        "gitleaks:openai-api-key, anthropic-api-key, anthropic-admin-api-key (sk-, sk-proj-, sk-ant-)",
        ("sk-",),
        _START_DASH + r"sk-[A-Za-z0-9_-]{20,}",
    ),
    TokenFormat(
        "gitleaks:stripe-access-token",
        ("k_live_", "k_test_", "k_prod_"),
        _START + r"[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,}",
    ),
    TokenFormat(
        "vendor:Stripe webhook signing secret (docs.stripe.com/webhooks)",
        ("whsec_",),
        _START + r"whsec_[A-Za-z0-9+/=]{20,}",
    ),
    TokenFormat(
        "gitleaks:slack-bot-token, slack-user-token, slack-app-token, slack-legacy-*",
        ("xox", "xapp-"),
        r"(?<![A-Za-z0-9-])(?:xox[abposre]|xapp)-[A-Za-z0-9-]{10,}",
    ),
    TokenFormat(
        "gitleaks:aws-access-token",
        ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA", "A3T"),
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    TokenFormat("gitleaks:gcp-api-key", ("AIza",), _START + r"AIza[0-9A-Za-z_-]{30,}"),
    TokenFormat("vendor:Google OAuth access token (ya29.)", ("ya29.",), _START + r"ya29\.[0-9A-Za-z_-]{20,}"),
    TokenFormat("gitleaks:twilio-api-key", ("SK",), _START + r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"),
    TokenFormat("gitleaks:sendgrid-api-token", ("SG.",), _START + r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    TokenFormat("gitleaks:npm-access-token", ("npm_",), _START + r"npm_[A-Za-z0-9]{30,}"),
    TokenFormat("gitleaks:pypi-upload-token", ("pypi-",), _START + r"pypi-[A-Za-z0-9_-]{40,}"),
    TokenFormat("gitleaks:databricks-api-token", ("dapi",), _START + r"dapi[0-9a-f]{32}"),
    TokenFormat("vendor:Replicate API token (r8_)", ("r8_",), _START + r"r8_[A-Za-z0-9]{30,}"),
    TokenFormat(
        "gitleaks:shopify-access-token, shopify-custom-access-token, shopify-private-app-access-token, "
        "shopify-shared-secret",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        _START + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
    ),
    TokenFormat(
        "gitleaks:jwt", ("eyJ",), r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
    ),
    TokenFormat("gitleaks:grafana-api-key", ("eyJrIjoi",), _START + r"eyJrIjoi[A-Za-z0-9]{40,}={0,3}"),
    TokenFormat(
        "gitleaks:grafana-cloud-api-token, grafana-service-account-token",
        ("glc_", "glsa_"),
        _START + r"(?:glc_[A-Za-z0-9+/]{32,}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})",
    ),
    TokenFormat(
        "gitleaks:vault-service-token, vault-batch-token (and recovery tokens)",
        ("hvs.", "hvb.", "hvr."),
        _START + r"hv[sbr]\.[A-Za-z0-9_-]{20,}",
    ),
    TokenFormat(
        "gitleaks:telegram-bot-api-token (without the name beside it: the shape is distinctive)",
        (":A",),
        r"(?<![0-9])[0-9]{5,16}:A[A-Za-z0-9_-]{34}(?![A-Za-z0-9_-])",
    ),
    TokenFormat(
        "gitleaks:azure-ad-client-secret",
        ("Q~",),
        r"(?<![A-Za-z0-9_~.])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
    ),
    TokenFormat(
        "gitleaks:age-secret-key", ("AGE-SECRET-KEY-1",), r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"
    ),
    TokenFormat("gitleaks:atlassian-api-token", ("ATATT3",), _START + r"ATATT3[A-Za-z0-9_=-]{40,}"),
    TokenFormat(
        "gitleaks:digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token",
        ("_v1_",),
        _START + r"do[opr]_v1_[a-f0-9]{64}",
    ),
    TokenFormat("vendor:Groq API key (console.groq.com/keys)", ("gsk_",), _START + r"gsk_[A-Za-z0-9]{40,}"),
    TokenFormat(
        "vendor:LangSmith API key (docs.smith.langchain.com, lsv2_pt_/lsv2_sk_)",
        ("lsv2_",),
        _START + r"lsv2_(?:pt|sk)_[A-Za-z0-9_]{20,}",
    ),
    TokenFormat(
        "gitleaks:mailgun-private-api-token (without the name beside it)",
        ("key-",),
        _START_DASH + r"key-[a-f0-9]{32}(?![A-Za-z0-9])",
    ),
    TokenFormat("gitleaks:mailgun-pub-key", ("pubkey-",), _START_DASH + r"pubkey-[a-f0-9]{32}(?![A-Za-z0-9])"),
    TokenFormat("gitleaks:perplexity-api-key", ("pplx-",), _START_DASH + r"pplx-[A-Za-z0-9]{40,}"),
    TokenFormat("gitleaks:1password-service-account-token", ("ops_eyJ",), _START + r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}"),
    TokenFormat("gitleaks:adobe-client-secret", ("p8e-",), _START_DASH + r"p8e-[A-Za-z0-9]{32}"),
    TokenFormat("gitleaks:alibaba-access-key-id", ("LTAI",), _START + r"LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])"),
    TokenFormat(
        "gitleaks:artifactory-api-key, artifactory-reference-token",
        ("AKCp", "cmVmd"),
        _START + r"(?:AKCp[A-Za-z0-9]{69}|cmVmd[A-Za-z0-9]{59})",
    ),
    TokenFormat("gitleaks:clojars-api-token", ("CLOJARS_",), _START + r"CLOJARS_[A-Za-z0-9]{60}"),
    TokenFormat("gitleaks:cloudflare-origin-ca-key", ("v1.0-",), _START + r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    TokenFormat("gitleaks:doppler-api-token", ("dp.pt.",), _START + r"dp\.pt\.[A-Za-z0-9]{43}"),
    TokenFormat("gitleaks:duffel-api-token", ("duffel_",), _START + r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}"),
    TokenFormat("gitleaks:dynatrace-api-token", ("dt0c01.",), _START + r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    TokenFormat("gitleaks:easypost-api-token", ("EZAK", "EZTK"), _START + r"EZ[AT]K[A-Za-z0-9]{54}"),
    TokenFormat("gitleaks:facebook-page-access-token", ("EAAM", "EAAC"), _START + r"EAA[MC][A-Za-z0-9]{100,}"),
    TokenFormat(
        "gitleaks:flutterwave-secret-key, flutterwave-encryption-key",
        ("FLWSECK_TEST-",),
        _START + r"FLWSECK_TEST-[a-hA-H0-9]{12,32}(?:-X)?",
    ),
    TokenFormat(
        "gitleaks:flyio-access-token",
        ("fo1_", "fm1", "fm2_"),
        _START + r"(?:fo1_[A-Za-z0-9_-]{43}|fm1[ar]_[A-Za-z0-9+/]{100,}={0,3}|fm2_[A-Za-z0-9+/]{100,}={0,3})",
    ),
    TokenFormat("gitleaks:frameio-api-token", ("fio-u-",), _START + r"fio-u-[A-Za-z0-9_=-]{64}"),
    TokenFormat(
        "gitleaks:harness-api-key",
        ("pat.", "sat."),
        _START + r"[ps]at\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
    ),
    TokenFormat(
        "gitleaks:hashicorp-tf-api-token", (".atlasv1.",), _START + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}"
    ),
    TokenFormat("gitleaks:heroku-api-key-v2", ("HRKU-AA",), _START + r"HRKU-AA[A-Za-z0-9_-]{58}"),
    TokenFormat("gitleaks:infracost-api-token", ("ico-",), _START_DASH + r"ico-[A-Za-z0-9]{32}"),
    TokenFormat("gitleaks:intra42-client-secret", ("s-s4t2",), _START_DASH + r"s-s4t2(?:ud|af)-[a-f0-9]{64}"),
    TokenFormat("gitleaks:linear-api-key", ("lin_api_",), _START + r"lin_api_[A-Za-z0-9]{40}"),
    TokenFormat("gitleaks:maxmind-license-key", ("_mmk",), _START + r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk"),
    TokenFormat("gitleaks:notion-api-token", ("ntn_",), _START + r"ntn_[0-9]{11}[A-Za-z0-9]{35}"),
    TokenFormat("gitleaks:openshift-user-token", ("sha256~",), _START + r"sha256~[A-Za-z0-9_-]{43}"),
    TokenFormat(
        "gitleaks:planetscale-api-token, planetscale-oauth-token, planetscale-password",
        ("pscale_",),
        _START + r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}",
    ),
    TokenFormat("gitleaks:postman-api-token", ("PMAK-",), _START + r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    TokenFormat("gitleaks:prefect-api-token", ("pnu_",), _START + r"pnu_[A-Za-z0-9]{36}"),
    TokenFormat("gitleaks:pulumi-api-token", ("pul-",), _START_DASH + r"pul-[a-f0-9]{40}"),
    TokenFormat("gitleaks:readme-api-token", ("rdme_",), _START + r"rdme_[a-z0-9]{70}"),
    TokenFormat("gitleaks:rubygems-api-token", ("rubygems_",), _START + r"rubygems_[a-f0-9]{48}"),
    TokenFormat("gitleaks:scalingo-api-token", ("tk-us-",), _START_DASH + r"tk-us-[A-Za-z0-9_-]{48}"),
    TokenFormat("gitleaks:sendinblue-api-token", ("xkeysib-",), _START_DASH + r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    TokenFormat(
        "gitleaks:sentry-user-token, sentry-org-token",
        ("sntryu_", "sntrys_"),
        _START + r"(?:sntryu_[a-f0-9]{64}|sntrys_eyJ[A-Za-z0-9+/=_]{40,})",
    ),
    TokenFormat("gitleaks:settlemint-*-access-token", ("sm_",), _START + r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}"),
    TokenFormat("gitleaks:shippo-api-token", ("shippo_",), _START + r"shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    TokenFormat(
        "gitleaks:square-access-token (and sq0csp- secrets)",
        ("EAAA", "sq0atp-", "sq0csp-"),
        _START + r"(?:EAAA|sq0atp-|sq0csp-)[A-Za-z0-9_-]{22,60}",
    ),
    TokenFormat("gitleaks:sourcegraph-access-token", ("sgp_",), _START + r"sgp_[A-Za-z0-9_]{40,}"),
    TokenFormat("gitleaks:octopus-deploy-api-key", ("API-",), _START_DASH + r"API-[A-Z0-9]{26}(?![A-Za-z0-9])"),
    TokenFormat(
        "gitleaks:mailchimp-api-key (without the name beside it)", ("-us",), _START + r"[a-f0-9]{32}-us[0-9]{1,2}"
    ),
    TokenFormat(
        "gitleaks:new-relic-user-api-key, new-relic-insert-key, new-relic-browser-api-token",
        ("NRAK-", "NRII-", "NRJS-"),
        _START_DASH + r"(?:NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9-]{32}|NRJS-[a-f0-9]{19})",
    ),
    TokenFormat("gitleaks:typeform-api-token", ("tfp_",), _START + r"tfp_[A-Za-z0-9_.=-]{59}"),
    TokenFormat(
        "gitleaks:yandex-api-key (without the name beside it)", ("AQVN",), _START + r"AQVN[A-Za-z0-9_-]{35,38}"
    ),
    TokenFormat(
        "vendor:NVIDIA NGC / build.nvidia.com API key (nvapi-)", ("nvapi-",), _START_DASH + r"nvapi-[A-Za-z0-9_-]{40,}"
    ),
    TokenFormat(
        "vendor:Docker Hub personal access token (dckr_pat_)", ("dckr_pat_",), _START + r"dckr_pat_[A-Za-z0-9_-]{20,}"
    ),
    TokenFormat("vendor:xAI API key (xai-)", ("xai-",), _START_DASH + r"xai-[A-Za-z0-9]{40,}"),
    TokenFormat("vendor:Supabase access token (sbp_)", ("sbp_",), _START + r"sbp_[a-f0-9]{40}"),
    TokenFormat(
        "vendor:Tailscale keys (tskey-auth-, tskey-api-, ...)",
        ("tskey-",),
        _START_DASH + r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9-]{16,}",
    ),
    TokenFormat(
        "gitleaks:microsoft-teams-webhook",
        ("webhookb2/",),
        r"webhook\.office\.com/webhookb2/(?P<s>[A-Za-z0-9@/-]{20,512})",
    ),
    TokenFormat(
        "gitleaks:slack-webhook-url",
        ("hooks.slack.com",),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9/_+-]{1,512})",
    ),
    TokenFormat(
        "vendor:Discord webhook URL",
        ("/api/webhooks/",),
        r"discord(?:app)?\.com/api/webhooks/(?P<s>[0-9]{1,30}/[A-Za-z0-9_-]{1,256})",
    ),
    TokenFormat(
        "gitleaks:private-key (every PEM block: from BEGIN to END, or to the next '-----' or the end if END is cut off)",
        ("-----BEGIN",),
        r"-----BEGIN[ A-Z0-9_]{1,60}-----(?P<s>[^-]*(?:-(?!----)[^-]*)*)",
    ),
)
"""Every vendor token format ktrace redacts wherever it appears in a string."""
