"""dragoman's producer side: what applications import to enqueue translations and poll them.

It never imports an inference engine. ``from producer import Client`` is the entry point.
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
from producer.client import Client, InvalidJobIdError

__all__ = [
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
