#!/usr/bin/env python3
"""How long a report page takes to open in headless Chromium: from navigation to its load
event (parsing, style, layout, the page's script), not the browser's own start.

    python3 scripts/report_page_load.py PAGE.html [PAGE2.html ...] [--times 3]

The page is loaded in an iframe of a small wrapper page next to it, which records the time
to the iframe's load event in its title; Chromium prints the DOM, this reads the title.
Prints each page's size and the median of --times loads.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

WRAPPER = """<!DOCTYPE html><html><head><title>pending</title></head><body>
<script>var t0 = performance.now();</script>
<iframe src="{name}" style="width:1280px;height:900px" onload="document.title='loaded ' + (performance.now() - t0).toFixed(0)"></iframe>
</body></html>"""


def load_ms(page):
    folder = os.path.dirname(os.path.abspath(page))
    with tempfile.NamedTemporaryFile("w", suffix=".html", dir=folder, delete=False) as f:
        f.write(WRAPPER.format(name=os.path.basename(page)))
        wrapper = f.name
    try:
        with tempfile.TemporaryDirectory() as profile:
            out = subprocess.run(
                ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--allow-file-access-from-files",
                 f"--user-data-dir={profile}", "--dump-dom",
                 "file://" + wrapper],
                capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(wrapper)
    m = re.search(r"<title>loaded (\d+)</title>", out.stdout)
    if not m:
        raise SystemExit(f"{page}: the page did not finish loading: {out.stdout[:300]}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--times", type=int, default=3)
    a = ap.parse_args()
    for page in a.pages:
        times = [load_ms(page) for _ in range(a.times)]
        size = os.path.getsize(page)
        print(f"{page}: {size / 1e6:.2f} MB, load {statistics.median(times)} ms "
              f"(median of {a.times}: {times})")


if __name__ == "__main__":
    main()
