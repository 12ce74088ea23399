"""What `make test-latest` installed that the lock does not pin: ``python requirements/newer.py LOCK FREEZE``.

Prints one line per package whose version differs from the lock's (``redis 8.1.0 -> 8.2.0``), and the
packages the lock lacks; what the newest releases changed is then next to what broke.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def pins(text: str) -> dict[str, str]:
    """``name==version`` lines of a lock or of ``pip list --format=freeze``, by normalised name."""
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in _PIN.findall(text)}


def main(lock_path: str, freeze_path: str) -> None:
    """Print how the installed set differs from the lock."""
    locked = pins(Path(lock_path).read_text(encoding="utf-8"))
    installed = pins(Path(freeze_path).read_text(encoding="utf-8"))
    changed = [
        f"  {name} {locked[name]} -> {version}"
        for name, version in sorted(installed.items())
        if name in locked and locked[name] != version
    ]
    added = [
        f"  {name} {version} (not in the lock)"
        for name, version in sorted(installed.items())
        if name not in locked and name not in ("dragoman", "pip")  # pip: the venv's own, never locked
    ]
    print("\n".join(changed + added) if changed or added else "  the same versions as the lock")


if __name__ == "__main__":
    main(*sys.argv[1:3])
