"""Run GNU gettext's ``msgfmt -c`` on a catalogue a test produced: the check translators' tools run.

``make test`` installs ``gettext`` where ``msgfmt`` is missing (its ``gettext`` target), so a
missing ``msgfmt`` is a failure that says so, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def assert_msgfmt_accepts(po: str, name: str = "out.po") -> None:
    """Fail, with msgfmt's own words, unless ``msgfmt -c`` accepts ``po`` (warnings allowed, errors not)."""
    msgfmt = shutil.which("msgfmt")
    assert msgfmt is not None, "msgfmt is missing: `make test-fast` installs it (apt-get install gettext)"
    with tempfile.TemporaryDirectory(prefix="msgfmt-") as folder:
        path = Path(folder) / name
        path.write_text(po, encoding="utf-8")
        result = subprocess.run(
            [msgfmt, "-c", "-o", os.devnull, str(path)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"msgfmt -c rejects {name}:\n{result.stderr}\n{po}"
