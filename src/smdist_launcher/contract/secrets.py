"""Which keys hold secrets, and how their values are kept out of everything but the user's script.

The one definition, used by plans (SDK) and the runtime alike (stdlib only). A key is secret when one of its words
(split at ``_``, ``-``, ``.`` and camelCase) is token, secret, password, credential(s), apikey, ... or it ends in
``key`` after ``api``/``private``/``access``/``secret`` or alone (``HF_TOKEN``, ``hub_token``, ``apiKey``,
``db_password``, ``SECRET_KEY``); ``max_tokens`` or ``TOKENIZERS_PARALLELISM`` are not.

Secret hyperparameters: rendered plans, job records, logs and failure records hold ``REDACTED`` in their place
(in ``hyperparameters``, ``sagemaker_hyperparameters`` and the value token after ``--<key>`` in argv). The real values
reach the host runtime only through ``hyperparameters.json`` written by SageMaker, or in local mode through the
runtime's process environment (``SECRET_HPS_ENV``), which the runtime merges into the host's hyperparameters.json for
the script and takes out again when the host ends.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "***REDACTED***"
# Local mode: {key: SageMaker-encoded value} of the secret hyperparameters, in the host runtime's environment only.
SECRET_HPS_ENV = "SMDIST_SECRET_HYPERPARAMETERS"

_SECRET_WORDS = frozenset({
    "token", "secret", "secrets", "password", "passwd", "passphrase", "credential", "credentials", "apikey",
    "authorization", "cookie",
})
_KEY_QUALIFIERS = frozenset({"api", "private", "access", "secret", "signing", "encryption", "license", "ssh"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def _words(key: str) -> list[str]:
    return [w.lower() for w in _SPLIT.split(_CAMEL.sub("_", key)) if w]


def is_secret_key(key: str) -> bool:
    words = _words(str(key))
    if any(w in _SECRET_WORDS for w in words):
        return True
    # "KEY" alone or after a qualifier (API_KEY, private_key, SECRET_KEY); not sort_key, key_size, num_keys
    return any(w == "key" and (i == 0 and len(words) == 1 or i > 0 and words[i - 1] in _KEY_QUALIFIERS)
               for i, w in enumerate(words))


def redact_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with the value of every secret key replaced by REDACTED."""
    return {k: (REDACTED if is_secret_key(k) else v) for k, v in values.items()}


def _flag(key: str) -> str:
    return f"-{key}" if len(key) == 1 else f"--{key}"  # the toolkit's to_cmd_args spelling


def _flags(key: str) -> set[str]:
    """Both spellings of a key's flag: the toolkit's and SDK v3's (``--<key>`` even for one character)."""
    return {_flag(key), f"--{key}"}


def redact_argv(argv: Iterable[str], keys: Iterable[str]) -> list[str]:
    """argv with the value token after ``--<key>`` replaced by REDACTED, for each secret key in ``keys``.

    Read left to right as the script's parser reads its arguments: the flag of any key in ``keys`` takes the next
    token as its value, and that value is no flag itself. So a value that reads like a secret flag (``--note
    --hub_token --hub_token s3cr3t``) neither takes the redaction in place of the real value (which would leave
    the secret shown) nor is restored as the secret."""
    names = [str(k) for k in keys]
    secret = {f for k in names if is_secret_key(k) for f in _flags(k)}
    flags = {f for k in names for f in _flags(k)}
    out = list(argv)
    i = 0
    while i < len(out) - 1:
        if out[i] in flags:
            if out[i] in secret:
                out[i + 1] = REDACTED
            i += 2
        else:
            i += 1
    return out


def restore_argv(argv: Iterable[str], values: Mapping[str, str]) -> list[str]:
    """argv with each REDACTED token after ``--<key>`` replaced by ``values[key]`` (the script's argument text)."""
    by_flag = {f: v for k, v in values.items() for f in _flags(k)}
    out = list(argv)
    for i in range(1, len(out)):
        if out[i] == REDACTED and out[i - 1] in by_flag:
            out[i] = by_flag[out[i - 1]]
    return out


def secret_hyperparameters(raw: Mapping[str, str]) -> dict[str, str]:
    """The secret entries of a hyperparameters.json mapping (SageMaker's encoding) that hold a real value."""
    return {k: v for k, v in raw.items() if is_secret_key(k) and not _is_redacted(v)}


def _is_redacted(value: Any) -> bool:
    if value == REDACTED:
        return True
    try:
        return json.loads(value) == REDACTED if isinstance(value, str) else False
    except ValueError:
        return False


def redact_hyperparameters_raw(raw: Mapping[str, str]) -> dict[str, str]:
    """hyperparameters.json as it may be stored: secret values replaced (JSON-encoded marker, still decodable)."""
    return {k: (json.dumps(REDACTED) if is_secret_key(k) else v) for k, v in raw.items()}


def encode_secret_env(raw: Mapping[str, str]) -> str:
    return json.dumps(secret_hyperparameters(raw), sort_keys=True)


def decode_secret_env(text: str | None) -> dict[str, str]:
    """The SECRET_HPS_ENV value; anything but a JSON object of strings is ignored (it is never shown)."""
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, str) and is_secret_key(str(k))}


def redact_plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    """A launch plan (dict form) as it may be shown or stored: secret env values and secret hyperparameters redacted,
    in the plan's maps and in every host's argv. The caller's dict is not changed."""
    out = dict(plan)
    hps = dict(plan.get("hyperparameters") or {})
    sm_hps = dict(plan.get("sagemaker_hyperparameters") or {})
    out["environment"] = redact_mapping(plan.get("environment") or {})
    if "hyperparameters" in plan:
        out["hyperparameters"] = redact_mapping(hps)
    if "sagemaker_hyperparameters" in plan:
        out["sagemaker_hyperparameters"] = redact_hyperparameters_raw(sm_hps)
    keys = [*hps, *sm_hps]
    out["hosts"] = [{**h, "env": _redact_host_env(h.get("env") or {}),
                     **({"argv": redact_argv(h["argv"], keys)} if "argv" in h else {})}
                    for h in plan.get("hosts", [])]
    return out


# SDK v3's jobs: every host's environment carries the hyperparameters as one JSON object too
# (contract/v3_hyperparameters.py)
_HPS_ENV = "SM_HPS"


def _redact_host_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """A host's environment: secret variables redacted, and in SM_HPS the secret hyperparameters' values (the object's
    order kept: the runtime puts the real values back from hyperparameters.json, on any backend)."""
    out = redact_mapping(env)
    hps = out.get(_HPS_ENV)
    if isinstance(hps, str) and hps != REDACTED:
        out[_HPS_ENV] = redact_hps_env(hps)
    return out


def redact_hps_env(text: str) -> str:
    """SM_HPS with each secret member's value REDACTED; unchanged when it holds none; REDACTED whole when it is not
    a JSON object (not what the planner writes: shown as nothing rather than guessed at)."""
    try:
        data = json.loads(text)
    except ValueError:
        return REDACTED
    if not isinstance(data, dict):
        return REDACTED
    if not any(is_secret_key(str(k)) for k in data):
        return text
    return json.dumps(redact_mapping(data))
