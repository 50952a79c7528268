"""The observer's web server: Starlette under uvicorn, on a thread of its own.

Every request must carry the token (``?token=`` in the printed URL, then a
cookie the first page sets; actions also need it in the ``X-Observer-Token``
header, which a page from another site cannot send), else 403.  The page
gets pictures by server-sent events from the `Collector`, and acts through
three POSTs: kill or exit an actor (`Node.kill` / `Node.exit`), SIGKILL a
host process of the node.  An action names an actor or a host the node
listed in its latest picture; nothing else can be targeted.
"""

from __future__ import annotations

import asyncio
import hmac
import importlib.resources
import os
import secrets
import signal
import socket
import threading
import time
from typing import Any, AsyncIterator

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from actors import CallTimeout, Exit
from actors.tools.observer.collector import Collector
from actors.tools.observer.source import Source, ref_of

__all__ = ["Observer"]

TOKEN_HEADER = "x-observer-token"
_START_TIMEOUT = 10.0


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)


class _TokenGate:
    """ASGI middleware: 403 for any request without the token."""

    def __init__(self, app: ASGIApp, token: str, cookie: str) -> None:
        self.app, self.token, self.cookie = app, token, cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        header = request.headers.get(TOKEN_HEADER, "")
        if request.method == "GET":
            offered = request.query_params.get("token") or header or request.cookies.get(self.cookie, "")
        else:
            offered = header  # actions: the header only, which another site's page cannot set
        if not hmac.compare_digest(offered.encode(), self.token.encode()):
            await PlainTextResponse("403: this observer needs the token printed with its URL\n", status_code=403)(
                scope, receive, send
            )
            return
        await self.app(scope, receive, send)


class Observer:
    """A running observer: ``url`` (with the token), ``close()``; a context manager."""

    def __init__(
        self, target: Any, port: int = 8421, host: str = "127.0.0.1", token: str | None = None, interval: float = 0.5
    ) -> None:
        self.source = Source(target)
        self.token = token or secrets.token_urlsafe(24)
        self.collector = Collector(self.source, interval=interval)
        self._closing = False
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
        except OSError:
            self._sock.close()
            raise
        self.host = host
        self.port = self._sock.getsockname()[1]
        self._cookie = f"otpy_observer_{self.port}"
        self.app = _TokenGate(self._build_app(), self.token, self._cookie)
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="otpy-observer-http", daemon=True)

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/?token={self.token}"

    def start(self) -> "Observer":
        """Take a first picture, then serve; returns once the server accepts connections."""
        self.collector.poll()
        self.collector.start()
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        started = threading.Event()
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            started.wait(0.02)  # uvicorn has no start event to wait on; bounded by the deadline
        if not self._server.started:
            self.close()
            raise RuntimeError(f"the observer's web server did not start on {self.host}:{self.port}")
        return self

    def close(self) -> None:
        self._closing = True
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.collector.close()
        self.source.close()
        self._sock.close()

    def __enter__(self) -> "Observer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _serve(self) -> None:
        self._server.run(sockets=[self._sock])

    # -- the app -------------------------------------------------------------------

    def _build_app(self) -> Starlette:
        static = importlib.resources.files("actors.tools.observer") / "static"
        with importlib.resources.as_file(static) as folder:
            static_dir = str(folder)
        routes = [
            Route("/", self._index),
            Route("/api/snapshot", self._snapshot),
            Route("/api/events", self._events),
            Route("/api/actor/kill", self._kill, methods=["POST"]),
            Route("/api/actor/exit", self._exit, methods=["POST"]),
            Route("/api/host/sigkill", self._sigkill, methods=["POST"]),
            Mount("/static", StaticFiles(directory=static_dir), name="static"),
        ]
        return Starlette(routes=routes)

    async def _index(self, request: Request) -> Response:
        page = (importlib.resources.files("actors.tools.observer") / "static" / "index.html").read_text("utf-8")
        response = HTMLResponse(page, headers={"Cache-Control": "no-store"})
        response.set_cookie(self._cookie, self.token, httponly=True, samesite="strict")
        return response

    async def _snapshot(self, request: Request) -> Response:
        return Response(_dumps(self.collector.latest), media_type="application/json")

    async def _events(self, request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            sent = -1
            while not self._closing and not await request.is_disconnected():
                version = self.collector.version
                if version != sent:
                    sent = version
                    yield b"data: " + _dumps(self.collector.latest) + b"\n\n"
                await asyncio.sleep(0.1)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )

    # -- actions -------------------------------------------------------------------

    def _actor(self, actor_id: Any) -> dict[str, Any] | None:
        return next((a for a in self.collector.actors if a["id"] == actor_id), None)

    async def _kill(self, request: Request) -> Response:
        body = await request.json()
        entry = self._actor(body.get("actor"))
        if entry is None:
            return JSONResponse({"ok": False, "error": f"no actor {body.get('actor')!r} in the node"}, 404)
        ref = ref_of(self.source.node_id, entry)
        return await self._act(lambda: self.source.kill(ref), f"killed {ref.name or ref.id}")

    async def _exit(self, request: Request) -> Response:
        body = await request.json()
        entry = self._actor(body.get("actor"))
        reason = body.get("reason")
        if entry is None:
            return JSONResponse({"ok": False, "error": f"no actor {body.get('actor')!r} in the node"}, 404)
        if not isinstance(reason, str) or not reason.strip():
            return JSONResponse({"ok": False, "error": "exit needs a reason"}, 400)
        ref = ref_of(self.source.node_id, entry)
        return await self._act(
            lambda: self.source.exit(ref, reason.strip()), f"sent exit {reason.strip()!r} to {ref.name or ref.id}"
        )

    async def _sigkill(self, request: Request) -> Response:
        body = await request.json()
        host = next(
            (
                h
                for h in self.collector.hosts
                if h.get("proc") == body.get("proc") and h.get("state") == "up" and h.get("pid")
            ),
            None,
        )
        if host is None:
            return JSONResponse({"ok": False, "error": f"no live host process {body.get('proc')!r}"}, 404)
        pid = int(host["pid"])
        return await self._act(lambda: os.kill(pid, signal.SIGKILL), f"SIGKILL sent to pid {pid}")

    async def _act(self, action: Any, done: str) -> Response:
        try:
            await run_in_threadpool(action)
        except (Exit, CallTimeout, OSError) as exc:
            return JSONResponse({"ok": False, "error": f"{type(exc).__name__}: {exc}"}, 409)
        return JSONResponse({"ok": True, "message": done})
