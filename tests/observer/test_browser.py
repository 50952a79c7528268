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


def test_the_tree_appears_with_the_right_names(page: Any, observer: Any) -> None:
    _open(page, observer)
    _wait(
        page,
        lambda d: [r.get_attribute("data-name") for r in d.find_elements("css selector", "#tree-body tr")][:5] == NAMES,
    )
    assert _cell(page, "obs_top", "c-kind") == "one_for_one"
    assert _cell(page, "obs_top/inner", "c-kind") == "one_for_all"
    assert _cell(page, "obs_top/beta", "c-restart") == "permanent"
    assert _cell(page, "obs_top/alpha", "c-state") == "running"
    assert "0/20 in 5s" in _cell(page, "obs_top", "c-int")
    hosts = [r.get_attribute("data-key") for r in page.find_elements("css selector", "#hosts-body tr")]
    assert hosts[0] == "n" and len(hosts) >= 2
    assert "beta" in page.find_element("css selector", "#hosts-body").text


def test_killing_a_worker_from_the_page_counts_its_restart_without_a_reload(page: Any, observer: Any) -> None:
    _open(page, observer)
    _wait(page, lambda d: _cell(d, "obs_top/alpha", "c-restarts") == "0")
    page.execute_script("window.__notReloaded = true")
    old_actor = row(observer.collector.latest, "obs_top/alpha")["actor"]
    page.find_element("css selector", 'tr[data-key="obs_top/alpha"] button.act-kill').click()
    dialog = page.find_element("id", "confirm")
    _wait(page, lambda d: dialog.get_attribute("open") is not None)
    assert "alpha" in page.find_element("id", "confirm-text").text
    page.find_element("id", "confirm-ok").click()
    _wait(page, lambda d: _cell(d, "obs_top/alpha", "c-restarts") == "1")
    _wait(
        page,
        lambda d: (
            d.find_element("css selector", 'tr[data-key="obs_top/alpha"]').get_attribute("data-actor")
            not in ("", old_actor)
        ),
    )
    assert _cell(page, "obs_top/alpha", "c-exit") == "killed"
    assert page.execute_script("return window.__notReloaded === true")
    _wait(page, lambda d: "alpha" in d.find_element("id", "log").text)
    assert _severe(page) == []


def test_a_cancelled_kill_does_nothing(page: Any, observer: Any) -> None:
    _open(page, observer)
    _wait(page, lambda d: _cell(d, "obs_top/inner/gamma", "c-restarts") == "0")
    actor = row(observer.collector.latest, "obs_top/inner/gamma")["actor"]
    page.find_element("css selector", 'tr[data-key="obs_top/inner/gamma"] button.act-kill').click()
    _wait(page, lambda d: d.find_element("id", "confirm").get_attribute("open") is not None)
    page.find_element("id", "confirm-cancel").click()
    _wait(page, lambda d: d.find_element("id", "confirm").get_attribute("open") is None)
    seen = observer.collector.version
    observer.collector.wait_newer(seen + 2, 10)  # two more pictures: time for a kill to have shown
    assert row(observer.collector.latest, "obs_top/inner/gamma")["actor"] == actor


def test_exit_with_a_reason_from_the_page(page: Any, observer: Any) -> None:
    _open(page, observer)
    _wait(page, lambda d: _cell(d, "obs_top/inner/gamma", "c-restarts") == "0")
    page.find_element("css selector", 'tr[data-key="obs_top/inner/gamma"] button.act-exit').click()
    _wait(page, lambda d: d.find_element("id", "confirm-reason").is_displayed())
    reason = page.find_element("id", "confirm-reason")
    reason.clear()
    reason.send_keys("kill")  # untrappable: the worker traps exits, so a plain reason would be a message
    page.find_element("id", "confirm-ok").click()
    _wait(page, lambda d: _cell(d, "obs_top/inner/gamma", "c-restarts") == "1")
    assert _cell(page, "obs_top/inner/gamma", "c-exit") == "killed"
    _wait(page, lambda d: "sent exit 'kill'" in d.find_element("id", "toast").text)


def test_sigkill_of_a_host_from_the_page_restarts_its_actor(page: Any, observer: Any) -> None:
    _open(page, observer)
    _wait(page, lambda d: _cell(d, "obs_top/beta", "c-restarts") == "0")
    host = next(h for h in observer.collector.latest["hosts"] if h["label"] == "obs_host")
    page.find_element("css selector", f'tr[data-key="{host["proc"]}"] button.act-sigkill').click()
    _wait(page, lambda d: d.find_element("id", "confirm").get_attribute("open") is not None)
    assert str(host["pid"]) in page.find_element("id", "confirm-text").text
    page.find_element("id", "confirm-ok").click()
    _wait(page, lambda d: _cell(d, "obs_top/beta", "c-restarts") == "1")
    _wait(page, lambda d: str(host["pid"]) not in _cell(d, "obs_top/beta", "c-host"))
    assert _severe(page) == []


def test_a_request_without_the_token_is_refused(page: Any, observer: Any) -> None:
    page.get(f"http://127.0.0.1:{observer.port}/")
    _wait(page, lambda d: "403" in d.find_element("tag name", "body").text)
    assert page.find_elements("id", "tree") == []


def test_the_page_logs_no_errors(page: Any, observer: Any) -> None:
    _open(page, observer)
    _wait(page, lambda d: _updates(d) >= 4)
    size = page.get_window_size()
    page.set_window_size(900, 800)  # the narrow layout redraws the charts
    try:
        _wait(page, lambda d: _updates(d) >= 6)
    finally:
        page.set_window_size(size["width"], size["height"])
    assert _severe(page) == []
    assert page.find_element("id", "live").text == "live"
