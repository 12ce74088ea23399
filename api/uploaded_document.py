"""A document uploaded through the DeepL or LibreTranslate door, checked before it is queued.

The orchestrator would find a ``.docx`` (or any zipped format) that is not a zip only after the upload was answered (a
DeepL ``error`` status, a LibreTranslate wait); refusing it at the upload tells the client at once.
"""

from __future__ import annotations

import io
import zipfile

from contract.documents import ZIPPED_FORMATS, encode_document
from contract.errors import InvalidJobError


def stored_document(fmt: str, data: bytes) -> str:
    """``data`` as dragoman stores a document of format ``fmt``; :class:`InvalidJobError` if it cannot be one.

    A zipped format (``.docx``, ``.pptx``, ``.odt``, ``.epub``...) must be a zip archive; text formats
    must be UTF-8 (:func:`encode_document`).
    """
    if fmt in ZIPPED_FORMATS and not zipfile.is_zipfile(io.BytesIO(data)):
        raise InvalidJobError(
            f"the .{fmt} file is not a zip archive, so not a real .{fmt}; send the file as its application saved it"
        )
    return encode_document(fmt, data)
