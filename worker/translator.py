"""One job through the engine: prompt, output budget, pieces for long texts, generation, decoding.

A job whose text fits one generation (its prompt plus its output budget within the model's
context, and the text within ``max_piece_chars``) is one engine request, as before. A longer one
is cut inside the worker at paragraph breaks, then at sentence ends (:mod:`contract.sentences`,
the splitter the documents use); adjacent spans are packed into pieces that each fit, the pieces
run as concurrent engine requests, and the translations are joined with the source's own breaks
between them. A profile that answers one line (few-shot) gets every sentence of every line on
its own (its ``piece_unit``).

Runaway control, per engine request (a piece of a long text on its own). The first output budget
is bounded by the source (``16 + ratio x source tokens``). A generation that stops on it (finish
reason ``length``) is retried once with ``length_retry_factor`` times that budget (default 2,
capped by the context left), never "all the context allows": a translation many times longer
than its source is a model that does not stop, and the retry is where a runaway spent its tokens.
If the retry stops on its budget too, the job fails with
:class:`~contract.errors.TruncatedTranslationError`: a cut-off translation never succeeds.

A generation that ended without finishing (``length``, or ``repetition`` from an engine that
watches its requests) and whose token tail loops (:func:`contract.repetition.repeating_tail`, a
span repeated to the end, unless the source itself repeats that span as often) is degenerate:
it is not retried with a bigger budget but once with sampling (the profile's if it samples, else
:data:`RETRY_SAMPLING`) and a repetition penalty (:data:`LOOP_PENALTY`); if that loops too the job
fails at once with :class:`~contract.errors.DegenerateOutputError`, quoting the span; so does a
loop on the bigger retry. Either way a request costs at most its first budget plus one retry:
twice the first budget for a loop, three times for a cut-off (by default).
Retries ask the engine to stop a looping generation early (``stop_on_repetition``) unless the
source repeats itself; first requests do not, so the hot path keeps its final-only outputs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from contract.controls import Control
from contract.errors import DegenerateOutputError, InputTooLongError, TruncatedTranslationError, shown
from contract.expansion import expansion_ratio
from contract.generation import cut_at_stop
from contract.inline_tags import has_tags, tag_problem
from contract.inline_tags import tokens as tag_tokens
from contract.repetition import Repetition, repeating_tail, repeating_token_tail
from contract.schemas import JobSpec, lane_of
from contract.sentences import cut_sentence, split_paragraphs, split_sentences
from worker.engine import GenerationRequest, GenerationResult, TranslationEngine
from worker.profiles import PromptProfile
from worker.profiles.base import Sampling, glossary_in_text

log = logging.getLogger(__name__)

_HAS_WORDS = re.compile(r"[^\W\d_]")
RETRY_SAMPLING = Sampling(temperature=0.7, top_p=0.95)
"""How a greedy profile samples its one retry of a translation that lost its placeholder tags or looped."""
LOOP_PENALTY = 1.2
"""vLLM's ``repetition_penalty`` on the retry of a looping generation: logits of tokens already in the
prompt or the output are divided by it (multiplied when negative), so a span that repeated is less
likely to repeat again; mild, because the prompt's own words (the source's names and numbers) are
penalised too."""
_WORD_LOOP_REPEATS = 4  # a source with a span of words repeated this often back to back "repeats itself"
_BUDGET_BASE = 16  # tokens every budget gets on top of the estimate (short texts, end markers)
# Which finish reason describes a job whose pieces ended differently (the first listed wins).
_REASON_ORDER = ("abort", "length")


class Translation(msgspec.Struct, frozen=True):
    """The translated text, the token counts recorded with it, how it ended and in how many pieces."""

    text: str
    prompt_tokens: int
    output_tokens: int
    finish_reason: str | None
    pieces: int = 1
    inline_tags: str | None = None  # a tagged text's outcome: "kept", "retried" or "fallback"


class _Piece(NamedTuple):
    """One engine request of a job: its prompt and its first output budget."""

    prompt_ids: list[int]
    budget: int
    priority: int  # the engine's request priority (the job's lane)
    sampling: Sampling | None = None  # None: the profile's
    source: str = ""  # the piece's text: a loop the source has too is no loop


class _Done(NamedTuple):
    """A piece's final generation, the budget it ran with and what its tries cost and found."""

    result: GenerationResult
    prompt_tokens: int
    budget: int
    spent: int = 0  # output tokens of every try (first and retry)
    loop: Repetition | None = None  # the final generation's looping tail (a degenerate output)
    first_loop: Repetition | None = None  # the first try's looping tail (why the retry sampled)
    first_span: str = ""  # that tail's repeated span, decoded (the evidence if the retry is cut off)
    first_budget: int = 0
    retried: bool = False


class Translator:
    """Runs jobs on an engine with a prompt profile; one instance serves every job of a worker."""

    def __init__(
        self,
        engine: TranslationEngine,
        profile: PromptProfile,
        max_new_tokens: int | None,
        output_ratio: float = 2.0,
        *,
        max_piece_chars: int | None = None,
        length_retry_factor: float = 2.0,
    ) -> None:
        self.engine = engine
        self.profile = profile
        self._max_new_tokens = max_new_tokens
        self._ratio = output_ratio
        self._max_len = engine.max_model_len
        self._max_piece_chars = max_piece_chars
        self._retry_factor = length_retry_factor
        self._stop_ids = tuple(profile.stop_token_ids())
        self._sampling = profile.sampling
        self._stop_strings = tuple(profile.stop_strings)
        self._overhead: dict[tuple[str, str], int] = {}
        self._pair_ratio: dict[tuple[str, str], float] = {}
        self._running: dict[str, set[str]] = {}  # a job's request id -> its pieces' engine request ids
        self._aborted: set[str] = set()

    def _prompt_overhead(self, spec: JobSpec) -> int:
        """Tokens the profile adds around the text: cached per language pair for a job without controls.

        A job with controls is measured on its own: its context, its register and every glossary
        term found in its text. The terms come into a prompt only with text they occur in, so they
        are measured as the whole prompt less the text: the most any piece of the job carries, and
        a piece packed to fit within this overhead fits whatever terms it holds.
        """
        terms = glossary_in_text(spec) if spec.glossary else []
        if spec.context is not None or spec.formality is not None or terms:  # differs from job to job
            bare = len(self.profile.prompt_token_ids(msgspec.structs.replace(spec, text="")))
            if not terms:
                return bare
            text_tokens = len(self.engine.tokenizer.encode(spec.text, add_special_tokens=False))
            return max(bare, len(self.profile.prompt_token_ids(spec)) - text_tokens)
        pair = (spec.source_lang, spec.target_lang)
        overhead = self._overhead.get(pair)
        if overhead is None:
            overhead = len(self.profile.prompt_token_ids(msgspec.structs.replace(spec, text="")))
            self._overhead[pair] = overhead
        return overhead

    def _expansion(self, spec: JobSpec) -> float:
        """Headroom times the pair's expansion ratio (cached): output tokens budgeted per source token."""
        pair = (spec.source_lang, spec.target_lang)
        ratio = self._pair_ratio.get(pair)
        if ratio is None:
            ratio = self._pair_ratio[pair] = self._ratio * expansion_ratio(*pair)
        return ratio

    def room(self, prompt_tokens: int) -> int:
        """The most tokens a generation after this prompt may have: the context left, capped by ``max_new_tokens``."""
        room = self._max_len - prompt_tokens
        return room if self._max_new_tokens is None else min(room, self._max_new_tokens)

    def max_tokens_for(self, prompt_tokens: int, source_tokens: int, ratio: float | None = None) -> int:
        """First output budget: ``16 + ratio x source tokens``, never past :meth:`room` (at least 1)."""
        wanted = _BUDGET_BASE + math.ceil((self._ratio if ratio is None else ratio) * source_tokens)
        return max(1, min(wanted, self.room(prompt_tokens)))

    def _fits(self, chars: int, source_tokens: int, overhead: int, ratio: float) -> bool:
        """Whether a text of this size fits one generation: prompt plus full budget in the context."""
        if self._max_piece_chars is not None and chars > self._max_piece_chars:
            return False
        prompt = overhead + source_tokens
        wanted = _BUDGET_BASE + math.ceil(ratio * source_tokens)
        if self._max_new_tokens is not None and wanted > self._max_new_tokens:
            return False
        return prompt + wanted <= self._max_len

    async def translate(self, spec: JobSpec, request_id: str, *, sampling: Sampling | None = None) -> Translation:
        """Translate ``spec`` whole, in as many pieces as it needs.

        ``sampling`` replaces the profile's (a re-translation that must not repeat the greedy answer).
        Raises :class:`InputTooLongError` if even a piece of a few characters cannot fit the
        context, :class:`TruncatedTranslationError` if a piece stops on its budget twice,
        :class:`DegenerateOutputError` if a piece loops on its sampled retry too, and
        :class:`UnsupportedControlError` for a control the profile cannot apply.
        A raw-prompt job (a Batch API chat or completion line) runs its prompt as given instead.
        """
        if spec.generation is not None:
            return await self._run_raw_prompt(spec.generation, request_id, lane_of(spec).engine_priority)
        if spec.document_id is not None and spec.context is not None and Control.CONTEXT not in self.profile.supports:
            spec = msgspec.structs.replace(spec, context=None)  # a document's own context is a hint, not a demand
        if spec.inline_tags and has_tags(spec.text):
            return await self._translate_keeping_tags(spec, request_id, sampling)
        return await self._translate_text(spec, request_id, sampling)

    async def _translate_text(self, spec: JobSpec, request_id: str, sampling: Sampling | None = None) -> Translation:
        """:meth:`translate` for a translation job, with the profile's sampling unless ``sampling`` is given."""
        self.profile.check_controls(spec)
        ratio = self._expansion(spec)
        overhead = self._prompt_overhead(spec)
        text = spec.text
        unit = self.profile.piece_unit
        if unit == "text" or ("\n" not in text and (unit == "line" or len(split_sentences(text.strip())) == 1)):
            prompt_ids = self.profile.prompt_token_ids(spec)
            source_tokens = max(1, len(prompt_ids) - overhead)
            if self._fits(len(text), source_tokens, overhead, ratio):
                budget = self.max_tokens_for(len(prompt_ids), source_tokens, ratio)
                return await self._run_whole(
                    spec, request_id, _Piece(prompt_ids, budget, lane_of(spec).engine_priority, sampling, text)
                )
        plan = self._plan(spec, overhead, ratio)
        if sampling is not None:
            plan = [item._replace(sampling=sampling) if isinstance(item, _Piece) else item for item in plan]
        return await self._run(spec, request_id, plan)

    # Placeholder tags ---------------------------------------------------------------------------

    async def _translate_keeping_tags(
        self, spec: JobSpec, request_id: str, sampling: Sampling | None = None
    ) -> Translation:
        """A document segment with placeholder tags: checked, retried once, else text run by text run.

        The retry samples (a greedy profile would only repeat itself). The fallback translates the
        text between the tags on its own and puts the tags back where they were: the sentence's
        words lose their context, never their markup. The outcome is recorded on the row.
        ``sampling`` (else the profile's) is the first try's; a sampling one is the retry's too.
        """
        first = await self._translate_text(spec, request_id, sampling)
        problem = tag_problem(spec.text, first.text)
        if problem is None or first.finish_reason == "abort":
            return msgspec.structs.replace(first, inline_tags="kept")
        log.info("job %s: %s; retrying once", spec.job_id, problem, extra={"job_id": spec.job_id})
        sampling = self._sampled(sampling)
        second = await self._translate_text(spec, request_id, sampling)
        spent = (first.prompt_tokens + second.prompt_tokens, first.output_tokens + second.output_tokens)
        if tag_problem(spec.text, second.text) is None or second.finish_reason == "abort":
            return msgspec.structs.replace(
                second, prompt_tokens=spent[0], output_tokens=spent[1], inline_tags="retried"
            )
        log.info(
            "job %s: placeholder tags lost again; translating the text between them on its own",
            spec.job_id,
            extra={"job_id": spec.job_id},
        )
        fallback = await self._translate_text_runs(spec, request_id)
        return msgspec.structs.replace(
            fallback,
            prompt_tokens=fallback.prompt_tokens + spent[0],
            output_tokens=fallback.output_tokens + spent[1],
        )

    async def _translate_text_runs(self, spec: JobSpec, request_id: str) -> Translation:
        """Each text run (the text between two tags) translated on its own; tags and surrounding spaces kept."""
        plain = msgspec.structs.replace(spec, text="", inline_tags=False)
        ratio = self._expansion(plain)
        plan: list[str | _Piece] = []
        for token in tag_tokens(spec.text):
            if not isinstance(token, str) or not _HAS_WORDS.search(token):
                plan.append(str(token))
                continue
            core = token.strip()
            lead = token[: len(token) - len(token.lstrip())]
            trail = token[len(token.rstrip()) :]
            text_run = msgspec.structs.replace(plain, text=core)
            self.profile.check_controls(text_run)
            plan += [lead, *self._plan(text_run, self._prompt_overhead(text_run), ratio), trail]
        translation = await self._run(plain, request_id, [item for item in plan if item != ""])
        return msgspec.structs.replace(translation, inline_tags="fallback")

    def _sampled(self, sampling: Sampling | None) -> Sampling:
        """How a retry samples: ``sampling`` (else the profile's) if it samples, else :data:`RETRY_SAMPLING`."""
        base = sampling or self._sampling
        return base if base.temperature > 0 else RETRY_SAMPLING

    # Planning ---------------------------------------------------------------------------------

    def _plan(self, spec: JobSpec, overhead: int, ratio: float) -> list[str | _Piece]:
        """The text as literal breaks and pieces that each fit one generation, in order."""
        plan: list[str | _Piece] = []
        spans = split_paragraphs(spec.text, lines=self.profile.piece_unit != "text")
        texts = self._pack(spec, spans, overhead, ratio, level=0)
        for item in texts:
            if isinstance(item, str):
                plan.append(item)
                continue
            core = item[0]
            stripped = core.strip()
            lead = core[: len(core) - len(core.lstrip())]
            trail = core[len(core.rstrip()) :]
            if lead:
                plan.append(lead)
            plan.append(self._piece(spec, stripped, ratio))
            if trail:
                plan.append(trail)
        return plan

    def _pack(self, spec: JobSpec, spans: list[str], overhead: int, ratio: float, level: int) -> list[str | tuple[str]]:
        """Pack adjacent ``spans`` into pieces (1-tuples) that fit; breaks between pieces stay literal.

        Level 0 spans are paragraphs (or lines), level 1 sentences, deeper levels halves of a
        sentence. A span that does not fit alone is cut one level finer, down to single
        characters if it must. Lines of a ``line`` profile and the sentences of a ``sentence``
        profile are never packed together.
        """
        out: list[str | tuple[str]] = []
        current: list[str] = []  # spans of the piece being packed (breaks inside it included)
        current_tokens = 0
        pending_break = ""  # a break after the current piece, not yet known to be inside it
        unit = self.profile.piece_unit
        pack = unit == "text" or (unit == "line" and level > 0) or level > 1
        to_sentences = unit == "sentence" and level == 0  # every line goes down to its sentences

        def flush() -> None:
            nonlocal current, current_tokens
            if current:
                out.append(("".join(current),))
            current, current_tokens = [], 0

        for span in spans:
            if not span.strip():
                if current:
                    pending_break += span
                else:
                    out.append(span)
                continue
            tokens = len(self.engine.tokenizer.encode(span, add_special_tokens=False))
            chars = sum(map(len, current)) + len(pending_break) + len(span)
            break_tokens = 1 if pending_break else 0
            if pack and current and self._fits(chars, current_tokens + break_tokens + tokens, overhead, ratio):
                current += [pending_break, span]
                current_tokens += break_tokens + tokens
                pending_break = ""
                continue
            flush()
            if pending_break:
                out.append(pending_break)
                pending_break = ""
            if not to_sentences and (self._fits(len(span), tokens, overhead, ratio) or len(span) <= 1):
                current, current_tokens = [span], tokens
            else:
                out.extend(self._pack(spec, self._finer(span, level, to_sentences), overhead, ratio, level + 1))
        flush()
        if pending_break:
            out.append(pending_break)
        return out

    @staticmethod
    def _finer(span: str, level: int, to_sentences: bool = False) -> list[str]:
        """``span`` cut one level finer: paragraph -> sentences -> halves of a sentence (never inside a word)."""
        if level == 0:
            sentences = split_sentences(span)
            if len(sentences) > 1 or to_sentences:
                return sentences
        return cut_sentence(span, max(1, len(span) // 2))

    def _piece(self, spec: JobSpec, text: str, ratio: float) -> _Piece:
        """The prompt and first budget of one piece."""
        prompt_ids = self.profile.prompt_token_ids(msgspec.structs.replace(spec, text=text))
        if len(prompt_ids) >= self._max_len:
            raise InputTooLongError(
                f"input too long: a piece of {len(text)} characters makes a prompt of {len(prompt_ids)} tokens and "
                f"the model's context is {self._max_len} tokens (max_model_len); raise --max-model-len"
            )
        if spec.context is not None or spec.formality is not None or spec.glossary:
            # The overhead of a job with controls counts all its terms; a piece holds only its own.
            source_tokens = max(1, len(self.engine.tokenizer.encode(text, add_special_tokens=False)))
        else:
            source_tokens = max(1, len(prompt_ids) - self._prompt_overhead(spec))
        return _Piece(
            prompt_ids,
            self.max_tokens_for(len(prompt_ids), source_tokens, ratio),
            lane_of(spec).engine_priority,
            source=text,
        )

    # Running ----------------------------------------------------------------------------------

    async def _run_whole(self, spec: JobSpec, request_id: str, piece: _Piece) -> Translation:
        """A text that fits one generation (nearly every job): :meth:`_run`'s rules without its joining work.

        The hot path of a small model's worker, which spends a fixed CPU budget per job.
        """
        self._running[request_id] = set()
        try:
            done = await self._generate(request_id, request_id, piece)
        finally:
            self._running.pop(request_id, None)
            self._aborted.discard(request_id)
        result = done.result
        output_tokens = len(result.token_ids)
        self._check_finished([done])
        text = self.profile.postprocess(self.engine.tokenizer.decode(result.token_ids, skip_special_tokens=True))
        return Translation(
            text=text,
            prompt_tokens=len(piece.prompt_ids),
            output_tokens=output_tokens,
            finish_reason=result.finish_reason,
            pieces=1,
        )

    async def _run(self, spec: JobSpec, request_id: str, plan: list[str | _Piece]) -> Translation:
        """Generate every piece (concurrently), then join the translations with the literal breaks."""
        pieces = [item for item in plan if isinstance(item, _Piece)]
        self._running[request_id] = set()
        try:
            if len(pieces) == 1:
                done = [await self._generate(request_id, request_id, pieces[0])]
            else:
                tasks = [
                    asyncio.create_task(self._generate(request_id, f"{request_id}-p{i}", piece))
                    for i, piece in enumerate(pieces)
                ]
                try:
                    done = list(await asyncio.gather(*tasks))
                except BaseException:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    raise
        finally:
            self._running.pop(request_id, None)
            self._aborted.discard(request_id)
        reasons = [d.result.finish_reason for d in done]
        prompt_tokens = sum(d.prompt_tokens for d in done)
        output_tokens = sum(len(d.result.token_ids) for d in done)
        finish = next((r for r in _REASON_ORDER if r in reasons), None) or next(
            (r for r in reasons if r != "stop"), "stop" if reasons else None
        )
        if finish != "abort":
            self._check_finished(done)
        decode = self.engine.tokenizer.decode
        translated = iter(self.profile.postprocess(decode(d.result.token_ids, skip_special_tokens=True)) for d in done)
        text = "".join(item if isinstance(item, str) else next(translated) for item in plan)
        return Translation(
            text=text,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            finish_reason=finish,
            pieces=len(pieces),
        )

    async def _generate(self, job_request_id: str, request_id: str, piece: _Piece) -> _Done:
        """One piece, and its one retry if it did not finish: bigger budget, or sampled if it looped.

        A ``length`` stop without a loop is retried with ``length_retry_factor`` x its budget
        (capped by the room the context leaves; no retry without more room). A generation whose
        tail loops (or that the engine ended as ``repetition``) is retried with its first budget
        (a loop needs another path, not more room), sampling and :data:`LOOP_PENALTY`. The caller
        judges the final generation.
        """
        prompt_tokens = len(piece.prompt_ids)
        first = await self._request(
            job_request_id, request_id, piece.prompt_ids, piece.budget, piece.priority, piece.sampling
        )
        unfinished = first.finish_reason in ("length", "repetition")
        if not unfinished or job_request_id in self._aborted:
            return _Done(first, prompt_tokens, piece.budget, len(first.token_ids), first_budget=piece.budget)
        loop = self._loop(first, piece.source)
        retry_budget = max(piece.budget, min(math.ceil(self._retry_factor * piece.budget), self.room(prompt_tokens)))
        if loop is None and retry_budget <= piece.budget:  # no more room, or the retry turned off
            return _Done(first, prompt_tokens, piece.budget, len(first.token_ids), first_budget=piece.budget)
        sampling = piece.sampling
        if loop is not None:
            retry_budget = piece.budget
            base = self._sampled(piece.sampling)
            sampling = msgspec.structs.replace(base, repetition_penalty=max(base.repetition_penalty, LOOP_PENALTY))
            log.info(
                "request %s looped after %d tokens (a %d-token span repeated %d times); retrying once with "
                "sampling (temperature %s, repetition penalty %s) and %d tokens",
                request_id,
                len(first.token_ids),
                loop.period,
                loop.repeats,
                sampling.temperature,
                sampling.repetition_penalty,
                retry_budget,
                extra={"job_id": job_request_id},
            )
        else:
            log.info(
                "request %s stopped at its output budget (%d tokens); retrying with %d",
                request_id,
                piece.budget,
                retry_budget,
                extra={"job_id": job_request_id},
            )
        second = await self._request(
            job_request_id,
            f"{request_id}-retry",
            piece.prompt_ids,
            retry_budget,
            piece.priority,
            sampling,
            stop_on_repetition=not self._repeats_itself(piece.source),
        )
        return _Done(
            second,
            prompt_tokens,
            retry_budget,
            len(first.token_ids) + len(second.token_ids),
            loop=self._loop(second, piece.source),
            first_loop=loop,
            first_span="" if loop is None else self._span_text(first.token_ids, loop),
            first_budget=piece.budget,
            retried=True,
        )

    def _loop(self, result: GenerationResult, source: str) -> Repetition | None:
        """The looping tail of a generation that did not finish, unless the source repeats that span as often.

        A ``repetition`` finish (the engine saw a loop; asked only when the source does not
        repeat itself) always counts, with the span as found here or, if the engine's thresholds
        caught it earlier, the shortest repeated tail.
        """
        ids = result.token_ids
        if result.finish_reason == "repetition":
            return _token_loop(ids) or repeating_tail(ids, min_repeats=2, min_length=2) or Repetition(len(ids), 0, 0)
        if result.finish_reason != "length":
            return None
        loop = _token_loop(ids)
        if loop is None or self._source_explains(source, ids, loop):
            return None
        return loop

    def _span_text(self, ids: Sequence[int], loop: Repetition) -> str:
        """A loop's repeated span, decoded."""
        return str(self.engine.tokenizer.decode(ids[loop.start : loop.start + loop.period], skip_special_tokens=True))

    def _source_explains(self, source: str, ids: Sequence[int], loop: Repetition) -> bool:
        """Whether the source has the repetition too: its span half as often, or its own words in a loop as long.

        A row of dashes, "ha ha ha ha" or a table's repeated cells are copied, not invented;
        the same span far more often than the source has it is still a runaway.
        """
        unit = self.engine.tokenizer.decode(
            ids[loop.start : loop.start + loop.period], skip_special_tokens=True
        ).strip()
        if unit and 2 * source.count(unit) >= loop.repeats:
            return True
        words = source.split()
        own = _longest_word_loop(words)
        return own >= _WORD_LOOP_REPEATS and loop.repeats <= 2 * own

    @staticmethod
    def _repeats_itself(source: str) -> bool:
        """Whether a span of the source's words occurs back to back often enough to look like a loop."""
        return _longest_word_loop(source.split()) >= _WORD_LOOP_REPEATS

    async def _request(
        self,
        job_request_id: str,
        request_id: str,
        prompt_ids: list[int],
        budget: int,
        priority: int,
        sampling: Sampling | None = None,
        *,
        stop_on_repetition: bool = False,
    ) -> GenerationResult:
        """One engine request of a job, registered under the job so :meth:`abort` reaches it."""
        sampling = sampling or self._sampling
        running = self._running.setdefault(job_request_id, set())
        running.add(request_id)
        try:
            return await self.engine.generate(
                GenerationRequest(
                    request_id=request_id,
                    prompt_token_ids=prompt_ids,
                    max_tokens=budget,
                    stop_token_ids=self._stop_ids,
                    stop=self._stop_strings,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    top_k=sampling.top_k,
                    repetition_penalty=sampling.repetition_penalty,
                    priority=priority,
                    stop_on_repetition=stop_on_repetition,
                )
            )
        finally:
            running.discard(request_id)

    async def abort(self, request_id: str) -> None:
        """Abort every engine request of the job running under ``request_id`` (its pieces, its retries)."""
        running = self._running.get(request_id)
        if running is None:
            await self.engine.abort(request_id)
            return
        self._aborted.add(request_id)
        for piece_request in list(running):
            await self.engine.abort(piece_request)

    def _check_finished(self, done: list[_Done]) -> None:
        """Raise for the first piece that did not finish: a loop first (it fails at once), then a cut-off."""
        spent = (sum(d.prompt_tokens for d in done), sum(d.spent for d in done))
        for index, piece in enumerate(done):
            if piece.loop is not None:
                raise self._degenerate(done, index, *spent)
        for index, piece in enumerate(done):
            if piece.result.finish_reason == "length":
                raise self._truncated(done, index, *spent)

    def _where(self, done: list[_Done], index: int) -> str:
        return f"piece {index + 1} of {len(done)}" if len(done) > 1 else "the translation"

    def _degenerate(
        self, done: list[_Done], index: int, prompt_tokens: int, output_tokens: int
    ) -> DegenerateOutputError:
        """The error that fails a job whose piece looped on its retry: the repeating span and the tokens spent."""
        piece = done[index]
        loop = piece.loop
        assert loop is not None
        ids = piece.result.token_ids
        span = self._span_text(ids, loop)
        how = (
            "also on its sampled retry"
            if piece.first_loop is not None
            else f"on its retry with {piece.budget} tokens (its first try stopped at {piece.first_budget} tokens)"
        )
        ended = "the engine stopped it" if piece.result.finish_reason == "repetition" else "to the end of its budget"
        return DegenerateOutputError(
            f"degenerate output: {self._where(done, index)} fell into a loop {how}, repeating {shown(span)} "
            f"({loop.period}-token span, {loop.repeats} times; {ended} after {len(ids)} tokens); {output_tokens} "
            "output tokens spent. Another attempt would loop the same way: the text may not be prose this model "
            "can translate (random words, code, a list), or the model needs another prompt profile or model",
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            pieces=len(done),
        )

    def _truncated(
        self, done: list[_Done], index: int, prompt_tokens: int, output_tokens: int
    ) -> TruncatedTranslationError:
        """The error that fails a job whose translation stopped on its budget twice: numbers and what to change."""
        stopped = done[index]
        used = len(stopped.result.token_ids)
        capped = self._max_new_tokens is not None and stopped.budget >= self._max_new_tokens
        room = self.room(stopped.prompt_tokens)
        if stopped.first_loop is not None:
            advice = (
                "the text may not be prose this model can translate (random words, code, a list), or the model "
                "needs another prompt profile or model"
            )
        elif capped:
            advice = "raise DRAGOMAN_MAX_NEW_TOKENS (or unset it to let the context decide)"
        elif stopped.budget < room:
            advice = (
                f"the retry's budget is {self._retry_factor:g} x the first, which is bounded by the source: a model "
                "that keeps going that long usually never ends its answer (another prompt profile or model); for a "
                "language pair that really expands that much raise DRAGOMAN_OUTPUT_TOKENS_RATIO or "
                "DRAGOMAN_LENGTH_RETRY_FACTOR"
            )
        else:
            advice = (
                "raise the worker's --max-model-len, or lower DRAGOMAN_MAX_PIECE_CHARS so long texts are cut "
                "into smaller pieces; a model that never ends its answer needs another prompt profile or model"
            )
        context = f"after a {stopped.prompt_tokens}-token prompt in a {self._max_len}-token context"
        if stopped.first_loop is not None:
            loop = stopped.first_loop
            budgets = (
                f"a budget of {stopped.first_budget} tokens, {context}) in a loop, repeating "
                f"{shown(stopped.first_span)} ({loop.period}-token span, {loop.repeats} times); its sampled retry "
                f"with {stopped.budget} tokens did not loop but did not finish either ({used} used)"
            )
        elif stopped.retried:
            budgets = (
                f"a budget of {stopped.first_budget} tokens, {context}), also when retried with "
                f"{stopped.budget} tokens ({used} used)"
            )
        else:
            budgets = f"{used} tokens used of a budget of {stopped.budget}, {context}), with no room for a bigger retry"
        return TruncatedTranslationError(
            f"translation cut off: {self._where(done, index)} stopped at its output budget ({budgets}; "
            f"{output_tokens} output tokens spent; {advice}",
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            pieces=len(done),
        )

    def _check_fits(self, prompt_tokens: int) -> None:
        if prompt_tokens >= self._max_len:
            raise InputTooLongError(
                f"input too long: the prompt is {prompt_tokens} tokens and the model's context is "
                f"{self._max_len} tokens (max_model_len); shorten the prompt or raise --max-model-len"
            )

    async def _run_raw_prompt(self, generation: dict[str, Any], request_id: str, priority: int) -> Translation:
        """A raw-prompt job: the chat template or the prompt as given, the request's sampling, no profile."""
        tokenizer = self.engine.tokenizer
        if generation["kind"] == "chat":
            prompt_ids = tokenizer.encode(chat_prompt(tokenizer, generation["messages"]), add_special_tokens=False)
        else:
            prompt_ids = tokenizer.encode(generation["prompt"])
        prompt_tokens = len(prompt_ids)
        self._check_fits(prompt_tokens)
        room = self.room(prompt_tokens)
        wanted = generation.get("max_tokens") or room
        result = await self.engine.generate(
            GenerationRequest(
                request_id=request_id,
                prompt_token_ids=prompt_ids,
                max_tokens=max(1, min(wanted, room)),
                temperature=generation.get("temperature", 0.0),
                top_p=generation.get("top_p", 1.0),
                seed=generation.get("seed"),
                priority=priority,
            )
        )
        text, stopped = cut_at_stop(
            tokenizer.decode(result.token_ids, skip_special_tokens=True), generation.get("stop")
        )
        return Translation(
            text=text,
            prompt_tokens=prompt_tokens,
            output_tokens=len(result.token_ids),
            finish_reason="stop" if stopped else result.finish_reason,
        )


def _token_loop(ids: Sequence[int]) -> Repetition | None:
    """The looping tail of a generation's token ids, by the token thresholds."""
    return repeating_token_tail(ids)


def _longest_word_loop(words: Sequence[str]) -> int:
    """How many times the most repeated span of ``words`` occurs back to back anywhere (1: none).

    Runs only for a retry or a looping generation (a span of up to 8 words, compared case-blind).
    """
    folded = [w.lower() for w in words]
    best = 1
    for period in range(1, min(8, len(folded) // 2) + 1):
        run = 0
        for i in range(period, len(folded)):
            run = run + 1 if folded[i] == folded[i - period] else 0
            best = max(best, (run + period) // period)
    return best


def chat_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The messages through the tokenizer's chat template, or plain ``role: content`` lines without one."""
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
