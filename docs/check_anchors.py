#!/usr/bin/env python3
"""Check the anchors mdbook-linkcheck2 does not: every link between the
built book's pages that names an anchor (`page.html#heading`, `#heading`)
must find that id on the page; and every citation target of
docs/citations.tsv must exist: a book page (`docs/src/X.md`) in the built
book, with its anchor when one is named; any other file of the
repository, with a Markdown heading whose GitHub-style slug is the
anchor. Run by `make docs` after mdbook.

  python3 docs/check_anchors.py target/book/html docs/citations.tsv
"""
import os
import re
import sys


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


SKIP = {"print.html", "toc.html", "404.html"}


def ids(page, cache={}):
    if page not in cache:
        cache[page] = set(re.findall(r'\bid="([^"]+)"', open(page, encoding="utf-8").read()))
    return cache[page]


def book_anchors(html_dir):
    """Every internal link with an anchor, checked against the page's ids."""
    bad, n = [], 0
    for dirpath, _, files in os.walk(html_dir):
        for name in files:
            if not name.endswith(".html") or name in SKIP:
                continue
            page = os.path.join(dirpath, name)
            for href in re.findall(r'href="([^"]*#[^"]+)"', open(page, encoding="utf-8").read()):
                if re.match(r"^[a-z]+:", href):
                    continue
                path, _, anchor = href.partition("#")
                target = os.path.normpath(os.path.join(dirpath, path)) if path else page
                n += 1
                if not os.path.exists(target):
                    bad.append(f"{os.path.relpath(page, html_dir)}: {href}: no such page")
                elif anchor not in ids(target):
                    bad.append(f"{os.path.relpath(page, html_dir)}: {href}: no such heading")
    return bad, n


def main(html_dir, tsv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(tsv)))
    bad, links = book_anchors(html_dir)
    with open(tsv, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for old, new in rows:
        target = new.rstrip(".")
        path, _, anchor = target.partition("#")
        if path.startswith("docs/src/") and path.endswith(".md"):
            page = os.path.join(html_dir, path[len("docs/src/"):-3] + ".html")
            if not os.path.exists(page):
                bad.append(f"{old}: {path} is not a page of the book")
                continue
            if anchor and f'id="{anchor}"' not in open(page, encoding="utf-8").read():
                bad.append(f"{old}: {path} has no heading #{anchor}")
        else:
            full = os.path.join(root, path)
            if not os.path.exists(full):
                bad.append(f"{old}: {path} does not exist")
                continue
            if anchor:
                heads = [slug(m) for m in re.findall(r"^#+ (.+)$", open(full, encoding="utf-8").read(), re.M)]
                if anchor not in heads:
                    bad.append(f"{old}: {path} has no heading #{anchor}")
    for b in bad:
        print("docs:", b, file=sys.stderr)
    if bad:
        sys.exit(1)
    print(f"anchors: {links} links with an anchor resolve; citations: {len(rows)} targets of {tsv} found")


if __name__ == "__main__":
    main(*sys.argv[1:3])
