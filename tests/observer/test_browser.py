"""The page in headless Chromium: the tree, a kill from the page, the token, the console.

Synchronised with WebDriverWait on what the page shows, never with sleeps.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.observer.conftest import row

pytestmark = pytest.mark.integration

NAMES = ["obs_top", "alpha", "beta", "inner", "gamma"]
WAIT = 30


def _wait(driver: Any, condition: Any, timeout: float = WAIT) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)


def _cell(driver: Any, key: str, cls: str) -> str:
    cells = driver.find_elements("css selector", f'tr[data-key="{key}"] td.{cls}')
    return cells[0].text if cells else ""


def _updates(driver: Any) -> int:
    return int(driver.execute_script("return Number(document.body.dataset.updates || 0)"))


def _severe(driver: Any) -> list[Any]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _open(driver: Any, web: Any) -> None:
    driver.get(web.url)
    _wait(driver, lambda d: _updates(d) >= 1)


def test_the_tree_appears_with_the_right_names(browser: Any, observer: Any) -> None:
    _open(browser, observer)
    _wait(browser, lambda d: [r.get_attribute("data-name") for r in d.find_elements("css selector", "#tree-body tr")][:5]
          == NAMES)
    assert _cell(browser, "obs_top", "c-kind") == "one_for_one"
    assert _cell(browser, "obs_top/inner", "c-kind") == "one_for_all"
    assert _cell(browser, "obs_top/beta", "c-restart") == "permanent"
    assert _cell(browser, "obs_top/alpha", "c-state") == "running"
    assert "0/20 in 5s" in _cell(browser, "obs_top", "c-int")
    hosts = [r.get_attribute("data-key") for r in browser.find_elements("css selector", "#hosts-body tr")]
    assert hosts[0] == "n" and len(hosts) >= 2
    assert "beta" in browser.find_element("css selector", "#hosts-body").text


def test_killing_a_worker_from_the_page_counts_its_restart_without_a_reload(browser: Any, observer: Any) -> None:
    _open(browser, observer)
    _wait(browser, lambda d: _cell(d, "obs_top/alpha", "c-restarts") == "0")
    browser.execute_script("window.__notReloaded = true")
    old_actor = row(observer.collector.latest, "obs_top/alpha")["actor"]
    browser.find_element("css selector", 'tr[data-key="obs_top/alpha"] button.act-kill').click()
    dialog = browser.find_element("id", "confirm")
    _wait(browser, lambda d: dialog.get_attribute("open") is not None)
    assert "alpha" in browser.find_element("id", "confirm-text").text
    browser.find_element("id", "confirm-ok").click()
    _wait(browser, lambda d: _cell(d, "obs_top/alpha", "c-restarts") == "1")
    _wait(browser, lambda d: d.find_element("css selector", 'tr[data-key="obs_top/alpha"]').get_attribute("data-actor")
          not in ("", old_actor))
    assert _cell(browser, "obs_top/alpha", "c-exit") == "killed"
    assert browser.execute_script("return window.__notReloaded === true")
    _wait(browser, lambda d: "alpha" in d.find_element("id", "log").text)
    assert _severe(browser) == []


def test_a_cancelled_kill_does_nothing(browser: Any, observer: Any) -> None:
    _open(browser, observer)
    _wait(browser, lambda d: _cell(d, "obs_top/inner/gamma", "c-restarts") == "0")
    actor = row(observer.collector.latest, "obs_top/inner/gamma")["actor"]
    browser.find_element("css selector", 'tr[data-key="obs_top/inner/gamma"] button.act-kill').click()
    _wait(browser, lambda d: d.find_element("id", "confirm").get_attribute("open") is not None)
    browser.find_element("id", "confirm-cancel").click()
    _wait(browser, lambda d: d.find_element("id", "confirm").get_attribute("open") is None)
    seen = observer.collector.version
    observer.collector.wait_newer(seen + 2, 10)  # two more pictures: time for a kill to have shown
    assert row(observer.collector.latest, "obs_top/inner/gamma")["actor"] == actor


def test_exit_with_a_reason_from_the_page(browser: Any, observer: Any) -> None:
    _open(browser, observer)
    _wait(browser, lambda d: _cell(d, "obs_top/inner/gamma", "c-restarts") == "0")
    browser.find_element("css selector", 'tr[data-key="obs_top/inner/gamma"] button.act-exit').click()
    _wait(browser, lambda d: d.find_element("id", "confirm-reason").is_displayed())
    reason = browser.find_element("id", "confirm-reason")
    reason.clear()
    reason.send_keys("kill")  # untrappable: the worker traps exits, so a plain reason would be a message
    browser.find_element("id", "confirm-ok").click()
    _wait(browser, lambda d: _cell(d, "obs_top/inner/gamma", "c-restarts") == "1")
    assert _cell(browser, "obs_top/inner/gamma", "c-exit") == "killed"
    _wait(browser, lambda d: "sent exit 'kill'" in d.find_element("id", "toast").text)


def test_sigkill_of_a_host_from_the_page_restarts_its_actor(browser: Any, observer: Any) -> None:
    _open(browser, observer)
    _wait(browser, lambda d: _cell(d, "obs_top/beta", "c-restarts") == "0")
    host = next(h for h in observer.collector.latest["hosts"] if h["label"] == "obs_host")
    browser.find_element("css selector", f'tr[data-key="{host["proc"]}"] button.act-sigkill').click()
    _wait(browser, lambda d: d.find_element("id", "confirm").get_attribute("open") is not None)
    assert str(host["pid"]) in browser.find_element("id", "confirm-text").text
    browser.find_element("id", "confirm-ok").click()
    _wait(browser, lambda d: _cell(d, "obs_top/beta", "c-restarts") == "1")
    _wait(browser, lambda d: str(host["pid"]) not in _cell(d, "obs_top/beta", "c-host"))
    assert _severe(browser) == []


def test_a_request_without_the_token_is_refused(browser: Any, observer: Any) -> None:
    browser.get(f"http://127.0.0.1:{observer.port}/")
    _wait(browser, lambda d: "403" in d.find_element("tag name", "body").text)
    assert browser.find_elements("id", "tree") == []
    browser.get_log("browser")  # the refused page's own 403 is expected: drop it


def test_the_page_logs_no_errors(browser: Any, observer: Any) -> None:
    browser.get_log("browser")
    _open(browser, observer)
    _wait(browser, lambda d: _updates(d) >= 4)
    browser.set_window_size(900, 800)  # the narrow layout redraws the charts
    _wait(browser, lambda d: _updates(d) >= 6)
    assert _severe(browser) == []
    assert browser.find_element("id", "live").text == "live"
