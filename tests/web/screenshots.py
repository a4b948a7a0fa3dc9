"""The screenshots of docs/web.md, taken with the browser tests' own tooling: a demo file
under the real daemon and the real `crond web`, in Debian's headless Chromium.

    .venv/bin/python -m tests.web.screenshots [docs/img]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.harness import run_cli
from tests.web.conftest import browser_paths
from tests.web.dash import Dash, as_user, chrome, daemon, schedules

JOBS = """\
  backup:
    cron: "30 2 * * *"
    timezone: Europe/Berlin
    command: "echo dumping app; echo 'pg_dump: connection refused' >&2; exit 1"
    retry: {attempts: 1, delay: 1s}
  report:
    cron: "0 6 * * 1-5"
    command: "for i in 1 2 3; do echo building part $i; sleep 0.3; done; echo done"
  rotate-logs:
    cron: "0 2 * * *"
    timezone: America/New_York
    command: "echo rotated 14 files"
  sync-mirror:
    every: 15m
    command: "echo synced"
  payroll:
    cron: "0 9 25 * *"
    command: "echo paid"
"""


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="crond-shots-") as tmp:
        file = schedules(Path(tmp), JOBS)
        started = daemon(file)
        dash = None
        browser = chrome(*browser_paths())
        try:
            for job in ("backup", "rotate-logs", "sync-mirror", "backup"):
                run_cli("trigger", str(file), job, "--wait")
            run_cli("pause", str(file), "payroll", "--for", "3d", "--note", "waiting for HR")
            dash = Dash(file)
            as_user(browser, "alice")
            browser.set_window_size(1200, 700)
            browser.get(dash.url + "/")
            browser.save_screenshot(str(out / "web-jobs.png"))
            browser.get(dash.url + "/jobs/backup")
            browser.save_screenshot(str(out / "web-job.png"))
            browser.find_element(By.CSS_SELECTOR, "a[href^='/runs/']").click()
            browser.save_screenshot(str(out / "web-run.png"))
            browser.get(dash.url + "/jobs/report")
            browser.find_element(By.XPATH, "//button[text()='Run now']").click()
            WebDriverWait(browser, 10).until(
                lambda d: d.find_element(By.ID, "status").get_attribute("data-outcome")
            )
            browser.save_screenshot(str(out / "web-follow.png"))
            browser.get(dash.url + "/timeline?zone=Europe/Berlin")
            browser.save_screenshot(str(out / "web-timeline.png"))
            browser.set_window_size(400, 800)
            browser.get(dash.url + "/?state=failing")
            time.sleep(0.2)  # the phone-sized layout settles
            browser.save_screenshot(str(out / "web-phone.png"))
        finally:
            browser.quit()
            if dash is not None:
                dash.stop()
            started.kill()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img"))
