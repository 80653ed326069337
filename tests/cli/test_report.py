"""`smdist report`: a failed 2-host job's folder as the local backend leaves it (record with two attempts, each host's
failure.json, a stack dump, a rank's exit note, the first attempt's kept failure, metrics, logs), built without
running anything, turned into one HTML page: what the page holds, that it escapes the job's text and loads nothing
from elsewhere, and that a real browser shows it with every plot."""
from __future__ import annotations

import json
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.records import JobRecord
from smdist_launcher.cli.main import main
from smdist_launcher.metrics.store import STORE_FILE, SYSTEM, MetricPoint, MetricWriter

from .report_browser import load_in_browser

HOSTILE = "<script>alert('pwned')</script>"  # a traceback or log line may hold anything


class PageParts(HTMLParser):
    """The tags the checks need: scripts, images, links, metas; and the text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.scripts, self.images, self.links, self.metas, self.text = 0, [], [], [], []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.scripts += tag == "script"
        if tag == "img":
            self.images.append(a.get("src") or "")
        if tag == "a":
            self.links.append(a.get("href") or "")
        if tag == "meta":
            self.metas.append(a)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def failed_job(root: Path, name: str = "report-demo") -> JobDir:
    """A job whose algo-2 rank 1 raised on its second attempt (algo-1 rank 0 its victim); the first attempt lost
    algo-2 outright."""
    job = JobDir.create(root, name)
    t0 = time.time() - 120
    hosts = {}
    for i, host in enumerate(("algo-1", "algo-2")):
        hosts[host] = {"exit_code": 1, "pid": 4000 + i, "gpus": [], "root": str(job.host_root(host))}
        job.log_file(host).write_text(f"[{host} r{i}] step 1 loss 0.{9 - i}\n[{host} r{i}] {HOSTILE}\n")
    record = JobRecord(job_name=name, job_id=name, job_dir=str(job.root), created=t0,
                       plan={"hosts": [{"name": "algo-1"}, {"name": "algo-2"}], "strategy": "torch_distributed",
                             "instance_count": 2, "processes_per_host": 1}, hosts=hosts)
    record.phases = {"created": [t0, t0 + 1], "staging": [t0 + 1, t0 + 3], "starting": [t0 + 3, t0 + 5],
                     "running": [t0 + 5, t0 + 60], "uploading": [t0 + 60, t0 + 62]}
    record.attempts = [
        {"attempt": 1, "cause": "host_lost", "reason": "host algo-2 failed first with exit code -9 (SIGKILL)",
         "decision": "retry", "why": "host_lost is retried (attempt 1 of 2)", "first_steps": {"0": 0, "1": 0}},
        {"attempt": 2, "cause": "script_error", "reason": "host algo-2, rank 1 failed first with exit code 1",
         "decision": "finish", "why": "script_error is not retried", "first_steps": {"0": 4, "1": 4}}]
    record.finish("Failed", "host algo-2, rank 1 failed first with exit code 1", now=t0 + 62)
    record.save(job.record_file)
    failures = {
        "algo-2": {"host": "algo-2", "rank": 1, "exit_code": 1, "time": int((t0 + 40) * 1e9), "likely_victim": False,
                   "traceback": ["Traceback (most recent call last):", '  File "train.py", line 7, in <module>',
                                 f"ValueError: a bad batch {HOSTILE}"]},
        "algo-1": {"host": "algo-1", "rank": 0, "exit_code": 1, "time": int((t0 + 41) * 1e9), "likely_victim": True,
                   "traceback": ["RuntimeError: Connection reset by peer"]}}
    for host, failure in failures.items():
        out = job.host_root(host) / "output"
        out.mkdir(parents=True)
        (out / "failure.json").write_text(json.dumps(failure))
    stacks = job.host_root("algo-1") / "run" / "stacks"
    stacks.mkdir(parents=True)
    (stacks / "4242.txt").write_text(json.dumps({"pid": 4242, "rank": 0, "host": "algo-1"}) + "\n"
                                     "Current thread 0x00007f (most recent call first):\n"
                                     '  File "train.py", line 9 in all_reduce_wait\n')
    (stacks / "4242.exit").write_text(json.dumps({"pid": 4242, "code": 1, "time_ns": int((t0 + 41) * 1e9)}))
    kept = job.root / "attempts" / "1" / "algo-2" / "opt" / "ml" / "output"  # the kept layout (toolkit/attempt/)
    kept.mkdir(parents=True)
    (kept / "failure.json").write_text(json.dumps({"host": "algo-2", "rank": 1, "exit_code": -9,
                                                   "signal": "SIGKILL", "traceback": []}))
    writer = MetricWriter(job.root / STORE_FILE)
    writer.write_many([MetricPoint("train:loss", 1.0 / (s + 1) + r / 10, t0 + 6 + s, f"algo-{r + 1}", r, s)
                       for s in range(8) for r in (0, 1)])
    writer.write_many([MetricPoint("CPUUtilization", 20.0 + 5 * s, t0 + 6 + s, host, kind=SYSTEM)
                       for s in range(4) for host in ("algo-1", "algo-2")])
    writer.close()
    return job


@pytest.fixture()
def page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    job = failed_job(tmp_path / "jobs")
    assert main(["report", "report-d", "--jobs-dir", str(tmp_path / "jobs")]) == 0  # a unique prefix names it
    written = Path(capsys.readouterr().out.strip())
    assert written == job.root / "report.html"
    return written


def test_the_page_holds_status_attempts_hosts_failure_and_metrics(page: Path) -> None:
    parts = PageParts(page.read_text())
    text = " ".join(" ".join(parts.text).split())
    assert "report-demo" in text and "Failed" in text
    assert "host_lost" in text and "script_error is not retried" in text  # both attempts
    # the diagnosis names the first real failure, not its victim, with the traceback; the victim is marked as one
    assert "host algo-2, rank 1 failed first with exit code 1" in text and "ValueError: a bad batch" in text
    assert "likely a victim" in text and "all_reduce_wait" in text  # algo-1's stack dump
    assert "Attempt 1" in text and "SIGKILL" in text  # the first attempt's kept failure
    assert "rank 0 (pid 4242): 1" in text  # algo-1's rank exit note
    assert "train:loss" in text and "CPUUtilization" in text
    assert len(parts.images) == 2 and all(src.startswith("data:image/png;base64,") for src in parts.images)


def test_the_page_is_inert_and_self_contained(page: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = page.read_text()
    parts = PageParts(source)
    assert parts.scripts == 0 and HOSTILE not in source  # the job's text is escaped, never markup
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in source
    csp = next(m["content"] for m in parts.metas if m.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert "http://" not in source and "https://" not in source  # nothing to fetch from elsewhere
    # each host's log, linked relative to the page: the link works where the page is, here or with --output
    assert sorted(parts.links) == ["logs/algo-1.log", "logs/algo-1.log", "logs/algo-2.log", "logs/algo-2.log"]
    elsewhere = tmp_path / "tickets" / "report.html"
    elsewhere.parent.mkdir()
    assert main(["report", "report-demo", "--jobs-dir", str(tmp_path / "jobs"), "--output", str(elsewhere)]) == 0
    capsys.readouterr()
    for href in PageParts(elsewhere.read_text()).links:
        assert (elsewhere.parent / href).resolve().is_file(), href


def test_a_headless_browser_shows_the_page_and_every_plot(page: Path, tmp_path: Path) -> None:
    seen = load_in_browser(page, tmp_path)
    assert seen.errors == [] and seen.broken == []
    assert seen.images == 2 and seen.title == "report-demo: Failed"


def test_an_unknown_job_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed_job(tmp_path / "jobs")
    assert main(["report", "no-such-job", "--jobs-dir", str(tmp_path / "jobs")]) == 2
    assert "no job named 'no-such-job'" in capsys.readouterr().err


def test_a_completed_job_without_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from .jobfolders import make_job

    job = make_job(tmp_path / "jobs", "fine-job", log="[algo-1 r0] done\n")
    out = tmp_path / "fine.html"
    assert main(["report", "fine-job", "--jobs-dir", str(tmp_path / "jobs"), "-o", str(out)]) == 0
    capsys.readouterr()
    parts = PageParts(out.read_text())
    text = " ".join(" ".join(parts.text).split())
    assert "Completed" in text and "Failure" not in text and "Attempts" not in text
    assert "no metrics recorded" in text and parts.images == [] and "[algo-1 r0] done" in text
    assert (out.parent / parts.links[0]).resolve() == job.log_file("algo-1")
