"""A report page in a real headless browser (Debian's chromium): does it load without script errors, and does every
plot image decode? The page itself runs no script (its CSP forbids it); a copy gets a small checker instead."""
from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

# Records script errors from the start; once the page has loaded, writes what it found into an attribute that
# --dump-dom shows.
_CHECK_HEAD = """<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push(String(e.message || e.type)));
</script>"""
_CHECK_BODY = """<script>
window.addEventListener("load", () => {
  const images = Array.from(document.images);
  const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt);
  document.documentElement.setAttribute("data-check", JSON.stringify(
    {images: images.length, broken: broken, errors: window.__errors, title: document.title}));
});
</script>"""


@dataclass(frozen=True)
class BrowserCheck:
    images: int
    broken: list[str]
    errors: list[str]
    title: str
    screenshot: Path


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (scripts/bootstrap.sh installs Debian's chromium)")
    return found


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def load_in_browser(page: Path, work: Path) -> BrowserCheck:
    """Load a checker copy of `page` (next to it, so its relative links still resolve) in headless chromium."""
    browser = chromium()
    text = page.read_text(encoding="utf-8")
    copy = page.with_name(f".checked-{page.name}")
    checked = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text, count=1)
    checked = checked.replace("</head>", _CHECK_HEAD + "</head>", 1).replace("</body>", _CHECK_BODY + "</body>", 1)
    copy.write_text(checked, encoding="utf-8")
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", f"--user-data-dir={work / 'profile'}", "--virtual-time-budget=10000"]
    try:
        dom = subprocess.run([*common, "--dump-dom", copy.as_uri()], capture_output=True, text=True, timeout=180)
        shot = work / "screenshot.png"
        subprocess.run([*common, "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
                       capture_output=True, text=True, timeout=180, check=True)
    finally:
        copy.unlink()
    found = re.search(r'data-check="([^"]*)"', dom.stdout)
    assert found, f"the checker did not run: rc {dom.returncode}, stderr {dom.stderr[-2000:]}"
    import html

    result = json.loads(html.unescape(found.group(1)))
    width, height = _png_size(shot)
    assert (width, height) == (1200, 2400) and shot.stat().st_size > 20_000, "a blank screenshot"
    return BrowserCheck(result["images"], result["broken"], result["errors"], result["title"], shot)
