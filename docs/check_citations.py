#!/usr/bin/env python3
"""Check that every citation target of docs/citations.tsv exists: a book
page (`docs/src/X.md`) in the built book, with its anchor when one is
named; any other file of the repository, with a Markdown heading whose
GitHub-style slug is the anchor. Run by `make docs` after mdbook.

  python3 docs/check_citations.py target/book/html docs/citations.tsv
"""
import os
import re
import sys


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def main(html_dir, tsv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(tsv)))
    bad = []
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
        print("citation:", b, file=sys.stderr)
    if bad:
        sys.exit(1)
    print(f"citations: {len(rows)} targets of {tsv} found")


if __name__ == "__main__":
    main(*sys.argv[1:3])
