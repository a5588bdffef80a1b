"""The dashboard in headless Chromium (Debian's package) against a running demo pipeline, the
numbers it shows checked against the event log and the tables read independently with
deltalake; and what it must never expose.

Chromium comes from `apt-get install chromium` (.ci/run installs it). Without it these tests
skip on a laptop and fail in CI (CI=true). Screenshots go to HEADWATER_SCREENSHOTS (default:
the test's tmp folder).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.support import HEADWATER
from tests.support import cli_env as _env

# Starts other JVMs or headwater processes: not in the fast tier.
pytestmark = pytest.mark.procs

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs it with apt-get")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("HEADWATER_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start(args: list[str], log: Path, cwd: Path) -> tuple[subprocess.Popen, str]:
    """A headwater process and the dashboard URL it prints."""
    out = open(log, "w")  # noqa: SIM115 (the child process writes it until it exits)
    proc = subprocess.Popen(HEADWATER + args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                            env=_env(), start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = re.search(r"dashboard: (http://127\.0\.0\.1:\d+/)", log.read_text())
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            pytest.fail(f"exited {proc.returncode} before printing the dashboard URL:\n"
                        f"{log.read_text()}")
        time.sleep(0.3)
    pytest.fail(f"no dashboard URL within 180 s:\n{log.read_text()}")


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def shown(page, testid: str) -> str:
    return page.get_by_test_id(testid).inner_text().strip()


def number(page, testid: str) -> int:
    return int(shown(page, testid).replace(",", ""))


def wait_until(condition, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(1)


def deltalake_rows(path: Path) -> int:
    return DeltaTable(str(path)).to_pyarrow_dataset().count_rows()


def logged(root: Path) -> list[dict]:
    table = DeltaTable(str(root / "_event_log")).to_pyarrow_dataset().to_table(
        use_threads=False)
    return table.to_pylist()


def test_dashboard_follows_a_running_demo_and_shows_what_the_tables_hold(browser, tmp_path):
    root = tmp_path / "demo"
    log = tmp_path / "demo.log"
    # stopped by `headwater stop` once the page has shown what the test needs (duration: a bound)
    demo, url = start(["demo", "--root", str(root), "--duration", "400", "--interval", "3",
                       "--dashboard-port", "0", "--plain"], log, tmp_path)
    folder = shots(tmp_path)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.wait_for_selector("body[data-loaded]", state="attached", timeout=30_000)

        def batches() -> int:
            text = page.get_by_test_id("flow-batches-bronze_orders")
            return int(text.inner_text().replace(",", "")) if text.count() else 0

        # it updates by itself while the pipeline runs: no reload
        wait_until(lambda: batches() >= 1, 240, "a first bronze batch on the page", log)
        first = batches()
        assert shown(page, "run-status") == "running"
        page.screenshot(path=str(folder / "dashboard-running.png"), full_page=True)
        wait_until(lambda: batches() > first, 120, "the page to show a later batch", log)
        late = page.get_by_test_id("late-dropped-color_counts")
        wait_until(lambda: late.count() > 0, 180, "a late colour event on the page", log)
        assert shown(page, "run-status") == "running"
        assert not errors, errors
        stop = subprocess.run(HEADWATER + ["stop", "--root", str(root)], capture_output=True,
                              text=True, timeout=300, env=_env())
        assert stop.returncode == 0 and "stopped 1 pipeline" in stop.stdout, stop.stdout
        code = demo.wait(timeout=60)
        assert code == 0, log.read_text()[-4000:]
        assert "stopping after the current micro-batches" in log.read_text()
    finally:
        end(demo)

    # The pipeline has ended: a dashboard of its own (no Spark), numbers against deltalake.
    server, url = start(["dashboard", "--root", str(root), "--port", "0"], tmp_path / "d.log",
                        tmp_path)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.goto(url)
        page.wait_for_selector("body[data-loaded]", state="attached", timeout=30_000)
        page.wait_for_selector("[data-testid='flow-batches-silver_orders']", timeout=30_000)
        assert shown(page, "pipeline-name") == "headwater-demo"
        assert shown(page, "run-status") == "completed"
        for name in ("bronze_orders", "silver_orders", "silver_orders__quarantine",
                     "revenue_by_country", "revenue_by_hour", "device_counts"):
            assert number(page, f"table-rows-{name}") == deltalake_rows(root / name), name
            assert number(page, f"table-version-{name}") == \
                DeltaTable(str(root / name)).version(), name

        events = logged(root)
        for flow in ("bronze_orders", "silver_orders", "device_counts"):
            progress = [e for e in events if e["event"] == "progress" and e["flow"] == flow]
            assert number(page, f"flow-batches-{flow}") == len(progress) > 0, flow
            assert number(page, f"flow-rows-{flow}") == sum(e["input_rows"] or 0
                                                            for e in progress), flow
            assert shown(page, f"flow-status-{flow}") == "completed"
        failed: dict[tuple[str, str], int] = {}  # (table, rule): silver_orders, customers
        for e in events:
            for rule, counts in json.loads(e["expectations"] or "{}").items():
                key = (e["table_name"], rule)
                failed[key] = failed.get(key, 0) + counts["failed"]
        assert {table for table, _ in failed} >= {"silver_orders", "customer_changes"}
        assert all(number(page, f"exp-failed-{table}-{rule}") == n
                   for (table, rule), n in failed.items())
        assert number(page, "quarantined-silver_orders") == \
            deltalake_rows(root / "silver_orders__quarantine") > 0
        # late colour events: rows Spark dropped behind the watermark, and the rows kept
        dropped = sum(e["late_rows_dropped"] or 0 for e in events
                      if e["event"] == "progress" and e["flow"] == "color_counts")
        assert dropped > 0  # one late event in 20 per landing, 2 hours behind
        assert number(page, "late-dropped-color_counts") == dropped
        assert number(page, "late-kept-color_counts") == \
            deltalake_rows(root / "color_counts__late") >= dropped
        # AUTO CDC: the customers flows' per-batch counts, summed, as the event log has them
        for flow in ("customers", "customers_history"):
            cdc = [json.loads(e["details"] or "{}").get("cdc") for e in events
                   if e["event"] == "progress" and e["flow"] == flow]
            totals = {k: sum(c[k] for c in cdc if c) for k in ("upserted", "history_rows")}
            assert totals["upserted"] > 0, (flow, cdc)
            assert number(page, f"cdc-upserted-{flow}") == totals["upserted"], flow
            assert number(page, f"cdc-history-{flow}") == totals["history_rows"], flow
        assert shown(page, "errors") == "No errors."
        graph = page.get_by_test_id("graph")
        for node in ("(files)", "bronze_orders", "silver_orders", "revenue_by_hour",
                     "devices_bronze", "device_counts"):
            assert graph.locator(f"[data-node='{node}']").count() == 1, node
        assert page.locator("svg[data-chart='duration_ms'] path").count() >= 3
        page.screenshot(path=str(folder / "dashboard.png"), full_page=True)
        assert (folder / "dashboard.png").stat().st_size > 20_000
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            assert server.wait(timeout=30) == 0
        finally:
            end(server)


# --- what it never exposes -------------------------------------------------------------------


def get(url: str, method: str = "GET", host: str | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, method=method)
    if host:
        request.add_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_dashboard_is_read_only_local_and_leaks_no_paths_or_secrets(tmp_path):
    from headwater.monitor.dashboard import DashboardServer
    from headwater.monitor.events import EventLog

    root = tmp_path / "lake"
    (root / "_runs").mkdir(parents=True)
    log = EventLog(root, "p", "run1")
    log.emit("run_started", details=json.dumps({"graph": {"t": {"kind": "table",
                                                                "upstream": []}}}))
    outside = tmp_path / "elsewhere" / "input.json"
    log.emit("flow_status", flow="t", table_name="t", status="failed",
             message=f"[HW_FLOW_FAILED] could not read file:{outside} nor {root}/t/part-0.parquet;"
                     " spark.hadoop.fs.s3a.secret.key=AKIAVERYSECRET password: 'hunter2'")
    log.emit("run_ended", status="failed", message="token=abc123def")
    log.close()
    assert not log.failures

    server = DashboardServer(root, port=0).start()
    try:
        assert server.host == "127.0.0.1"  # loopback unless the user binds wider
        base = server.url
        status, headers, body = get(base + "api/state")
        assert status == 200
        text = body.decode()
        state = json.loads(text)
        assert [e["flow"] for e in state["errors"]] == [None, "t"]  # newest first
        message = state["errors"][1]["message"]
        assert "t/part-0.parquet" in message  # inside the lakehouse: relative
        assert "<path outside the lakehouse>" in message
        for secret in ("AKIAVERYSECRET", "hunter2", "abc123def"):
            assert secret not in text
        assert str(tmp_path) not in text and "elsewhere" not in text
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"

        # nothing but the three GET routes: no SQL, no files, no writes
        for path in ("api/sql?q=SELECT%201", "api/query", "sql", "static/../../etc/passwd",
                     "..%2f..%2fetc%2fpasswd", "api/state/../../../etc/passwd", "api/tables/t",
                     "files?path=/etc/passwd", "_event_log"):
            assert get(base + path)[0] == 404, path
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert get(base + "api/state", method)[0] == 405, method
        # another site's name pointing at 127.0.0.1 (DNS rebinding) is refused
        assert get(base + "api/state", host="attacker.example")[0] == 403
        assert get(base, host=f"localhost:{server.port}")[0] == 200
    finally:
        server.stop()


def test_a_busy_port_is_a_clear_error(tmp_path):
    from headwater.errors import HeadwaterError
    from headwater.monitor.dashboard import DashboardServer

    first = DashboardServer(tmp_path, port=0).start()
    try:
        with pytest.raises(HeadwaterError) as err:
            DashboardServer(tmp_path, port=first.port)
        assert err.value.code == "HW_DASHBOARD_PORT" and "another port" in str(err.value)
    finally:
        first.stop()
