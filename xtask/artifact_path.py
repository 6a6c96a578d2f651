#!/usr/bin/env python3
"""The executable cargo built for target NAME, from `cargo build
--message-format=json…` on stdin (`make component`: a target dir or triple
set in a cargo config moves the binary, so its path is cargo's word)."""

import json
import sys

name = sys.argv[1]
found = [
    m["executable"]
    for m in map(json.loads, sys.stdin)
    if m.get("reason") == "compiler-artifact"
    and m["target"]["name"] == name
    and m.get("executable")
]
if not found:
    sys.exit(f"artifact_path: cargo reported no executable named {name}")
print(found[-1])
