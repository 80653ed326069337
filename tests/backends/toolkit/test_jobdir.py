"""Where jobs live: one rule for run, jobs, logs, rm, prune and fit()."""
from __future__ import annotations

from smdist_launcher.backends.toolkit.jobdir import jobs_root


def test_jobs_root_is_found_from_any_subfolder_of_the_project(tmp_path, monkeypatch):
    monkeypatch.delenv("SMDIST_JOBS_DIR", raising=False)
    project = tmp_path / "project"
    deep = project / "src" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert jobs_root() == deep / ".smdist" / "jobs"          # nothing yet: the first run creates it here
    (project / ".smdist" / "jobs").mkdir(parents=True)
    assert jobs_root() == project / ".smdist" / "jobs"       # then every subfolder finds it, as git finds .git
    monkeypatch.setenv("SMDIST_JOBS_DIR", "~/elsewhere")
    assert jobs_root().name == "elsewhere" and "~" not in str(jobs_root())
    assert jobs_root(tmp_path / "explicit") == tmp_path / "explicit"


def test_a_job_name_with_a_trailing_newline_is_refused():
    import pytest

    from smdist_launcher.backends.toolkit.jobdir import check_job_name

    assert check_job_name("job-1") == "job-1"
    for bad in ("job\n", "job-", "a" * 64, "-job"):
        with pytest.raises(ValueError, match="job_name"):
            check_job_name(bad)
