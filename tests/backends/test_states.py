"""Job states and phases: stdlib-only modules, so the CLI and every reader of a job record import them cheaply."""
from __future__ import annotations

import subprocess
import sys


def test_states_and_phases_import_without_pydantic() -> None:
    code = ("import sys\nfrom smdist_launcher.backends.states import JobState\n"
            "from smdist_launcher.backends.phases import Phase\n"
            "import smdist_launcher.cli.jobs, smdist_launcher.cli.prune\n"
            "assert 'pydantic' not in sys.modules, 'pydantic was imported'\n"
            "assert JobState('Completed').is_terminal and Phase('running') is Phase.RUNNING\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_api_reexports_the_one_job_state() -> None:
    from smdist_launcher.backends import api, states

    assert api.JobState is states.JobState and api.TERMINAL_STATES is states.TERMINAL_STATES
