#!/usr/bin/env python3
"""Fails when the built book (docs/book, by `mdbook build docs`) has a broken link: a relative
href or src whose file is missing, or whose #fragment names no element of that page. Links
to other sites are not fetched (the book must build offline).

    python3 scripts/check_book_links.py [docs/book]
"""
import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key):
                self.links.append(a[key])


def parse(path, cache):
    if path not in cache:
        p = Page()
        with open(path, encoding="utf-8") as f:
            p.feed(f.read())
        cache[path] = p
    return cache[path]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "docs/book")
    if not os.path.isfile(os.path.join(root, "index.html")):
        sys.exit(f"{root}: no built book here (run `mdbook build docs` first)")
    cache, broken, pages = {}, [], 0
    for here, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".html"):
                continue
            page = os.path.join(here, name)
            pages += 1
            for link in parse(page, cache).links:
                url = urllib.parse.urlsplit(link)
                if url.scheme or link.startswith("//") or link.startswith("mailto:"):
                    continue
                path = urllib.parse.unquote(url.path)
                if not path:
                    target = page
                elif path.startswith("/"):  # the site's root (404.html's base)
                    target = os.path.normpath(os.path.join(root, path.lstrip("/")))
                else:
                    target = os.path.normpath(os.path.join(os.path.dirname(page), path))
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
                where = os.path.relpath(page, root)
                if not os.path.exists(target):
                    broken.append(f"{where}: {link} (no such file)")
                elif url.fragment and target.endswith(".html") \
                        and url.fragment not in parse(target, cache).ids:
                    broken.append(f"{where}: {link} (no #{url.fragment} there)")
    for b in broken:
        print(f"broken link: {b}")
    print(f"{pages} pages, {len(broken)} broken link(s)")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
