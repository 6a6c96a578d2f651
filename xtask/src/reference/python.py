"""Write the Python API's reference page (Markdown, on stdout) from the
package's type stubs: `python3 python.py PACKAGE_DIR`.

Run by `cargo run -q -p xtask -- docs` (xtask/src/reference/python.rs).
Standard library only (`ast`): the stubs are read, never imported, so no
built extension is needed.
"""

import ast
import re
import sys
from pathlib import Path


def comments_above(lines, lineno):
    """The `#` comment lines right above line `lineno` (1-based), as text."""
    out = []
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        out.insert(0, lines[i].strip().lstrip("#:").strip())
        i -= 1
    return " ".join(out)


def cell(text):
    return " ".join(text.split()).replace("|", "\\|")


def docstring(node):
    """The docstring, Sphinx roles (`:class:` `X`) as plain code."""
    text = ast.get_docstring(node) or ""
    return re.sub(r":[a-z]+:`([^`]+)`", r"``\1``", text.strip())


def typed_dicts(classes):
    """Names of the classes that are TypedDicts, directly or by a base."""
    names = {"TypedDict"}
    changed = True
    while changed:
        changed = False
        for node in classes:
            if node.name not in names and any(
                isinstance(b, ast.Name) and b.id in names for b in node.bases
            ):
                names.add(node.name)
                changed = True
    names.discard("TypedDict")
    return names


def signature(fn):
    """`name(args) -> ret` without `self`."""
    args = fn.args
    copy = ast.arguments(
        posonlyargs=args.posonlyargs,
        args=[a for a in args.args if a.arg != "self"],
        vararg=args.vararg,
        kwonlyargs=args.kwonlyargs,
        kw_defaults=args.kw_defaults,
        kwarg=args.kwarg,
        defaults=args.defaults,
    )
    ret = f" -> {ast.unparse(fn.returns)}" if fn.returns else ""
    return f"{fn.name}({ast.unparse(copy)}){ret}"


def typed_dict(node, lines, out):
    bases = [ast.unparse(b) for b in node.bases if ast.unparse(b) != "TypedDict"]
    total = all(
        not (k.arg == "total" and isinstance(k.value, ast.Constant) and k.value.value is False)
        for k in node.keywords
    )
    out.append(f"### `{node.name}`\n")
    about = docstring(node)
    if about:
        out.append(about + "\n")
    if bases:
        keys = ", ".join(f"`{b}`" for b in bases)
        out.append(f"A dict with the keys of {keys} and these:\n")
    if not total:
        out.append("Each key may be missing.\n")
    out.append("| key | type | meaning |\n| --- | --- | --- |")
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            note = comments_above(lines, item.lineno)
            out.append(
                f"| `{item.target.id}` | `{cell(ast.unparse(item.annotation))}` | {cell(note)} |"
            )
    out.append("")


def function(fn, out, owner=None):
    text = signature(fn)
    if owner:
        text = owner + text[len("__init__"):] if fn.name == "__init__" else f"{owner}.{text}"
    out.append(f"### `{text}`\n")
    about = docstring(fn)
    if about:
        out.append(about + "\n")


def klass(node, out):
    out.append(f"## `{node.name}`\n")
    about = docstring(node)
    if about:
        out.append(about + "\n")
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            out.append(f"- `{item.target.id}: {ast.unparse(item.annotation)}`")
    if any(isinstance(i, ast.AnnAssign) for i in node.body):
        out.append("")
    for item in node.body:
        if not isinstance(item, ast.FunctionDef):
            continue
        if item.name.startswith("_") and item.name != "__init__":
            continue
        is_property = any(
            isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list
        )
        if is_property:
            ret = ast.unparse(item.returns) if item.returns else "Any"
            out.append(f"### `{node.name}.{item.name}: {ret}` (read-only)\n")
            about = docstring(item)
            if about:
                out.append(about + "\n")
        else:
            function(item, out, node.name)


def main(package):
    package = Path(package)
    init = ast.parse((package / "__init__.py").read_text())
    out = [
        "<!-- Generated from the Python package's type stubs "
        f"({package.as_posix()}/*.pyi) by `cargo run -q -p xtask -- docs` "
        "(`make reference`); do not edit by hand. -->\n",
        "# Python API: `session_switch`\n",
        docstring(init) + "\n",
    ]
    exported = []
    for node in init.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            exported = [e.value for e in node.value.elts]
    if exported:
        out.append("Exported: " + ", ".join(f"`{e}`" for e in exported) + ".\n")
    for stub in sorted(package.glob("*.pyi")):
        text = stub.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        out.append(f"Stubs: `{stub.name}`. {docstring(tree)}\n")
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        answers = typed_dicts(classes)
        for node in classes:
            if node.name not in answers:
                klass(node, out)
        functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        if functions:
            out.append("## Functions\n")
            for fn in functions:
                function(fn, out)
        aliases = [
            n for n in tree.body
            if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and not n.targets[0].id.startswith("_")
        ]
        if aliases:
            out.append("## Types\n")
            for node in aliases:
                out.append(f"- `{node.targets[0].id}`: `{ast.unparse(node.value)}`")
            out.append("")
        typed = [n for n in classes if n.name in answers]
        if typed:
            out.append("## Answers\n")
            out.append(
                "Dicts in the CLI's JSON shapes ([JSON answers](json.md)); each "
                "`TypedDict`'s keys:\n"
            )
            for node in typed:
                typed_dict(node, lines, out)
    sys.stdout.write("\n".join(out).rstrip("\n") + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
