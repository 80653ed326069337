"""Local mode addressing: host names in argv/env become each simulated host's loopback address."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable

HOST_MAP_ENV = "SMDIST_HOST_MAP"
# The worker's TF_CONFIG and the parameter server's (plan/tf_config.py; the planner's PS_SERVER_TF_CONFIG_ENV).
PS_TF_CONFIG_ENV = "SMDIST_PS_TF_CONFIG"
TF_CONFIG_KEYS = ("TF_CONFIG", PS_TF_CONFIG_ENV)
# algo-1, algo-1:8; a token may be a comma list of these, or KEY=<that>.
_ITEM = re.compile(r"^(?P<host>[^:,=\s]+)(?P<slots>:\d+)?$")


def parse_host_map(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"${HOST_MAP_ENV} must be a JSON object {{host: address}}, got {text!r} ({e})") from e
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ValueError(f"${HOST_MAP_ENV} must map host names to address strings, got {text!r}")
    return data


def _map_list(value: str, host_map: dict[str, str]) -> str | None:
    """`algo-1:2,algo-2:2` -> addresses, or None when any item is not a known host."""
    out = []
    for item in value.split(","):
        m = _ITEM.fullmatch(item)
        if not m or m.group("host") not in host_map:
            return None
        out.append(host_map[m.group("host")] + (m.group("slots") or ""))
    return ",".join(out)


def map_token(token: str, host_map: dict[str, str]) -> str:
    """Replace host names in one argv token or env value; anything else is returned unchanged."""
    if not host_map or not token:
        return token
    mapped = _map_list(token, host_map)
    if mapped is not None:
        return mapped
    key, eq, value = token.partition("=")
    if eq and value:
        mapped = _map_list(value, host_map)
        if mapped is not None:
            return f"{key}={mapped}"
    return token


def map_tf_config(text: str, host_map: dict[str, str]) -> str:
    """TF_CONFIG's cluster addresses (`algo-1:2223`) -> `127.0.0.2:2223`; text that is not a TF_CONFIG is kept."""
    if not host_map:
        return text
    try:
        data = json.loads(text)
    except ValueError:
        return text
    cluster = data.get("cluster") if isinstance(data, dict) else None
    if not isinstance(cluster, dict):
        return text
    data["cluster"] = {job: [map_token(a, host_map) if isinstance(a, str) else a for a in addrs]
                       if isinstance(addrs, list) else addrs for job, addrs in cluster.items()}
    return json.dumps(data)


def map_env_value(key: str, value: str, host_map: dict[str, str]) -> str:
    """One env value: TF_CONFIG-shaped keys are JSON (names inside the cluster), the rest are tokens."""
    return map_tf_config(value, host_map) if key in TF_CONFIG_KEYS else map_token(value, host_map)


def map_argv(argv: Iterable[str], host_map: dict[str, str]) -> list[str]:
    return [map_token(t, host_map) for t in argv]


def map_env(env: dict[str, str], host_map: dict[str, str], *, skip_prefix: str = "SM_") -> dict[str, str]:
    """SM_* keep host names (that is what scripts see on SageMaker); addresses go to MASTER_ADDR and friends."""
    return {k: (v if k.startswith(skip_prefix) or k == "CURRENT_HOST" else map_token(v, host_map))
            for k, v in env.items()}


def reverse_host_map(host_map: dict[str, str]) -> dict[str, str]:
    return {addr: host for host, addr in host_map.items()}
