"""Open the built Allure report in headless Chromium and check that it renders.

    python -m tools.report_browser [--report reports/allure-report/index.html] [--shots DIR]

A real browser (Debian's ``chromium``), driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: NUL-separated JSON on file descriptors 3 and 4, so no
port, no websocket and no extra package). It checks, waiting at most ``--timeout``
seconds for each page:

- the overview: the report's name, the summary with the number of test cases, and
  the environment (``torch``);
- the categories: every category the report's data holds is listed;
- one TC that did not pass (a representative case when every TC passed): each of its
  attachments opens and shows its content (an image with pixels, an HTML table, text).

It writes a screenshot of each page into ``--shots`` and prints one line per page;
any problem is one ``error:`` line and exit status 1 (2 when Chromium is missing).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from harness.reporting.report import DEFAULT_OUT, embedded_files
from harness.usage import Parser, command, say_error

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "apt-get install -y chromium"
WIDTH, HEIGHT = 1400, 1000


class BrowserError(Exception):
    """Chromium is missing, died or did not answer."""


def find_chromium() -> Optional[str]:
    for name in BINARIES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """A headless Chromium with one page, spoken to over the DevTools pipe."""

    def __init__(self, binary: str, *, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="lw-chromium-")
        cmd_read, cmd_write = os.pipe()
        out_read, out_write = os.pipe()

        def wire() -> None:  # in the child: commands on fd 3, replies on fd 4
            high_in, high_out = os.dup(cmd_read), os.dup(out_write)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
                f"--window-size={WIDTH},{HEIGHT}", f"--user-data-dir={self._profile}",
                "--remote-debugging-pipe", "about:blank"]
        try:
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, preexec_fn=wire, close_fds=False)
        except OSError as exc:
            shutil.rmtree(self._profile, ignore_errors=True)
            raise BrowserError(f"cannot start {binary}: {exc}") from exc
        finally:
            os.close(cmd_read)
            os.close(out_write)
        self._write, self._read = cmd_write, out_read
        self._buffer = b""
        self._next_id = 0
        self.session: Optional[str] = None
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.call("Page.enable")
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    def call(self, method: str, params: Optional[dict] = None) -> dict:
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"no answer from Chromium within {self.timeout_s:g} s")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise BrowserError(f"Chromium exited (status {self._proc.poll()})")
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails'].get('text')}: {expression[:80]}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: Optional[float] = None) -> Any:
        """Poll ``expression`` until it is truthy; its last value (falsy on timeout)."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        value = None
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except BrowserError:  # the page is still loading (no body yet, a navigation in flight)
                value = None
            if value:
                return value
            time.sleep(0.25)
        return value

    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params: dict = {"format": "png"}
        if full_page:
            height = int(self.evaluate("Math.max(document.body.scrollHeight, "
                                       "...[...document.querySelectorAll('*')].map(e => e.scrollHeight))") or HEIGHT)
            height = min(max(height, HEIGHT), 6000)
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False})
            time.sleep(0.5)
        data = self.call("Page.captureScreenshot", params)["data"]
        if full_page:
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if self._proc.poll() is None:
                try:
                    os.write(self._write, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                    self._proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    self._proc.kill()
                    self._proc.wait(timeout=5)
        finally:
            for fd in (self._write, self._read):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- what the report must show ----------------------------------------------------------------


def report_facts(index_html: str) -> dict:
    """From the report's embedded data: its name, test count, category names, the TC to open."""
    files = embedded_files(index_html)
    summary = json.loads(files.get("widgets/summary.json", b"{}"))
    categories = json.loads(files.get("data/categories.json", b"{}"))
    cases = [json.loads(data) for path, data in files.items() if path.startswith("data/test-cases/")]

    def is_tc(case: dict) -> bool:
        return any(l["name"] == "as_id" for l in case.get("labels", []))

    def attachments(case: dict) -> list[dict]:
        return (case.get("testStage") or {}).get("attachments") or []

    tcs = sorted((c for c in cases if is_tc(c) and attachments(c)), key=lambda c: c["name"])
    failing = [c for c in tcs if c["status"] in ("failed", "broken")]
    shown = sorted(failing, key=lambda c: -len(attachments(c)))[:1] or tcs[:1]
    return {
        "name": summary.get("reportName", ""),
        "total": (summary.get("statistic") or {}).get("total", 0),
        "categories": [c["name"] for c in categories.get("children", [])],
        "case": shown[0] if shown else None,
    }


def check_report(index: Path, shots: Path, chromium: str, *, timeout_s: float = 30.0) -> tuple[list[str], list[str]]:
    """(lines, problems): what each page showed, and what did not render."""
    html = index.read_text(encoding="utf-8")
    facts = report_facts(html)
    url = index.resolve().as_uri()
    lines, problems = [], []
    with Chromium(chromium, timeout_s=timeout_s) as page:
        # overview
        page.open(f"{url}#")
        text = page.wait_for(f"(document.body.innerText.includes({json.dumps(facts['name'])}) && "
                             "document.body.innerText.includes('Environment') && document.body.innerText.includes('torch')) ? document.body.innerText : ''")
        shot = page.screenshot(shots / "overview.png")
        if not text:
            problems.append(f"overview: the report name {facts['name']!r} or the environment did not render")
        elif str(facts["total"]) not in text:
            problems.append(f"overview: the summary does not show {facts['total']} test cases")
        else:
            lines.append(f"overview: {facts['name']!r}, {facts['total']} test cases, environment -> {shot}")
        # categories
        page.open(f"{url}#categories")
        names = page.wait_for("(() => { const n = [...document.querySelectorAll('.node__name')]"
                              ".map(e => e.innerText.trim()); return n.length ? n : null; })()") or []
        if facts["categories"]:
            page.evaluate("document.querySelector('.node__title') && document.querySelector('.node__title').click()")
            time.sleep(0.5)
        shot = page.screenshot(shots / "categories.png")
        missing = [n for n in facts["categories"] if n not in names]
        if missing:
            problems.append(f"categories: {missing} not listed (listed: {names})")
        else:
            lines.append(f"categories: {', '.join(facts['categories']) or 'none (every test passed)'} -> {shot}")
        # one TC's attachments
        case = facts["case"]
        if case is None:
            problems.append("no TC with attachments in the report")
            return lines, problems
        page.open(f"{url}#testresult/{case['uid']}")
        count = page.wait_for("document.querySelectorAll('.attachment-row').length") or 0
        wanted = [a["name"] for a in case["testStage"]["attachments"]]
        if count < len(wanted):
            problems.append(f"{case['name']}: {count} attachment rows for {len(wanted)} attachments")
        page.evaluate("[...document.querySelectorAll('.attachment-row')].forEach(r => r.click())")
        shown = page.wait_for(_ATTACHMENTS_SHOWN.replace("N_WANTED", str(len(wanted))), timeout_s) or {}
        shot = page.screenshot(shots / "failing-tc.png")
        for i, name in enumerate(wanted):
            page.evaluate(_SCROLL_TO.replace("N_INDEX", str(i)))
            time.sleep(0.3)
            page.screenshot(shots / f"attachment-{i + 1}-{_file_name(name)}.png")
        empty = [name for name in wanted if not (shown.get("rendered") or {}).get(name)]
        if empty:
            problems.append(f"{case['name']}: attachments without content: {empty}")
        else:
            lines.append(f"{case['name']} ({case['status']}): {len(wanted)} attachments render "
                         f"({', '.join(wanted)}) -> {shot}")
    return lines, problems


def _file_name(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-").lower()


_SCROLL_TO = "document.querySelectorAll('.attachment-row')[N_INDEX].scrollIntoView({block: 'start'})"

_ATTACHMENTS_SHOWN = """(() => {
  const rendered = {};
  for (const row of document.querySelectorAll('.attachment-row')) {
    const name = row.querySelector('.attachment-row__name').innerText.trim();
    const content = row.nextElementSibling && row.nextElementSibling.classList.contains('attachment-row__content')
      ? row.nextElementSibling : document.querySelector('.attachment-row__content[data-name]');
    const box = content || row.parentElement;
    const img = box.querySelector('img');
    const frame = box.querySelector('iframe');
    const text = box.querySelector('pre, code, table');
    rendered[name] = Boolean((img && img.complete && img.naturalWidth > 0) ||
                             (frame && frame.getBoundingClientRect().height > 20) ||
                             (text && text.innerText.trim().length > 0));
  }
  const done = Object.values(rendered).filter(Boolean).length;
  return done >= N_WANTED ? {rendered} : null;
})()"""


@command
def main(argv: Optional[list[str]] = None) -> int:
    parser = Parser(prog="python -m tools.report_browser", description=__doc__.split("\n")[0])
    parser.add_argument("--report", type=Path, default=DEFAULT_OUT / "index.html", help="the single-file report")
    parser.add_argument("--shots", type=Path, default=DEFAULT_OUT.parent / "allure-screenshots",
                        help="where the screenshots go")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each page")
    args = parser.parse_args(argv)
    from harness.files import check_writable
    from harness.rankpool.backend import check_seconds

    check_seconds("--timeout", args.timeout)
    chromium = find_chromium()
    if chromium is None:
        say_error(f"Chromium not found ({', '.join(BINARIES)}); install it with: {INSTALL_HINT}")
        return 2
    if not args.report.is_file():
        say_error(f"--report {args.report} does not exist (build it with python -m harness.reporting.report)")
        return 2
    check_writable(args.shots, "--shots")  # before the browser starts: the screenshots go there
    try:
        lines, problems = check_report(args.report, args.shots, chromium, timeout_s=args.timeout)
    except BrowserError as exc:
        print(f"error: browser check: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(f"browser: {line}")
    for problem in problems:
        print(f"error: browser check: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
