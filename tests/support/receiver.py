"""A real HTTP receiver on loopback (``http.server`` in a thread) for webhook and OpenLineage tests: it
keeps every request (time, path, headers, JSON body) and answers with the statuses it is given, in order
(the last one repeats), optionally after a delay."""
from __future__ import annotations

import http.server
import json
import threading
import time


class Receiver:
    def __init__(self, statuses=(200,), delay: float = 0.0, port: int = 0):
        self.statuses = list(statuses)
        self.delay = delay
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    status = outer.statuses[min(len(outer.requests), len(outer.statuses) - 1)]
                    outer.requests.append({"at": time.time(), "path": self.path, "headers": dict(self.headers),
                                           "body": json.loads(body)})
                if outer.delay:
                    time.sleep(outer.delay)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def wait(self, n: int, timeout: float = 15.0) -> list[dict]:
        """The first ``n`` requests, waiting up to ``timeout`` seconds for them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= n:
                    return list(self.requests[:n])
            time.sleep(0.02)
        raise AssertionError(f"expected {n} request(s), got {len(self.requests)}: {self.requests}")

    def bodies(self) -> list[dict]:
        with self.lock:
            return [r["body"] for r in self.requests]


def wait_for(check, timeout: float = 15.0, what: str = "condition"):
    """Polls ``check()`` until it returns something truthy; returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
