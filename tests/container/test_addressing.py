import json

import pytest

from smdist_launcher.container.addressing import map_argv, map_env, map_token, parse_host_map, reverse_host_map

HM = {"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}


@pytest.mark.parametrize("token,expected", [
    ("algo-1", "127.0.0.2"),
    ("algo-2:8", "127.0.0.3:8"),
    ("algo-1:2,algo-2:2", "127.0.0.2:2,127.0.0.3:2"),
    ("SMDATAPARALLEL_SERVER_ADDR=algo-1", "SMDATAPARALLEL_SERVER_ADDR=127.0.0.2"),
    ("algo-10", "algo-10"),  # not a host of this job
    ("algo-1,unknown", "algo-1,unknown"),  # a list is mapped only when every item is a host
    ("train.py", "train.py"),
    ("--algo-1", "--algo-1"),
    ("", ""),
])
def test_map_token(token, expected):
    assert map_token(token, HM) == expected


def test_map_argv_and_env():
    assert map_argv(["torchrun", "--master_addr", "algo-1", "t.py"], HM) == ["torchrun", "--master_addr",
                                                                            "127.0.0.2", "t.py"]
    env = map_env({"MASTER_ADDR": "algo-1", "SM_CURRENT_HOST": "algo-1", "CURRENT_HOST": "algo-2"}, HM)
    assert env == {"MASTER_ADDR": "127.0.0.2", "SM_CURRENT_HOST": "algo-1", "CURRENT_HOST": "algo-2"}
    assert map_token("algo-1", {}) == "algo-1"


def test_parse_host_map_errors():
    assert parse_host_map(None) == {}
    assert reverse_host_map(parse_host_map('{"algo-1": "127.0.0.2"}')) == {"127.0.0.2": "algo-1"}
    with pytest.raises(ValueError, match="SMDIST_HOST_MAP must be a JSON object"):
        parse_host_map("algo-1=1")
    with pytest.raises(ValueError, match="must map host names to address strings"):
        parse_host_map('{"algo-1": 2}')


def test_map_tf_config_maps_cluster_addresses_only():
    from smdist_launcher.container.addressing import map_env_value, map_tf_config

    text = json.dumps({"cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"]},
                       "task": {"type": "ps", "index": 1}, "environment": "cloud"})
    mapped = json.loads(map_tf_config(text, HM))
    assert mapped["cluster"] == {"master": ["127.0.0.2:2222"], "ps": ["127.0.0.2:2223", "127.0.0.3:2223"]}
    assert mapped["task"] == {"type": "ps", "index": 1}
    assert map_tf_config(text, {}) == text and map_tf_config("not json", HM) == "not json"
    assert json.loads(map_env_value("SMDIST_PS_TF_CONFIG", text, HM)) == mapped
    assert map_env_value("MASTER_ADDR", "algo-2", HM) == "127.0.0.3"
