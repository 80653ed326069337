"""Which environment keys hold secrets: the one definition, used by plans (SDK) and the runtime alike."""
from __future__ import annotations

import re

REDACTED = "***REDACTED***"
SECRET_KEY_PATTERN = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|(^|_)KEY$)", re.I)


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY_PATTERN.search(key))
