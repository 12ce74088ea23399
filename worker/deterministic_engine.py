"""A model-free engine with the real engine's interface, for tests, benchmarks and ``--engine echo``.

It echoes the prompt back (so with the ``identity`` prompt profile a job's translation is its
source text), after an optional delay, and can be told to fail on chosen inputs. It is never the
default and never what the demo runs. :func:`echo_engine` is the one ``dragoman worker --engine
echo`` runs: a way to try and integration-test a deployment (queues, database, API, clients)
without a model or vLLM installed.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Callable, Sequence

from contract.errors import EngineError
from contract.inline_tags import Tag, tokens
from contract.settings import EchoMode
from worker.engine import GenerationRequest, GenerationResult
from worker.loop_watch import first_loop_end


class ChunkTokenizer:
    """One token per 4 bytes of UTF-8: exact round trips, no vocabulary, in C.

    English text comes out at about as many tokens as a real subword tokenizer makes of it
    (roughly 4 characters each), so token counts, output budgets and list sizes in tests and
    benchmarks look like a real model's. Texts never contain NUL (the wire format refuses it),
    so NUL pads the last token and decoding drops it.
    """

    bos_token_id: int | None = None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Little-endian 32-bit words of the UTF-8 bytes, the last one padded with NUL."""
        data = text.encode()
        return memoryview(data + b"\0" * (-len(data) % 4)).cast("I").tolist()

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of the tokens (a multi-byte character cut by ``max_tokens`` is dropped)."""
        return array("I", token_ids).tobytes().replace(b"\0", b"").decode(errors="ignore")


class CharTokenizer:
    """One token per character (its code point): exact round trips, no vocabulary."""

    bos_token_id: int | None = None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Code points of ``text`` (through UTF-32, in C: the pipeline benchmark must not measure this)."""
        return memoryview(text.encode("utf-32-le")).cast("I").tolist()

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of the code points."""
        return array("I", token_ids).tobytes().decode("utf-32-le")


class DeterministicEngine:
    """Echoes each prompt (``prefix`` before, ``tag`` after it), optionally after a delay; raises for prompts
    ``fail_if`` selects.

    For prompts ``endless_if`` selects it behaves like a model that never ends its answer: it
    repeats the prompt for exactly ``max_tokens`` tokens and stops on ``length``, whatever the budget.
    A request with ``stop_on_repetition`` is watched as the real engine watches it
    (:class:`worker.loop_watch.LoopWatch`): an output that loops (an endless prompt of at most
    ``TOKEN_MAX_PERIOD`` tokens, or a prompt that repeats itself) ends at the checkpoint where the
    watch first sees the loop, with finish reason ``repetition``. ``watched`` counts those requests
    and ``stopped_on_repetition`` the ones it ended.
    ``rewrite`` turns the echo into another text (a "translation", or one that damages the
    placeholder tags of a document segment), given the request (its sampling, for a retry).
    """

    def __init__(
        self,
        *,
        delay_s: float = 0.0,
        max_model_len: int = 8_192,
        fail_if: Callable[[str], bool] | None = None,
        delay_for: Callable[[str], float] | None = None,
        tag: str = "",
        endless_if: Callable[[str], bool] | None = None,
        rewrite: Callable[[str, GenerationRequest], str] | None = None,
        prefix: str = "",
        model_name: str = "deterministic-test-engine",
    ) -> None:
        self._delay_s = delay_s
        self._delay_for = delay_for
        self._max_model_len = max_model_len
        self._fail_if = fail_if
        self._endless_if = endless_if
        self._rewrite = rewrite
        self.budgets: list[int] = []  # max_tokens of every request, in arrival order
        self._tokenizer = ChunkTokenizer()
        self._tag = self._tokenizer.encode(tag)
        self._prefix = self._tokenizer.encode(prefix)
        self._model_name = model_name
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests = 0
        self.aborted: list[str] = []
        self.watched = 0
        self.stopped_on_repetition = 0
        self._running: dict[str, asyncio.Future[None]] = {}

    @property
    def model_name(self) -> str:
        """Recorded in each row, so tests (and users of ``--engine echo``) can tell this engine's rows apart."""
        return self._model_name

    @property
    def max_model_len(self) -> int:
        """Configured context length."""
        return self._max_model_len

    @property
    def max_num_seqs(self) -> int:
        """The engine batch a real engine would run: a worker's default jobs in flight are twice it, as on vLLM."""
        return ECHO_MAX_NUM_SEQS

    @property
    def tokenizer(self) -> ChunkTokenizer:
        """The 4-byte chunk tokenizer."""
        return self._tokenizer

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Echo the prompt's tokens (at most ``max_tokens``) once the delay has passed."""
        self.requests += 1
        self.budgets.append(request.max_tokens)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            needs_text = self._delay_for is not None or self._fail_if is not None or self._endless_if is not None
            prompt = self._tokenizer.decode(request.prompt_token_ids) if needs_text else ""
            delay = self._delay_for(prompt) if self._delay_for else self._delay_s
            if delay > 0:
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._running[request.request_id] = done
                try:
                    await asyncio.wait_for(asyncio.shield(done), timeout=delay)
                except TimeoutError:
                    pass
                finally:
                    self._running.pop(request.request_id, None)
                if done.done():
                    return GenerationResult(token_ids=(), finish_reason="abort")
            if self._fail_if is not None and self._fail_if(prompt):
                raise EngineError(f"deterministic engine was told to fail on {prompt[:40]!r}")
            if self._endless_if is not None and self._endless_if(prompt):
                source = list(request.prompt_token_ids) or [0x20202020]
                endless = (source * (request.max_tokens // len(source) + 1))[: request.max_tokens]
                return self._watched(request, endless, "length")
            output = (
                [*self._prefix, *request.prompt_token_ids, *self._tag]
                if self._tag or self._prefix
                else request.prompt_token_ids
            )
            if self._rewrite is not None:
                output = self._tokenizer.encode(self._rewrite(self._tokenizer.decode(output), request))
            tokens = output[: request.max_tokens]
            reason = "length" if len(tokens) < len(output) else "stop"
            return self._watched(request, tokens, reason)
        finally:
            self.in_flight -= 1

    def _watched(self, request: GenerationRequest, tokens: Sequence[int], reason: str) -> GenerationResult:
        """The output as it ends: cut where the loop watch stops it, for a request that asks to be watched."""
        if request.stop_on_repetition:
            self.watched += 1
            end = first_loop_end(tokens)
            if end is not None and end < len(tokens):
                self.stopped_on_repetition += 1
                return GenerationResult(token_ids=tokens[:end], finish_reason="repetition")
        return GenerationResult(token_ids=tokens, finish_reason=reason)

    async def abort(self, request_id: str) -> None:
        """End a delayed request early with finish reason ``abort``."""
        self.aborted.append(request_id)
        future = self._running.get(request_id)
        if future is not None and not future.done():
            future.set_result(None)

    def shutdown(self) -> None:
        """Nothing to release."""


ECHO_MARK = "[echo] "
"""What ``--engine echo`` puts before each text it sends back, so a row shows it went through a worker."""

ECHO_MODEL_NAME = "echo"
"""The model name ``--engine echo`` records in each job's row."""

ECHO_MAX_NUM_SEQS = 64
"""The engine batch the deterministic engines report (vLLM's ``max_num_seqs`` on a CPU, dragoman's default)."""

ECHO_MAX_MODEL_LEN = 32_768
"""The echo engine's context length in tokens (128 KiB of text: never the limit for a job or a piece)."""


def swap_case_outside_tags(text: str) -> str:
    """``text`` with the case of every letter swapped, its placeholder tags (``<x1>``, ``</x1>``, ``<x2/>``) kept.

    What ``--echo-mode swapcase`` answers: in any output, a swapped letter is one the model was sent and an
    unchanged one was kept out of its text (markup, code, URLs, a document's skeleton).
    """
    return "".join(str(part) if isinstance(part, Tag) else part.swapcase() for part in tokens(text))


def _swapped(output: str, request: GenerationRequest) -> str:
    """The :func:`swap_case_outside_tags` rewrite, in :class:`DeterministicEngine`'s ``rewrite`` shape."""
    return swap_case_outside_tags(output)


def echo_engine(delay_ms: float = 0.0, mode: EchoMode = "mark") -> DeterministicEngine:
    """The engine ``dragoman worker --engine echo`` runs: no model, no vLLM, no translation.

    With the ``identity`` prompt profile each request's output is :data:`ECHO_MARK` followed by
    the text sent (a job's source text, or each piece of a long one), recorded with the model name
    :data:`ECHO_MODEL_NAME`. Token counts are real counts of :class:`ChunkTokenizer` (one token per
    4 bytes of UTF-8, about what a subword tokenizer makes of English): a job's ``prompt_tokens``
    are its text's, its ``output_tokens`` those plus 2 for the mark. Each request takes
    ``delay_ms`` milliseconds (all of them concurrently, as a batching engine would), to simulate
    an engine's latency in integration and load tests.

    ``mode`` ``swapcase`` sends back the text with the case of each letter swapped outside its
    placeholder tags, and no mark: what comes back swapped is what reached the model, what comes
    back unchanged was kept from it, so an integrator can see what a document or a door sends.
    """
    if mode == "swapcase":
        return DeterministicEngine(
            delay_s=delay_ms / 1000,
            max_model_len=ECHO_MAX_MODEL_LEN,
            rewrite=_swapped,
            model_name=ECHO_MODEL_NAME,
        )
    return DeterministicEngine(
        delay_s=delay_ms / 1000,
        max_model_len=ECHO_MAX_MODEL_LEN,
        prefix=ECHO_MARK,
        model_name=ECHO_MODEL_NAME,
    )
