"""The resilience key's schema: regexes checked, one capture group at most, unique monitor names, bounded values."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from smdist_launcher.jobspec.resilience import Resilience


def test_defaults_retry_only_what_a_retry_can_cure() -> None:
    r = Resilience()
    assert r.retry_on == "curable" and r.process_restarts == 0 and r.log_monitoring == []


def test_monitors_are_checked() -> None:
    ok = Resilience.model_validate({"log_monitoring": [{"name": "step", "pattern": r"step (\d+)",
                                                         "expected_every_s": 60}]})
    assert ok.log_monitoring[0].captures_step
    for bad in ({"name": "s", "pattern": "step (", "expected_every_s": 1},
                {"name": "s", "pattern": r"(a)(b)", "expected_every_s": 1},
                {"name": "s", "pattern": "x", "expected_every_s": 0}):
        with pytest.raises(ValidationError):
            Resilience.model_validate({"log_monitoring": [bad]})
    with pytest.raises(ValidationError, match="unique"):
        Resilience.model_validate({"log_monitoring": [{"name": "a", "pattern": "x", "expected_every_s": 1}] * 2})
