"""Takes docs/thread.png, the README's picture of a thread: ``harness bot --emulator`` started
on the shipped config in a temporary folder (scripted model, offline), a DM sent from its page
in headless chromium, the picture taken once the agents answered.

    .venv/bin/python docs/screenshot.py [--out docs/thread.png]

Needs the test extra (playwright) and Debian's chromium (``apt-get install -y chromium``), and
for its emoji ``fonts-noto-color-emoji``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from bot.testing.emulator_browser import emulator_process, launch
from harness.cli.scaffold import init_project

REQUEST = "plan: a settings page with a dark mode toggle"
ANSWER = 180_000  # ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    here = Path(__file__).resolve().parent
    parser.add_argument("--out", type=Path, default=here / "thread.png", help="the PNG to write")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    with tempfile.TemporaryDirectory(prefix="harness-screenshot-") as tmp:
        folder = Path(tmp)
        init_project(folder)
        with emulator_process(folder / "config.yaml", env=env) as bot, sync_playwright() as pw:
            browser = launch(pw)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 960})
                page.goto(bot.url)
                page.locator("#composer-text").fill(REQUEST)
                page.locator("#composer-text").press("Enter")
                answer = page.locator("#thread-messages .msg", has_text="product-analyst finished")
                expect(answer).to_contain_text("Good result", timeout=ANSWER)
                page.locator("#thread-messages").evaluate("el => { el.scrollTop = 0; }")
                page.screenshot(path=str(args.out))
            finally:
                browser.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
