"""Keys AWS's library takes in ``smp.init(config)`` beyond the SDK's parameter list (static_mode, passed by AWS's
sharded-data-parallel GPT-2 example): accepted with one warning; the 2-rank smp.init run is in test_v1_state_mod.py."""
from __future__ import annotations

import warnings

import pytest

from smdist_launcher.smp.v1 import notices
from smdist_launcher.smp.v1.config import V1Config, parse_v1


@pytest.mark.parametrize("value", [True, False, 1])
def test_static_mode_is_accepted_with_one_warning(value: object) -> None:
    notices._said.discard("param-static_mode")
    with pytest.warns(UserWarning, match="static_mode.*no effect here"):
        cfg = parse_v1({"static_mode": value, "sharded_data_parallel_degree": 2, "ddp": True})
    assert cfg == V1Config(sharded_data_parallel_degree=2, ddp=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        parse_v1({"static_mode": value})
