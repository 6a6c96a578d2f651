#!/usr/bin/env python3
"""Check the anchors mdbook-linkcheck2 does not: every link between the
built book's pages that names an anchor (`page.html#heading`, `#heading`)
must find that id on the page; and every chapter the code cites
(a chapter path with its heading, in a comment of a tracked source file) must be a
page of the built book with that heading. Run by `make docs` after mdbook.

  python3 docs/check_anchors.py target/book/html
"""
import os
import re
import subprocess
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


SOURCES = ["*.rs", "*.py", "*.pyi", "*.wit", "*.toml", "*.sh", "Makefile"]


def code_citations(root):
    """`(file, citation)` for each `docs/src/….md[#anchor]` a source cites."""
    files = subprocess.run(
        ["git", "ls-files", *SOURCES], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    files = [name for name in files if name != "docs/check_anchors.py"]
    found = []
    for name in files:
        with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
            for cite in re.findall(r"docs/src/[\w/-]+\.md(?:#[\w-]+)?", f.read()):
                found.append((name, cite))
    return found


def main(html_dir):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad, links = book_anchors(html_dir)
    cites = code_citations(root)
    for source, cite in cites:
        path, _, anchor = cite.partition("#")
        page = os.path.join(html_dir, path[len("docs/src/"):-3] + ".html")
        if not os.path.exists(page):
            bad.append(f"{source}: {path} is not a page of the book")
        elif anchor and anchor not in ids(page):
            bad.append(f"{source}: {path} has no heading #{anchor}")
    for b in bad:
        print("docs:", b, file=sys.stderr)
    if bad:
        sys.exit(1)
    print(f"anchors: {links} links with an anchor resolve; {len(cites)} citations in the code found")


if __name__ == "__main__":
    main(sys.argv[1])
