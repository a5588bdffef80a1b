"""Screenshots of the built docs site in headless Chromium (Debian's, as the dashboard tests).

    bash dev.sh docs && .venv/bin/python tools/docs_site/screenshot.py [--out DIR]

Serves site/ on a free port of 127.0.0.1, then takes four pictures: the home page (navigation
tabs and the search box), a search for an error code, a guide page with a code block and its
output, and the Benchmarks page with a chart. Prints each file it wrote (PNG, 48 colours).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import threading
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]


def serve(folder: Path) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", default=str(ROOT / "site"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    server = serve(Path(args.site))
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True,
                                        args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            shots = []
            page.goto(f"{base}/")
            shots.append(("home.png", None))
            page.screenshot(path=str(out / "home.png"))
            page.click("input.md-search__input")
            page.keyboard.type("HW_SOURCE_NOT_APPEND_ONLY", delay=20)  # as a user types
            page.wait_for_selector(".md-search-result__item", timeout=90000)
            page.screenshot(path=str(out / "search.png"))
            shots.append(("search.png", None))
            page.goto(f"{base}/guides/streaming-delta/")
            page.locator("h2#the-streaming-sink").scroll_into_view_if_needed()
            page.screenshot(path=str(out / "guide.png"))
            shots.append(("guide.png", None))
            page.goto(f"{base}/benchmarks/")
            page.locator("img[src*='charts/pipeline_vs_sdp-0.svg']").scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            page.screenshot(path=str(out / "benchmarks.png"))
            shots.append(("benchmarks.png", None))
            browser.close()
    finally:
        server.shutdown()
    for name, _ in shots:  # 48 colours: a fifth of the size, text still sharp
        image = Image.open(out / name).convert("RGB")
        image.quantize(colors=48, method=Image.Quantize.MEDIANCUT).save(out / name, optimize=True)
        print(out / name, (out / name).stat().st_size, "bytes")


if __name__ == "__main__":
    main()
