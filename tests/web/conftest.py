"""The browser of tests/web: Debian's headless Chromium driven by Selenium through
Debian's chromium-driver (both given by path: nothing is downloaded). Where they are not
installed, the browser tests skip saying so; under CI (`CI=true`) they fail instead, as
the PostgreSQL tests do (tests/pg/plugin.py). A browser test that fails leaves a
screenshot and the page's HTML in test-artifacts/web/ (or $CROND_TEST_ARTIFACTS/web/)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from _pytest.reports import TestReport

from tests.web.dash import chrome

CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"


def browser_paths() -> tuple[str, str]:
    browser = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    driver = shutil.which(DRIVER)
    if browser is None or driver is None:
        missing = [n for n, p in (("chromium", browser), ("chromium-driver", driver)) if p is None]
        reason = f"{' and '.join(missing)} not installed (apt-get install {' '.join(missing)})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"a browser is required under CI=true: {reason}", pytrace=False)
        pytest.skip(f"no browser: {reason}")
    return browser, driver


def artifacts() -> Path:
    root = os.environ.get("CROND_TEST_ARTIFACTS")
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "test-artifacts"
    return base / "web"


@pytest.fixture(scope="module")
def driver() -> Iterator[object]:
    """One headless Chromium for the module's tests (starting one takes ~2 s)."""
    started = chrome(*browser_paths())
    try:
        yield started
    finally:
        started.quit()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, TestReport, TestReport]:
    report = yield
    browser = getattr(item, "funcargs", {}).get("driver")
    if report.failed and browser is not None:
        where = artifacts()
        where.mkdir(parents=True, exist_ok=True)
        name = item.name.replace("/", "_")[:100]
        try:
            browser.save_screenshot(str(where / f"{name}.png"))
            (where / f"{name}.html").write_text(browser.page_source)
        except Exception as exc:  # noqa: BLE001  (a browser gone bad must not hide the failure)
            report.sections.append(("screenshot", f"none taken: {exc}"))
        else:
            report.sections.append(("screenshot", str(where / f"{name}.png")))
    return report
