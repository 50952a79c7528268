"""Take docs/observer.png: the observer page of ``python -m actors demo`` under load.

Run by hand: ``PYTHONPATH=. python3 tests/observer/screenshot.py [OUT.png]``.  It starts the
demo with ``--observe 0``, opens the printed URL in headless Chromium, waits until
every service's panel is up and some actors have been killed and restarted, and
saves the whole page.
"""

from __future__ import annotations

import os
import subprocess
import sys

from selenium.webdriver.support.ui import WebDriverWait

from tests.observer.browser import chromium

PANELS = ("ioq", "smoosh", "replicator", "couch_jobs")


def main(out: str) -> None:
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actors",
            "demo",
            "--duration",
            "60",
            "--kill-rate",
            "0.5",
            "--no-live",
            "--seed",
            "3",
            "--observe",
            "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    driver = chromium(1600, 1000)
    try:
        url = ""
        for _ in range(20):
            line = demo.stdout.readline()
            if line.startswith("observer: "):
                url = line.split()[1]
                break
        assert url, "the demo printed no observer URL"
        driver.get(url)
        WebDriverWait(driver, 90, poll_frequency=0.5).until(
            lambda d: (
                all(d.find_elements("id", f"panel-{p}") for p in PANELS)
                and int(d.find_element("id", "kpi-restarts").text or 0) >= 4
                and int(d.execute_script("return document.body.dataset.updates || 0")) > 60
            )
        )
        for _ in range(2):  # the second pass sees the page laid out at the first one's height
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": 1600, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
        seen = int(driver.execute_script("return document.body.dataset.updates"))
        WebDriverWait(driver, 10, poll_frequency=0.2).until(  # one more picture drawn at the full size
            lambda d: int(d.execute_script("return document.body.dataset.updates")) > seen
        )
        driver.save_screenshot(out)
    finally:
        driver.quit()
        demo.terminate()
        demo.wait(30)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/observer.png")
