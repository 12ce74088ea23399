"""What the issue 33 hardening costs and saves: the JSON body check per request, the .docx unpack's memory.

    python -m bench.hardening [--rounds 5] [--bomb-mib 100] [--out bench/results/issue33/hardening.json]

**Body check**: ``api.input_check.bad_json_escape`` (the scan every JSON body now gets) against
``json.loads`` of the same body (which FastAPI does anyway), on the bodies ``POST /v1/jobs`` takes:
one short job, a list of 1,000 English jobs, of 1,000 Japanese ones as ``json.dumps`` writes them
(every character a ``\\u`` escape) and of 1,000 with emoji (escaped surrogate pairs). Best of
``--rounds``.

**Zip bomb**: a real ``.docx`` plus one member of ``--bomb-mib`` MiB of zeros (about 100 KiB
deflated). The peak Python memory (``tracemalloc``) of reading every member whole, as the splitter
did before, against :func:`orchestrator.segmenting.zip_container.unpack` with the default cap, which refuses it.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import platform
import sys
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from api.input_check import bad_json_escape
from contract.errors import DocumentTooLargeError
from orchestrator.segmenting.docx import DOCX
from orchestrator.segmenting.zip_container import DEFAULT_MAX_UNPACKED_BYTES, unpack

MIB = 1024 * 1024


def _bodies() -> dict[str, bytes]:
    job = {"source_lang": "en", "target_lang": "fr", "metadata": {"ticket": "T-1"}}
    english = "The quick brown fox jumps over the lazy dog, twice a day. " * 2
    japanese = "素早い茶色の狐がのろまな犬を飛び越える。" * 3
    emoji = "Great job 😀👍 see you 🎉 tomorrow 🚀. " * 2
    return {
        "one short job": json.dumps({**job, "text": "Good morning."}).encode(),
        "1,000 English jobs": json.dumps([{**job, "text": english}] * 1000).encode(),
        "1,000 Japanese jobs (escaped)": json.dumps([{**job, "text": japanese}] * 1000).encode(),
        "1,000 emoji jobs (escaped pairs)": json.dumps([{**job, "text": emoji}] * 1000).encode(),
    }


def _best(fn: Callable[[], object], rounds: int) -> float:
    """The fastest of ``rounds`` timings of ``fn`` (seconds), each repeated to last at least 50 ms."""
    repeat = 1
    while True:
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        if time.perf_counter() - started >= 0.05:
            break
        repeat *= 2
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - started) / repeat)
    return best


def body_check(rounds: int) -> list[dict[str, Any]]:
    """The scan's time against ``json.loads``' for each body."""
    rows = []
    for name, body in _bodies().items():
        assert bad_json_escape(body) is None
        scan = _best(partial(bad_json_escape, body), rounds)
        parse = _best(partial(json.loads, body), rounds)
        rows.append(
            {
                "body": name,
                "bytes": len(body),
                "scan_us": round(scan * 1e6, 1),
                "json_loads_us": round(parse * 1e6, 1),
                "scan_over_parse": round(scan / parse, 3),
                "scan_mb_per_s": round(len(body) / scan / 1e6, 1),
            }
        )
    return rows


def _bomb(mib: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "word/document.xml", "<w:document><w:body><w:p><w:r><w:t>Hi.</w:t></w:r></w:p></w:body></w:document>"
        )
        with archive.open("word/media/zeros.bin", "w") as member:
            for _ in range(mib):
                member.write(bytes(MIB))
    return buffer.getvalue()


def _peak(fn: Callable[[], object]) -> tuple[int, str]:
    tracemalloc.start()
    try:
        outcome = "read"
        try:
            fn()
        except DocumentTooLargeError as exc:
            outcome = f"refused: {exc}"
        return tracemalloc.get_traced_memory()[1], outcome
    finally:
        tracemalloc.stop()


def zip_bomb(mib: int) -> dict[str, Any]:
    """Peak memory of unpacking the bomb the old way (every member read whole) and with the cap."""
    data = _bomb(mib)
    source = base64.b64encode(data).decode()

    def whole() -> None:  # what the splitter did before: archive.read of every member, then base64
        archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(source)))
        parts = [base64.b64encode(archive.read(name)).decode() for name in archive.namelist()]
        assert parts

    before, _ = _peak(whole)
    after, outcome = _peak(lambda: unpack(source, DOCX))
    return {
        "upload_bytes": len(data),
        "unpacked_bytes": mib * MIB,
        "cap_bytes": DEFAULT_MAX_UNPACKED_BYTES,
        "peak_before_mib": round(before / MIB, 1),
        "peak_after_mib": round(after / MIB, 2),
        "after": outcome,
    }


def main() -> None:
    """Run both measurements, print them, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bomb-mib", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("bench/results/issue33/hardening.json"))
    args = parser.parse_args()
    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "body_check": body_check(args.rounds),
        "zip_bomb": zip_bomb(args.bomb_mib),
    }
    for row in result["body_check"]:
        print(
            f"{row['body']:34} {row['bytes']:>9,} B  scan {row['scan_us']:>9.1f} us  "
            f"json.loads {row['json_loads_us']:>9.1f} us  = {row['scan_over_parse']:.3f}x"
        )
    print(json.dumps(result["zip_bomb"], indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
