"""A document uploaded through the DeepL or LibreTranslate door, checked before it is queued.

The orchestrator would find a ``.docx`` that is not a zip only after the upload was answered (a
DeepL ``error`` status, a LibreTranslate wait); refusing it at the upload tells the client at once.
"""

from __future__ import annotations

import io
import zipfile

from contract.documents import encode_document
from contract.errors import InvalidJobError


def stored_document(fmt: str, data: bytes) -> str:
    """``data`` as dragoman stores a document of format ``fmt``; :class:`InvalidJobError` if it cannot be one.

    A ``docx`` must be a zip archive (a Word document); text formats must be UTF-8 (:func:`encode_document`).
    """
    if fmt == "docx" and not zipfile.is_zipfile(io.BytesIO(data)):
        raise InvalidJobError("the .docx file is not a Word document (not a zip archive); send the .docx Word saved")
    return encode_document(fmt, data)
