"""The documentation's picture of the dashboard (docs/img/dashboard.png), taken during a real crawl.

    python tests/live/dashboard_screenshot.py [docs/img/dashboard.png] [--seconds 75]

A crawl (tests/kits/dashboard_crawl_child.py: a site on loopback addresses, one host blocked,
every 37th page failing, status.json published, its log written to crawl.log) runs in a child
process; ``diskfrontier serve --log crawl.log`` runs in another; after ``--seconds`` of history,
headless Chromium (/usr/bin/chromium) takes the whole page.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kits"))

from paths import KITS, REPO
from servekit import CHROMIUM, Lines, Served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", nargs="?", default=os.path.join(REPO, "docs", "img", "dashboard.png"))
    parser.add_argument("--seconds", type=float, default=75.0, help="history to gather before the picture")
    parser.add_argument("--width", type=int, default=1400)
    args = parser.parse_args()
    import subprocess

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as work:
        jobdir = os.path.join(work, "crawls", "shop")
        log = open(os.path.join(work, "crawl.log"), "a")  # noqa: SIM115 - the child's stderr, closed below
        crawl = subprocess.Popen([sys.executable, os.path.join(KITS, "dashboard_crawl_child.py"), jobdir,
                                  "--workers", "4", "--page-delay", "0.03", "--host-delay", "0.02", "--block", "3",
                                  "--publish"], stdout=subprocess.PIPE, stderr=log, text=True, cwd=work)
        try:
            Lines(crawl).wait_for("crawling", 60)
            with Served(os.path.relpath(jobdir, work), "--interval", "1", "--log", "crawl.log", cwd=work) as served, \
                    sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM)
                page = browser.new_page(viewport={"width": args.width, "height": 900}, device_scale_factor=1)
                page.goto(served.url)
                time.sleep(args.seconds)
                page.mouse.move(10, 10)
                page.screenshot(path=args.output, full_page=True)
                browser.close()
        finally:
            crawl.terminate()
            crawl.wait(120)
            log.close()
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
