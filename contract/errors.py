"""Every error dragoman raises derives from :class:`DragomanError`.

Messages say what went wrong and what to do about it, because they end up in front of a user
of the CLI or in the logs of an application that enqueues jobs.
"""

from __future__ import annotations

import reprlib

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 80


def shown(value: object) -> str:
    """``value`` as an error message shows it: its repr, cut short and nested no deeper than a few levels.

    A wire entry can carry anything (a megabyte string, a list nested a thousand deep); quoting
    it whole would make the message as bad as the value, or fail on its own.
    """
    try:
        return _short.repr(value)
    except Exception:  # an int too long to print, say
        return f"<{type(value).__name__}>"


class DragomanError(Exception):
    """Base class of every error dragoman raises on purpose."""


class InvalidJobError(DragomanError, ValueError):
    """A job was rejected at submit time; nothing was written."""


class EmptyTextError(InvalidJobError):
    """The text to translate is empty or only whitespace."""


class TextTooLongError(InvalidJobError):
    """The text is longer than the configured limit (``DRAGOMAN_MAX_TEXT_CHARS``)."""


class UnsupportedLanguageError(InvalidJobError):
    """A language code is not a valid BCP-47 / ISO 639 code."""


class InvalidMetadataError(InvalidJobError):
    """Job metadata is not a JSON object with string keys."""


class InvalidGlossaryError(InvalidJobError):
    """A glossary is not an object of non-empty string terms within the size limits."""


class DocumentTooLargeError(InvalidJobError):
    """A document is over ``DRAGOMAN_MAX_DOCUMENT_CHARS`` or splits into over ``DRAGOMAN_MAX_DOCUMENT_SEGMENTS``."""


class SubmitInterruptedError(DragomanError):
    """Writing validated jobs to Redis failed part-way (Redis went away, say); ``written`` were queued before.

    Validation happens before anything is written, so this is never about a bad item. Submitting
    again is safe where the jobs have idempotency keys (or, for runs, deterministic ids: submit
    the same run id again and only the missing jobs are added).
    """

    def __init__(self, message: str, written: list[str]) -> None:
        super().__init__(message)
        self.written = written


class IdempotencyShardError(InvalidJobError):
    """A job given its own id and an idempotency key that live on different Redis shards (``DRAGOMAN_REDIS_SHARDS``).

    The key is checked on its own shard by the script that queues the job on the job's shard, so both
    must be one shard; nothing was written.
    """


class SubmitNotReplicatedError(DragomanError):
    """Jobs were queued on a Redis primary, but fewer replicas than ``DRAGOMAN_SUBMIT_WAIT_REPLICAS`` confirmed them
    within ``DRAGOMAN_SUBMIT_WAIT_TIMEOUT_MS``: a failover now could lose them.

    ``job_ids`` are queued (a worker may run them). Submitting them again with the same idempotency
    keys (or a run again with its run id) is safe: what is queued already is not queued twice.
    """

    def __init__(self, message: str, job_ids: list[str]) -> None:
        super().__init__(message)
        self.job_ids = job_ids


class RunFileMismatchError(InvalidJobError):
    """A run was resumed with a file that does not match it (a different number of jobs)."""


class MalformedEntryError(DragomanError, ValueError):
    """A stream entry, state record or event does not follow the wire format."""


class ModelNotFoundError(InvalidJobError, LookupError):
    """A job names a model that no routing rule names and no worker has ever served."""


class JobNotFoundError(DragomanError, LookupError):
    """No job with this id is known to Redis or PostgreSQL."""


class JobNotCancellableError(DragomanError):
    """The job has already started or finished, so it can no longer be cancelled."""


class JobTimeoutError(DragomanError, TimeoutError):
    """A job did not reach a final status within the time the caller was willing to wait."""


class ConfigurationError(DragomanError):
    """Settings are missing or contradictory (for example no Redis URL and no embedded server)."""


class EngineArgumentsError(ConfigurationError, ValueError):
    """vLLM's parser refused the engine arguments (flags or ``DRAGOMAN_ENGINE_ARGS``); nothing was started."""


class ServiceError(DragomanError):
    """An embedded Redis or PostgreSQL server could not be started, reached or stopped."""


class ModelError(DragomanError):
    """A model path is missing or unreadable, or the default model cannot be prepared."""


class EngineNotInstalledError(DragomanError):
    """A command needs the inference engine (or what builds the default model), and this install lacks it.

    The base install (``pip install dragoman``) is the light producer side; the engine comes with
    an extra. Raised before anything is started, with the extra to install in the message.
    """


class EngineError(DragomanError):
    """The inference engine failed for one job (the worker records it and keeps going)."""


class UnrunnableJobError(EngineError):
    """The job cannot succeed on this worker as it was sent; it fails at once, without a retry."""


class InputTooLongError(UnrunnableJobError):
    """The prompt does not fit in the model's context window."""


class UnsupportedControlError(UnrunnableJobError):
    """The job asks for a control (glossary, context, formality) the model's prompt profile cannot honour."""


class LanguageNotDetectedError(UnrunnableJobError):
    """``source_lang`` was ``auto`` and the text's language could not be told with confidence."""


class TruncatedTranslationError(EngineError):
    """A generation stopped at its output budget even after its one retry with a bigger budget.

    The job fails with this message (never succeeds with half a translation); the attributes are
    what its row records.
    """

    def __init__(self, message: str, *, prompt_tokens: int, output_tokens: int, pieces: int) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.pieces = pieces


class DegenerateOutputError(TruncatedTranslationError):
    """A generation fell into a loop (a span repeated to the end) even on its sampled retry.

    The job fails at once as ``degenerate_output`` (the message quotes the repeating span); the
    row's finish reason is ``repetition``. Another attempt would loop the same way.
    """


class EngineUnavailableError(DragomanError):
    """The engine as a whole is gone; the worker stops without acking so other workers retry."""


class RunNotFinishedError(DragomanError):
    """Results were asked for before every line of the run reached a final status."""
