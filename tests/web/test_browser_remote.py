"""A run going on another replica, watched live in a real browser (Debian's headless
Chromium, tests/web/conftest.py): two real replicas on the real PostgreSQL (tests/pg), the
real `crond web` beside replica r1, the run started on r2 by the shell. The page shows its
first line while it runs, its next line and its end as they come: through the database
(crond/store/pg_follow.py), since r1's socket knows nothing of r2's run."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.e2e.harness import run_cli
from tests.web.dash import as_user, two_replicas
from tests.web.test_browser import wait

pytestmark = pytest.mark.xdist_group("web-browser")


def test_a_run_on_another_replica_is_watched_live_in_the_browser(
    driver: WebDriver, pg_url: str, tmp_path: Path
) -> None:
    with two_replicas(pg_url, tmp_path) as pair:
        file, go, dash = pair.file, pair.go, pair.dash
        done = run_cli("trigger", str(file), "gated", "--socket", str(pair.r2_socket))
        assert done.returncode == 0, done.stderr
        run_id = done.stdout.strip()
        as_user(driver, "bob")  # watching is looking: a viewer may
        driver.get(dash.url + "/now")
        wait(driver).until(lambda d: d.find_elements(By.LINK_TEXT, run_id))
        row = driver.find_element(By.LINK_TEXT, run_id).find_element(By.XPATH, "ancestor::tr")
        assert "r2" in row.text  # whose run it is
        driver.find_element(By.LINK_TEXT, run_id).click()
        wait(driver).until(lambda d: d.find_element(By.ID, "output").text == "first")
        assert driver.find_element(By.ID, "status").text == "running…"
        go.touch()  # its next line comes while the page looks
        wait(driver).until(lambda d: d.find_element(By.ID, "status").get_attribute("data-outcome"))
        assert driver.find_element(By.ID, "output").text.splitlines() == ["first", "second"]
        assert driver.find_element(By.ID, "status").get_attribute("data-outcome") == "success"
