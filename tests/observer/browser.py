"""Headless Chromium driven by Selenium, from Debian's ``chromium`` and ``chromium-driver``.

No browser is downloaded at run time: the driver is the system chromedriver,
the browser the system chromium.  `missing()` says how to get them when
they are not there (the tests skip with that message).
"""

from __future__ import annotations

import shutil
from typing import Any

HOW_TO_GET = (
    "headless Chromium is missing: apt-get install chromium chromium-driver "
    "(and pip install 'otpy-actors[test]' for selenium); .ci/run does both"
)


def _binaries() -> tuple[str | None, str | None]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return browser, driver


def missing() -> str | None:
    """None when a browser test can run, else what to install."""
    browser, driver = _binaries()
    try:
        import selenium  # noqa: F401  (only whether it is installed)
    except ImportError:
        return HOW_TO_GET
    return None if browser and driver else HOW_TO_GET


def chromium(width: int = 1600, height: int = 1000) -> Any:
    """A headless Chromium session that keeps the browser console's log."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver = _binaries()
    opts = Options()
    opts.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)
