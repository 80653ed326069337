"""tests/skip_policy.py: with $SMDIST_TEST_NO_SKIPS (or CI=true) a run fails when a test other than a GPU one skips."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest

@pytest.mark.gpu
def test_gpu():
    pytest.skip("needs CUDA GPUs")

def test_runs():
    pass
"""
OTHER_SKIP = "\ndef test_other():\n    pytest.skip('the venv is not built')\n"


def _run(pytester: pytest.Pytester, source: str, **env: str) -> pytest.RunResult:
    pytester.makepyfile(test_suite=source)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs CUDA GPUs\n")
    for key in ("CI", "SMDIST_TEST_NO_SKIPS"):
        pytester._monkeypatch.delenv(key, raising=False)
    pytester._monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the installed plugins are not needed here
    for key, value in env.items():
        pytester._monkeypatch.setenv(key, value)
    return pytester.runpytest_inprocess("-p", "skip_policy", "-p", "no:cacheprovider")


def test_a_gpu_skip_passes(pytester: pytest.Pytester) -> None:
    assert _run(pytester, SUITE, SMDIST_TEST_NO_SKIPS="1").ret == 0


def test_any_other_skip_fails_the_run_in_ci(pytester: pytest.Pytester) -> None:
    result = _run(pytester, SUITE + OTHER_SKIP, CI="true")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 test(s) skipped that are not GPU tests*",
                                 "*test_suite.py::test_other: *the venv is not built"])


def test_outside_ci_a_skip_is_only_reported(pytester: pytest.Pytester) -> None:
    assert _run(pytester, SUITE + OTHER_SKIP).ret == 0


@pytest.mark.parametrize("source", [
    # a whole module skipped while it is collected: no test report at all
    "import pytest\npytest.importorskip('no_such_module_smdist')\n\ndef test_never():\n    pass\n",
    # "gpu" as a parametrize id (or a folder's name) is a keyword of the test, not its `gpu` marker
    "import pytest\n\n@pytest.mark.parametrize('device', ['gpu'])\ndef test_device(device):\n"
    "    pytest.skip('the venv is not built')\n",
], ids=["module-skip", "gpu-param-id"])
def test_a_skip_that_is_not_a_gpu_test_is_caught(pytester: pytest.Pytester, source: str) -> None:
    result = _run(pytester, source, SMDIST_TEST_NO_SKIPS="1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 test(s) skipped that are not GPU tests*"])
