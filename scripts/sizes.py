"""Largest classes and longest functions of each service, from the source's syntax tree.

Usage: `uv run --no-sync python scripts/sizes.py [--functions N] [--class-limit L]
[--function-limit L] [services/NAME ...]` (default: every service). Prints, per service, its
largest class and its longest functions (lines from the `def`/`class` line to the last line of
the body, decorators excluded; a function's nested functions and classes are counted as their
own, not in it, so a router factory is not the sum of its routes), and lists every class over
`--class-limit` (350) and every function over `--function-limit` (80) lines, the sizes the
repository holds itself to (issue 23).
Exit status 0 always: a report, not a gate.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Block:
    """One class or function: where it is and how many lines it spans."""

    kind: str  # "class" or "def"
    name: str  # qualified: Class.method, outer.inner
    path: Path
    line: int
    lines: int

    def __str__(self) -> str:
        return f"{self.lines:5d}  {self.name}  ({self.path.relative_to(ROOT)}:{self.line})"


_NESTED = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _span(node: ast.stmt) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1


def _own_lines(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A class's whole span; a function's span less the functions and classes nested in it."""
    if isinstance(node, ast.ClassDef):
        return _span(node)
    own = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    for child in ast.walk(node):
        if child is not node and isinstance(child, _NESTED):
            first = min([d.lineno for d in child.decorator_list] + [child.lineno])
            own -= set(range(first, (child.end_lineno or child.lineno) + 1))
    return len(own)


def blocks(path: Path) -> list[Block]:
    """Every class and function of one module, nested ones included, with qualified names."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    found: list[Block] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _NESTED):
                name = f"{prefix}{child.name}"
                kind = "class" if isinstance(child, ast.ClassDef) else "def"
                found.append(Block(kind, name, path, child.lineno, _own_lines(child)))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def service_blocks(service: Path) -> list[Block]:
    """The blocks of a service's `src/` (tests and migrations left out)."""
    found: list[Block] = []
    for path in sorted((service / "src").rglob("*.py")):
        if "migrations" not in path.parts:
            found.extend(blocks(path))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("services", nargs="*", type=Path, help="service directories")
    parser.add_argument("--functions", type=int, default=3, help="longest functions shown")
    parser.add_argument("--class-limit", type=int, default=350)
    parser.add_argument("--function-limit", type=int, default=80)
    args = parser.parse_args(argv)
    services = [p.resolve() for p in args.services] or sorted((ROOT / "services").iterdir())
    for service in services:
        if not (service / "src").is_dir():
            continue
        found = service_blocks(service)
        classes = sorted((b for b in found if b.kind == "class"), key=lambda b: -b.lines)
        functions = sorted((b for b in found if b.kind == "def"), key=lambda b: -b.lines)
        print(f"== {service.name}")
        if classes:
            print(f"  largest class:\n    {classes[0]}")
        print("  longest functions:")
        for block in functions[: args.functions]:
            print(f"    {block}")
        over = [b for b in classes if b.lines > args.class_limit]
        over += [b for b in functions if b.lines > args.function_limit]
        if over:
            print(f"  over the limits ({args.class_limit} / {args.function_limit} lines):")
            for block in over:
                print(f"    {block.kind:5s} {block}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
