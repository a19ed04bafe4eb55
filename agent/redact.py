"""Secrets never appear in anything a candidate can print: every message the harness returns and every text the
store writes goes through scrub(), which replaces the values of this process's secrets with a marker.

A secret is the value of any environment variable whose name says so (KEY, TOKEN, SECRET, PASSWORD, ...; the
OPENAI_/AWS_/... families), or whose value looks like a credential whatever its name (a known key prefix, or a long
unbroken run of letters and digits). The sandbox already keeps them out of a candidate's environment and out of its
view of the parent (/proc, HOME); this is the last fence, for whatever gets out anyway.
"""

from __future__ import annotations

import os
import re

MARK = "[redacted]"
_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.I)
_FAMILIES = ("OPENAI_", "ANTHROPIC_", "AWS_", "AZURE_", "GOOGLE_", "GITHUB_", "GH_", "HF_", "HUGGING")
_LOOKS_LIKE = re.compile(r"^(sk-|sk_|pk_|rk_|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abpr]-|AKIA|ASIA|hf_|AIza)\S{8,}$"
                         r"|^[A-Za-z0-9_\-+=.]{32,}$")
_MIN_LEN = 6


def secrets_in(environ: dict[str, str] | None = None) -> list[str]:
    """The values to scrub, longest first (a secret that contains another is replaced whole)."""
    env = os.environ if environ is None else environ
    found = set()
    for name, value in env.items():
        value = value.strip()
        if len(value) < _MIN_LEN or "/" in value and not _NAME.search(name):
            continue
        if _NAME.search(name) or name.upper().startswith(_FAMILIES) or _LOOKS_LIKE.match(value):
            found.add(value)
    return sorted(found, key=len, reverse=True)


def scrub(text: str, environ: dict[str, str] | None = None) -> str:
    """`text` with every secret value replaced by [redacted]."""
    if not text:
        return text
    for value in secrets_in(environ):
        if value in text:
            text = text.replace(value, MARK)
    return text
