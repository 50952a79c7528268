"""Take docs/observer.png: the observer page of the demo tree under chaos kills.

Run by hand: ``PYTHONPATH=. python3 tests/observer/screenshot.py [OUT.png]``.
"""

from __future__ import annotations

import sys
import threading

from selenium.webdriver.support.ui import WebDriverWait

from actors import Node
from actors.chaos import build_demo_tree, run_chaos
from tests.observer.browser import chromium


def main(out: str) -> None:
    with Node() as node:
        top = build_demo_tree(node)
        web = node.observe(port=0)
        chaos = threading.Thread(target=run_chaos, args=(node, top, 2.0, 25.0), kwargs={"clients": 3, "seed": 7})
        chaos.start()
        driver = chromium(1600, 1000)
        try:
            driver.get(web.url)
            WebDriverWait(driver, 60, poll_frequency=0.5).until(
                lambda d: int(d.find_element("id", "kpi-restarts").text or 0) >= 12
                and int(d.execute_script("return document.body.dataset.updates || 0")) > 30)
            driver.save_screenshot(out)
        finally:
            driver.quit()
            chaos.join(60)
            web.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/observer.png")
