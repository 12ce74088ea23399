"""Runs a page's Python examples one after another in one namespace, as a reader would in one session.

``python tests/docs/run_python_examples.py BLOCKS.json``: a JSON list of ``[where, code]``. A block
may ``await`` at the top level (as in ``python -m asyncio``). The first that raises stops the run
with its traceback and exit status 1.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import sys
import traceback


def main(path: str) -> int:
    """Run every block of the JSON file at ``path``; 0 if all of them ran."""
    with open(path, encoding="utf-8") as file:
        blocks = json.load(file)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for where, code in blocks:
        print(f"--- python example {where}", file=sys.stderr, flush=True)
        try:
            compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(compiled, namespace)  # the docs' own examples
            if inspect.iscoroutine(result):
                asyncio.run(result)
        except BaseException:
            traceback.print_exc()
            print(f"python example {where} failed", file=sys.stderr)
            return 1
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
