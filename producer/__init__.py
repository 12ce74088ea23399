"""dragoman's producer side: what applications import to enqueue translations and poll them.

It never imports an inference engine. ``from producer import Client`` is the entry point
(``AsyncClient`` for asyncio applications).
"""

from contract.errors import (
    ConfigurationError,
    DragomanError,
    EmptyTextError,
    InvalidJobError,
    InvalidMetadataError,
    JobNotCancellableError,
    JobNotFoundError,
    JobTimeoutError,
    MalformedEntryError,
    TextTooLongError,
    UnsupportedLanguageError,
)
from contract.schemas import Job, JobStatus, TranslationRequest
from contract.settings import Settings
from producer.async_client import AsyncClient
from producer.client import Client
from producer.requests import InvalidJobIdError

__all__ = [
    "AsyncClient",
    "Client",
    "ConfigurationError",
    "DragomanError",
    "EmptyTextError",
    "InvalidJobError",
    "InvalidJobIdError",
    "InvalidMetadataError",
    "Job",
    "JobNotCancellableError",
    "JobNotFoundError",
    "JobStatus",
    "JobTimeoutError",
    "MalformedEntryError",
    "Settings",
    "TextTooLongError",
    "TranslationRequest",
    "UnsupportedLanguageError",
]
