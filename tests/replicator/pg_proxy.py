"""A TCP front for the test PostgreSQL (which listens on a unix socket only), one per node,
so a test can cut one node off from the store and heal it, the others unaffected.

`cut` closes every connection through it and refuses new ones (the node's
next statement fails at once, as on a machine whose route to the store is
gone and says so); `heal` accepts again.  One thread, one selector, bounded by
`close`.
"""

from __future__ import annotations

import selectors
import socket
import threading
from urllib.parse import quote, urlsplit


class PgProxy:
    def __init__(self, unix_path: str) -> None:
        self.unix_path = unix_path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.peer: dict[socket.socket, socket.socket] = {}
        self.lock = threading.Lock()
        self.is_cut = False
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True, name=f"pg-proxy-{self.port}")
        self.thread.start()

    def url(self, admin_url: str, database: str, schema: str) -> str:
        user = urlsplit(admin_url).username or "postgres"
        return f"postgresql://{quote(user)}@127.0.0.1:{self.port}/{database}?options=-c%20search_path%3D{schema}"

    def _drop(self, sock: socket.socket) -> None:
        other = self.peer.pop(sock, None)
        for s in (sock, other):
            if s is None:
                continue
            self.peer.pop(s, None)
            try:
                self.sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def _loop(self) -> None:
        while not self.stopping:
            for key, _ in self.sel.select(timeout=0.1):
                sock = key.fileobj
                with self.lock:
                    if sock is self.listener:
                        try:
                            client, _addr = self.listener.accept()
                        except BlockingIOError:
                            continue
                        if self.is_cut:
                            client.close()
                            continue
                        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        try:
                            server.connect(self.unix_path)
                        except OSError:
                            client.close()
                            server.close()
                            continue
                        for s in (client, server):
                            s.setblocking(False)
                            self.sel.register(s, selectors.EVENT_READ, None)
                        self.peer[client], self.peer[server] = server, client
                        continue
                    if sock not in self.peer:
                        continue
                    try:
                        data = sock.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        self._drop(sock)
                        continue
                    try:
                        self.peer[sock].setblocking(True)
                        self.peer[sock].sendall(data)
                        self.peer[sock].setblocking(False)
                    except OSError:
                        self._drop(sock)

    def cut(self) -> None:
        with self.lock:
            self.is_cut = True
            for sock in list(self.peer):
                self._drop(sock)

    def heal(self) -> None:
        with self.lock:
            self.is_cut = False

    def close(self) -> None:
        self.stopping = True
        self.thread.join(timeout=5)
        with self.lock:
            for sock in list(self.peer):
                self._drop(sock)
        self.sel.close()
        self.listener.close()
