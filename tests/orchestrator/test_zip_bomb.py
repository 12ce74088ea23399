"""Zip bombs: a ``.docx`` is unpacked only up to ``DRAGOMAN_MAX_DOCUMENT_UNPACKED_BYTES``, never read whole first.

Before, a 100 KiB ``.docx`` holding a 100 MiB zeroed member took an rq-worker to 908 MiB: the size
limit counted the compressed upload only. Memory is asserted here by the bytes the reader takes
out of the archive (a counter on ``ZipExtFile.read``), not by RSS.
"""

from __future__ import annotations

import base64
import io
import struct
import zipfile
from collections.abc import Iterator

import pytest

from contract.errors import DocumentTooLargeError, InvalidJobError
from orchestrator.segmenting import split_document
from orchestrator.segmenting.zip_container import READ_CHUNK
from tests.orchestrator.test_document_formats import make_docx

MIB = 1024 * 1024
BOMB_MEMBER = "word/media/zeros.bin"


def bomb(member_bytes: int = 100 * MIB, *, declared: int | None = None) -> bytes:
    """A real .docx plus one member of ``member_bytes`` zeros (deflated to about a thousandth).

    ``declared``: the size the central directory claims for that member instead (a lying header).
    """
    buffer = io.BytesIO(make_docx())
    with zipfile.ZipFile(buffer, "a", zipfile.ZIP_DEFLATED) as archive:
        with archive.open(BOMB_MEMBER, "w") as member:
            chunk = bytes(MIB)
            for _ in range(member_bytes // MIB):
                member.write(chunk)
    data = buffer.getvalue()
    if declared is not None:
        data = _declare(data, BOMB_MEMBER, declared)
    return data


def _declare(data: bytes, name: str, size: int) -> bytes:
    """``data`` with ``name``'s uncompressed size in the central directory set to ``size``."""
    at = data.find(b"PK\x01\x02")  # the first central directory header
    encoded = name.encode()
    while at != -1:
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + name_length] == encoded:
            return data[: at + 24] + struct.pack("<I", size) + data[at + 28 :]
        at = data.find(b"PK\x01\x02", at + 4)
    raise AssertionError(f"{name} not in the central directory")


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A running total of the bytes read out of any zip member, in a one-item list."""
    total = [0]
    original = zipfile.ZipExtFile.read

    def counted(self: zipfile.ZipExtFile, n: int | None = -1) -> bytes:
        data = original(self, n)
        total[0] += len(data)
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counted)
    yield total


def test_the_bomb_is_small_and_expands_a_thousandfold() -> None:
    data = bomb()
    assert len(data) < 200 * 1024
    assert sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(data)).infolist()) > 100 * MIB


def test_a_member_declared_past_the_cap_is_refused_before_anything_is_read(bytes_read: list[int]) -> None:
    source = base64.b64encode(bomb()).decode()
    with pytest.raises(DocumentTooLargeError) as refused:
        split_document(source, "docx", 200, max_unpacked_bytes=8 * MIB)
    assert BOMB_MEMBER in str(refused.value) and "DRAGOMAN_MAX_DOCUMENT_UNPACKED_BYTES" in str(refused.value)
    assert bytes_read[0] == 0


def test_a_member_whose_header_lies_about_its_size_is_read_no_further_than_the_cap(bytes_read: list[int]) -> None:
    # The central directory says 1 KiB; the member inflates to 100 MiB.
    source = base64.b64encode(bomb(declared=1024)).decode()
    cap = 8 * MIB
    with pytest.raises(InvalidJobError) as refused:
        split_document(source, "docx", 200, max_unpacked_bytes=cap)
    assert BOMB_MEMBER in str(refused.value)
    assert bytes_read[0] <= cap + READ_CHUNK


def test_members_are_counted_together(bytes_read: list[int]) -> None:
    # Two members of 5 MiB each: each under an 8 MiB cap, together over it.
    buffer = io.BytesIO(bomb(5 * MIB))
    with zipfile.ZipFile(buffer, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/media/more.bin", bytes(5 * MIB))
    with pytest.raises(DocumentTooLargeError, match=r"word/media/more\.bin"):
        split_document(base64.b64encode(buffer.getvalue()).decode(), "docx", 200, max_unpacked_bytes=8 * MIB)
    assert bytes_read[0] == 0


def test_a_document_under_the_cap_still_splits() -> None:
    source = base64.b64encode(bomb(2 * MIB)).decode()
    skeleton = split_document(source, "docx", 200, max_unpacked_bytes=8 * MIB)
    assert skeleton.segments
    assert skeleton.source().count(base64.b64encode(bytes(3)).decode()) > 0  # the zeros came back as they were
