"""The twin's HTTP server: /metrics (Prometheus), / (the live topology page), /view.json (its data).

    server = ViewServer(settings.views, feed, progress).start()   # serves in a daemon thread
    server.url                                                    # http://127.0.0.1:9464/
    server.stop()
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from infra.settings import ViewSettings
from streaming.metrics import TwinCollector, watermark_seconds
from streaming.page import render
from streaming.views import ViewFeed

Progress = Callable[[], tuple[dict | None, int, int, int]]


class ViewServer:
    def __init__(self, settings: ViewSettings, feed: ViewFeed, progress: Progress):
        self._settings, self._feed, self._progress = settings, feed, progress
        self.registry = CollectorRegistry()
        self.registry.register(TwinCollector(feed.view, progress))
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "ViewServer":
        """Bind and serve; an OSError (a port in use) is the caller's to say."""
        self._http = ThreadingHTTPServer((self._settings.http_host, self._settings.http_port), self._handler())
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="shadowtwin-http", daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/"

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    def page(self) -> str:
        progress, batches, _, _ = self._progress()
        mark = watermark_seconds(progress) if progress else None
        return render(self._feed.view.snapshot(), refresh_seconds=self._settings.page_refresh_seconds,
                      watermark_ms=mark * 1000 if mark else None, batches=batches)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        views = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(views.registry))
                elif path == "/":
                    self._send(200, "text/html; charset=utf-8", views.page().encode())
                elif path == "/view.json":
                    snap = views._feed.view.snapshot()
                    snap["recent_alerts"] = [{"alert_id": a.alert_id, "type": a.type.value, "servers": list(a.servers),
                                              "decided_at_ms": a.decided_at_ms, "reason": a.reason}
                                             for a in snap["recent_alerts"]]
                    self._send(200, "application/json", json.dumps(snap, sort_keys=True).encode())
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found: try /, /metrics or /view.json\n")

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args) -> None:  # scrapes every few seconds: not worth a line each
                pass

        return Handler
