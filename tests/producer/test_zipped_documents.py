"""A zipped-format document (.docx, .pptx, .odt, .epub...) that is not a zip is refused at submit, by every door.

Before, only the DeepL and LibreTranslate uploads checked it: the native ``POST /v1/documents``, the Python
client and ``dragoman translate FILE`` accepted it and the document failed later, when the orchestrator split it.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import redis

from contract.errors import InvalidJobError
from contract.settings import Settings
from producer.client import Client
from tests.orchestrator.office_files import make_pptx


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The CLI reads its settings from the environment."""


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        (base64.b64encode(make_pptx()[:-40]).decode(), "pptx", r"the \.pptx file is not a zip archive"),
        (base64.b64encode(b"plain text").decode(), "odt", r"the \.odt file is not a zip archive"),
        ("Plain text, not base64!", "docx", r"the \.docx document is not base64"),
    ],
)
def test_the_client_refuses_a_zipped_document_that_is_not_a_zip(
    client: Client, raw_redis: redis.Redis, text: str, fmt: str, message: str
) -> None:
    with pytest.raises(InvalidJobError, match=message):
        client.submit_document(text, fmt, "en", "fr")
    assert raw_redis.xlen(client.keys.jobs_stream) == 0


def test_translate_refuses_a_truncated_pptx_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No orchestrator runs here: before, the command waited for a split that never came, then timed out."""
    from cli.main import EXIT_BAD_INPUT, main

    deck = tmp_path / "deck.pptx"
    deck.write_bytes(make_pptx()[: len(make_pptx()) // 2])
    args = ["translate", str(deck), "--from", "en", "--to", "fr", "--no-progress", "--timeout", "3"]
    assert main(args) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "the .pptx file is not a zip archive, so not a real .pptx" in err, err
