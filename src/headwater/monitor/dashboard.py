"""``headwater dashboard``: one read-only page over a lakehouse, served by Flask.

Three routes, all GET: the page, its script, and ``/api/state`` (what the page draws, as JSON,
polled every two seconds). There is no route that takes a path, a table name or a query, so
nothing outside the state can be asked for. Requests whose Host header is not the address it
is bound to are refused (a web page elsewhere cannot read it through DNS rebinding), and every
response forbids framing and any script or connection but its own.

It needs no Spark: the state is read with deltalake (``headwater.monitor.state``), so it runs
beside a pipeline, in the same process (``headwater demo``) or another (``headwater dashboard``).
"""

from __future__ import annotations

import logging
import socket
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from flask import Flask, Response, abort, jsonify, request
from werkzeug.serving import make_server

from headwater.errors import HeadwaterError
from headwater.monitor.state import DashboardState

DEFAULT_PORT = 8765
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; connect-src 'self'; "
                               "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _asset(name: str) -> str:
    return resources.files("headwater.monitor").joinpath("static", name).read_text()


def create_app(root: Any, allowed_hosts: tuple[str, ...] = LOCAL_HOSTS,
               state_dir: str | Path | None = None) -> Any:
    """root: the lakehouse folder or object-store URI; state_dir: its run files' folder
    (default the root when local)."""
    state = DashboardState(root, state_dir)
    app = Flask("headwater.dashboard", static_folder=None)
    page, script = _asset("dashboard.html"), _asset("dashboard.js")

    @app.before_request
    def only_known_hosts() -> None:
        host = (request.host or "").rsplit(":", 1)[0].strip("[]")
        if allowed_hosts and host not in allowed_hosts:
            abort(403)

    @app.get("/")
    def index() -> Any:
        return Response(page, mimetype="text/html")

    @app.get("/dashboard.js")
    def dashboard_js() -> Any:
        return Response(script, mimetype="text/javascript")

    @app.get("/api/state")
    def api_state() -> Any:
        return jsonify(state.snapshot())

    @app.after_request
    def headers(response: Any) -> Any:
        response.headers.update(_HEADERS)
        return response

    return app


def _in_use(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


class DashboardServer:
    """The app on a werkzeug server in a daemon thread (threaded: one slow poll never blocks)."""

    def __init__(self, root: Any, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 state_dir: str | Path | None = None) -> None:
        allowed = LOCAL_HOSTS if host in LOCAL_HOSTS else ()  # bound wider: the user chose it
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log on the console
        busy = HeadwaterError(
            "HW_DASHBOARD_PORT", f"Cannot listen on {host}:{port}: the address is in use.",
            "Another program (another dashboard?) holds the port.",
            "Pass another port (--port or --dashboard-port), or 0 for any free one.")
        if port and _in_use(host, port):
            raise busy  # werkzeug would print its own advice and exit the process
        try:
            self._server = make_server(host, port, create_app(root, allowed, state_dir),
                                       threaded=True)
        except (OSError, SystemExit) as exc:
            raise busy from exc
        self.host = host
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="headwater-dashboard", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> DashboardServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)
