"""Masking of secret option values: the one place that decides what is a secret and how it is hidden.

Flink's rule (``GlobalConfiguration.isSensitive``): a key is sensitive if its
lower-case form contains one of ``SENSITIVE_KEYS``; its value is shown as
``HIDDEN_CONTENT``.  Table options and SET keys go through :func:`mask_options`
wherever they are shown (SHOW CREATE TABLE, SET listings), and free text that
may quote SQL (error messages with the offending line, job logs served by the
job manager) through :func:`redact`, which hides the value of every
``'<sensitive key>' = '<value>'`` pair in it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Flink 2.3 GlobalConfiguration.SENSITIVE_KEYS and HIDDEN_CONTENT
SENSITIVE_KEYS = ("password", "secret", "fs.azure.account.key", "apikey", "api-key", "auth-params",
                  "service-key", "token", "basic-auth", "jaas.config", "http-headers")
HIDDEN_CONTENT = "******"

# a SQL option pair: 'key' = 'value', with '' escaping a quote inside either literal
_PAIR = re.compile(r"(?P<head>'(?P<key>(?:[^']|'')*)'\s*=\s*)'(?:[^']|'')*'")


def is_sensitive(key: str) -> bool:
    lower = key.lower()
    return any(k in lower for k in SENSITIVE_KEYS)


def mask_value(key: str, value: str) -> str:
    return HIDDEN_CONTENT if is_sensitive(key) else value


def mask_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options with every sensitive value replaced by ``HIDDEN_CONTENT``, in their order."""
    return {k: mask_value(k, v) for k, v in options.items()}


def redact(text: str) -> str:
    """``text`` with the value of each ``'<sensitive key>' = '...'`` pair hidden (everything else kept)."""
    if "'" not in text:
        return text

    def hide(m: re.Match[str]) -> str:
        return f"{m['head']}'{HIDDEN_CONTENT}'" if is_sensitive(m["key"].replace("''", "'")) else m[0]

    return _PAIR.sub(hide, text)
