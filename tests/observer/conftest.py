"""A small supervision tree on a real node, its observer, and a headless browser."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest

from actors import Node
from actors.tools.observer import observe
from supervision import ChildSpec, Supervisor, SupFlags, start_supervisor
from tests.observer.browser import chromium, missing
from tests.supervision.workers import Worker


class Inner(Supervisor):
    def init(self) -> Any:
        return SupFlags("one_for_all", intensity=10, period=5), [ChildSpec("gamma", (Worker, (None, "gamma")))]


def small_tree(node: Node) -> Any:
    """``obs_top`` (one_for_one): ``alpha`` here, ``beta`` in host ``obs_host``, ``inner`` (one_for_all: ``gamma``)."""
    return start_supervisor(
        node,
        SupFlags("one_for_one", intensity=20, period=5),
        [
            ChildSpec("alpha", (Worker, (None, "alpha"))),
            ChildSpec("beta", (Worker, (None, "beta")), host="obs_host"),
            ChildSpec("inner", (Inner, ()), type="supervisor"),
        ],
        name="obs_top",
    )


@pytest.fixture
def tree_node() -> Iterator[Node]:
    with Node() as node:
        small_tree(node)
        yield node


@pytest.fixture
def observer(tree_node: Node) -> Iterator[Any]:
    web = observe(tree_node, port=0)
    try:
        yield web
    finally:
        web.close()


def get(url: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> tuple[int, bytes]:
    """Status and body of a request to the observer (errors included)."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def snapshot(web: Any) -> dict[str, Any]:
    status, body = get(f"http://127.0.0.1:{web.port}/api/snapshot?token={web.token}")
    assert status == 200
    return json.loads(body)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = missing()
    if why:
        pytest.skip(why)
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: Any, observer: Any) -> Iterator[Any]:
    """The browser, its console log drained; left on a blank page before the observer closes,
    so the closed server's refused reconnects never reach the next test's console."""
    browser.get("about:blank")
    browser.get_log("browser")
    yield browser
    browser.get("about:blank")
    browser.get_log("browser")


def wait_picture(web: Any, predicate: Any, timeout: float = 20.0) -> dict[str, Any]:
    """The first picture the collector takes that satisfies ``predicate`` (bounded in time)."""

    deadline = time.monotonic() + timeout
    while True:
        version = web.collector.version
        picture = web.collector.latest
        if predicate(picture):
            return picture
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no picture satisfied the condition within {timeout} s")
        web.collector.wait_newer(version, left)


def row(picture: dict[str, Any], key: str) -> dict[str, Any] | None:
    return next((r for r in picture["tree"] if r["key"] == key), None)
