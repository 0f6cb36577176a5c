"""`quiz-eval <name> [args]`: the evaluation harnesses of the services, one command.

Each service registers its harness in the `quiz_eval` entry-point group (`lesson-fix`,
`review`, …) as a `main(argv) -> int`; this dispatcher finds it by name and passes the rest of
the command line on. `quiz-eval` alone lists them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

GROUP = "quiz_eval"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness named by the first argument; exit status is the harness's."""
    args = list(sys.argv[1:] if argv is None else argv)
    harnesses = {e.name: e for e in entry_points(group=GROUP)}
    if not args or args[0] in ("-h", "--help"):
        print("usage: quiz-eval <harness> [options]   (quiz-eval <harness> --help)")
        print("harnesses: " + (", ".join(sorted(harnesses)) or "none installed"))
        return 0 if args else 2
    name, rest = args[0], args[1:]
    entry = harnesses.get(name)
    if entry is None:
        print(
            f"quiz-eval: no harness {name!r} (have: {', '.join(sorted(harnesses))})",
            file=sys.stderr,
        )
        return 2
    return int(entry.load()(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
