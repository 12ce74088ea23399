"""Document segmenting before and after placeholder tags: segments, engine requests, whole sentences.

    python -m bench.documents [--before 6da7ad9] [--out bench/results/documents.json]
    python -m bench.documents --corpus [--out bench/results/documents-corpus.json]
    python -m bench.documents --per-format [--mb 1] [--out bench/results/documents-formats.json]

For each sample (the README, an HTML product page, the demo's Markdown file, a subtitle file, a
Word document),
the splitter of this checkout and the one of ``--before`` (a git revision, read with
``git archive`` into a temporary folder and run there in a child process) cut the same file:

- ``segments``: jobs one document becomes;
- ``requests``: engine requests on the default few-shot profile, which sends every sentence of a
  segment on its own (first attempts; a retry or fallback of lost tags adds to it);
- ``whole``: the share of the words the model is sent inside a whole sentence (an attribute value,
  such as an image's ``alt``, counts as whole, and so does a catalogue's message or a JSON string:
  a label such as "Afghanistan" is a whole message; ``strict_whole_share`` counts those by the
  rule below too). A segment is whole
  when it neither starts nor ends inside a sentence: its text (tags left out) does not start with
  a lower-case letter, and it ends with sentence punctuation or at a block boundary of the source
  (a line break, the end, a table pipe, or an HTML tag that is not an inline element). The
  fragments the old splitters cut at inline markup ("Click", "here", "to open the file.") fail it.

With ``--corpus`` the same measures run on the real documents of this machine instead
(``bench.corpus``: HTML manuals, READMEs, decompiled catalogues, JSON, subtitles, office files),
per format: documents, segments per document, the whole-sentence share of words, and split +
assemble CPU time per MB of source (best of three, every segment given a stand-in translation;
CPU time, so that other processes on a shared machine weigh less).

With ``--per-format`` every format of ``contract.documents.FORMATS`` gets a document of about
``--mb`` MB of text or XML built from the project's prose (``bench.format_sizes``), and the CPU
time per MB of the split, the stand-in translation and the assembly (zipped again) is measured,
each best of three, with a check that the untranslated assembly gives the source back.

The splitters run on the CPU with no server; the result is deterministic. With
``--tags-on-cpu fr`` the tagged segments of the samples (the README aside) go through the real
CPU engine with the default model instead, and the result counts how many kept their tags at
once, on the retry, or fell back to translating the text between them.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = {
    "README.md": ("md", ROOT / "README.md"),
    "product-page.html": ("html", ROOT / "bench" / "samples" / "product-page.html"),
    "getting-started.md": ("md", ROOT / "examples" / "getting-started.md"),
    "episode.srt": ("srt", ROOT / "bench" / "samples" / "episode.srt"),
    "report.docx": ("docx", ROOT / "bench" / "samples" / "report.docx"),
}
MAX_SEGMENT_CHARS = 1_500  # the default of DRAGOMAN_MAX_SEGMENT_CHARS
_WORD = re.compile(r"[^\W\d_]+")
_TAG = re.compile(r"</?x\d+/?>")
_ENDS_SENTENCE = re.compile(r"[.!?:;…)\]\"'»”]\s*$")
_INLINE = frozenset(
    "a abbr b bdi bdo big br cite code data del dfn em font i img ins kbd label mark nobr q s samp small span "
    "strike strong sub sup time tt u var wbr".split()
)
_NEXT_TAG = re.compile(r"</?([a-zA-Z][a-zA-Z0-9]*)")
_MARKUP = r"<[^<>]*>|`+[^`\n]*`+|\*\*|\*|__|_|~~|!\[|\[|\]\([^)\n]*\)|\]\[[^\]\n]*\]|\]"
_MARKUP_BEFORE = re.compile(rf"(?P<m>{_MARKUP})[ \t]*$")
_MARKUP_AFTER = re.compile(rf"^[ \t]*(?P<m>{_MARKUP})")
_NEAR = 4_000
_MESSAGES = frozenset({"po", "json"})
"""Escapes of a segment that is a whole message (a catalogue entry, a JSON string): whole, as an attribute is."""
_LINE_MARKER = re.compile(r"(?:^|\n)[ \t]*(?:(?:[-*+]|\d{1,9}[.)]|#{1,6}|>)[ \t]*)+$")


def measure(fmt: str, source: str, *, retranslate: bool = False) -> dict[str, Any]:
    """Segments, few-shot requests and the whole-sentence share of words for one document."""
    from contract.sentences import split_sentences
    from orchestrator.segmenting import split_document

    skeleton = split_document(source, fmt, MAX_SEGMENT_CHARS, retranslate=retranslate)
    source = skeleton.source()  # a zipped format's container text, where the segments' positions are
    segments = skeleton.segments
    attached = [s.raw if getattr(s, "detached", False) else None for s in segments]
    words = whole_words = strict_words = requests = 0
    position = 0
    for part in skeleton.parts:
        if not hasattr(part, "text"):  # a literal (its attribute values filled in), or a lang attribute's value
            position += len(_literal_source(part, attached) if isinstance(part, str) else part.raw)
            continue
        text = _TAG.sub("", part.text)
        count = len(_WORD.findall(text))
        words += count
        lines = [line for line in part.text.split("\n") if line.strip()]
        requests += sum(len([s for s in split_sentences(line.strip()) if not s.isspace()]) for line in lines)
        if getattr(part, "detached", False):
            whole_words += count  # an attribute value inside a sentence's markup: whole by itself
            strict_words += count
            continue
        length = len(_source_of(part, attached))
        escape = getattr(part, "escape", "")
        if escape == "attr" or _is_whole(text, source, position, position + length):
            whole_words += count
            strict_words += count
        elif escape in _MESSAGES:
            whole_words += count
        position += length
    return {
        "segments": len(skeleton.segments),
        "requests": requests,
        "words": words,
        "whole_share": round(whole_words / words, 4) if words else 1.0,
        "strict_whole_share": round(strict_words / words, 4) if words else 1.0,
    }


def _literal_source(literal: str, attached: list[str | None]) -> str:
    """A literal as the source has it: the values of the attributes it holds filled in (splitters that detach)."""
    try:
        from orchestrator.segmenting.parts import fill_attached
    except ImportError:  # a splitter from before detached segments
        return literal
    return fill_attached(literal, attached)


def _source_of(segment: Any, attached: list[str | None]) -> str:
    """The source text a segment stands for (with the values of attributes inside its markup)."""
    try:
        return str(segment.render(None, attached))
    except TypeError:  # a splitter from before detached segments
        return str(segment.render(None))


def _is_whole(text: str, source: str, start: int, end: int) -> bool:
    """Whether the segment at ``source[start:end]`` neither starts nor ends inside a sentence.

    The markup beside a segment is looked for within :data:`_NEAR` characters: reading the whole
    source before each segment made a document of a thousand segments take minutes.
    """
    stripped = text.strip()
    first = next((c for c in stripped if c.isalpha()), "")
    starts = not first.islower() or _at_boundary(source[max(0, start - _NEAR) : start], before=True)
    ends = bool(_ENDS_SENTENCE.search(stripped)) or _at_boundary(source[end : end + _NEAR], before=False)
    return starts and ends


def _at_boundary(side: str, *, before: bool) -> bool:
    """Whether a block or sentence boundary is next to a segment, past the inline markup beside it.

    ``side`` is the source before the segment (``before``) or after it. Inline markup (emphasis,
    link brackets and targets, inline HTML tags) is skipped, but a code span is not: its content
    is a word the segment left out (as an inline ``<code>`` element's text is); then a boundary is the
    start or end of the text, a line break, a table pipe, a list, heading or quote marker at the
    start of a line, sentence punctuation before, or an HTML tag that is not an inline element.
    """
    pattern = _MARKUP_BEFORE if before else _MARKUP_AFTER
    for _ in range(50):  # inline markup next to each other: a few at most
        match = pattern.search(side)
        if match is None:
            break
        if match.group("m").startswith("`"):
            return False  # a code span is a word of the sentence: left out of the segment, it is cut off
        tag = _NEXT_TAG.match(match.group("m"))
        if tag is not None and tag.group(1).lower() not in _INLINE:
            return True  # a block-level tag
        side = side[: match.start()] if before else side[match.end() :]
    side = side.rstrip(" \t") if before else side.lstrip(" \t")
    if not side:
        return True
    if before:
        return side[-1] in "\r\n|" or bool(_LINE_MARKER.search(side)) or bool(_ENDS_SENTENCE.search(side))
    return side[0] in "\r\n|"


def measure_all() -> dict[str, Any]:
    """:func:`measure` on every sample a splitter knows the format of."""
    from contract.documents import FORMATS

    def text_of(fmt: str, path: Path) -> str:
        data = path.read_bytes()
        return base64.b64encode(data).decode() if fmt == "docx" else data.decode()

    return {name: measure(fmt, text_of(fmt, path)) for name, (fmt, path) in SAMPLES.items() if fmt in FORMATS}


def measure_corpus(repeats: int = 3) -> dict[str, Any]:
    """:func:`measure` and split + assemble time on every document of ``bench.corpus``, summed per format."""
    from bench.corpus import find_corpus
    from contract.documents import FORMATS, ZIPPED_FORMATS
    from orchestrator.segmenting.split import ZIPPED

    formats: dict[str, dict[str, Any]] = {}
    documents: list[dict[str, Any]] = []
    for document in find_corpus():
        if document.fmt not in FORMATS or (document.fmt in ZIPPED_FORMATS and document.fmt not in ZIPPED):
            continue  # a format this checkout does not split yet
        size = (
            len(base64.b64decode(document.source)) if document.fmt in ZIPPED_FORMATS else len(document.source.encode())
        )
        measured = measure(document.fmt, document.source, retranslate=document.retranslate)
        seconds = min(_split_and_assemble(document.fmt, document.source, document.retranslate) for _ in range(repeats))
        documents.append(
            {"document": document.label, "format": document.fmt, "bytes": size, "seconds": seconds, **measured}
        )
        total = formats.setdefault(
            document.fmt,
            {
                "documents": 0,
                "bytes": 0,
                "seconds": 0.0,
                "segments": 0,
                "words": 0,
                "whole_words": 0.0,
                "strict_words": 0.0,
            },
        )
        total["documents"] += 1
        total["bytes"] += size
        total["seconds"] += seconds
        total["segments"] += measured["segments"]
        total["words"] += measured["words"]
        total["whole_words"] += measured["whole_share"] * measured["words"]
        total["strict_words"] += measured["strict_whole_share"] * measured["words"]
    for total in formats.values():
        total["segments_per_document"] = round(total["segments"] / total["documents"], 1)
        total["whole_share"] = round(total["whole_words"] / total["words"], 4) if total["words"] else 1.0
        total["strict_whole_share"] = round(total["strict_words"] / total["words"], 4) if total["words"] else 1.0
        total["seconds_per_mb"] = round(total["seconds"] / (total["bytes"] / 1e6), 3)
        total["seconds"] = round(total["seconds"], 4)
        del total["whole_words"], total["strict_words"]
    return {"formats": formats, "documents": documents}


def _split_and_assemble(fmt: str, source: str, retranslate: bool) -> float:
    """CPU seconds to split a document and assemble it with a stand-in translation of every segment (zipped again)."""
    from orchestrator.segmenting import split_document
    from orchestrator.segmenting.split import finish_document

    start = time.process_time()
    skeleton = split_document(source, fmt, MAX_SEGMENT_CHARS, retranslate=retranslate)
    translations = [_shout(s.text) for s in skeleton.segments]
    finish_document(fmt, skeleton.assemble(translations, "fr"))
    return time.process_time() - start


def measure_formats(megabytes: float = 1.0, repeats: int = 3) -> dict[str, Any]:
    """Split, stand-in translation and assemble (+ zip) CPU time per MB of a built document of every format.

    Each format gets a document of about ``megabytes`` MB of text or XML (``bench.format_sizes``:
    the project's prose, one word per paragraph in inline markup). Each phase is timed on its own,
    best of ``repeats``; ``identity`` says that assembling with every segment untranslated (zipped
    again) gave the source back byte for byte.
    """
    from bench.format_sizes import build
    from contract.documents import FORMATS
    from orchestrator.segmenting import split_document
    from orchestrator.segmenting.split import finish_document

    formats: dict[str, Any] = {}
    for fmt in FORMATS:
        source, size, file_size = build(fmt, round(megabytes * 1e6))
        best = {"split": float("inf"), "translate": float("inf"), "assemble": float("inf"), "total": float("inf")}
        segments = 0
        for _ in range(repeats):
            start = time.process_time()
            skeleton = split_document(source, fmt, MAX_SEGMENT_CHARS)
            split = time.process_time()
            translations = [_shout(s.text) for s in skeleton.segments]
            translated = time.process_time()
            finish_document(fmt, skeleton.assemble(translations, "fr"))
            end = time.process_time()
            phases = {"split": split - start, "translate": translated - split, "assemble": end - translated}
            for phase, seconds in {**phases, "total": end - start}.items():
                best[phase] = min(best[phase], seconds)
            segments = len(skeleton.segments)
        identity = _same_document(fmt, finish_document(fmt, skeleton.assemble([None] * segments)), source)
        formats[fmt] = {
            "bytes": size,
            "file_bytes": file_size,
            "segments": segments,
            "identity": identity,
            **{f"{phase}_s_per_mb": round(seconds / (size / 1e6), 4) for phase, seconds in best.items()},
        }
    return {"megabytes": megabytes, "repeats": repeats, "formats": formats}


def _same_document(fmt: str, assembled: str, source: str) -> bool:
    """Whether ``assembled`` is ``source``: byte for byte, or a zip's members (name, compression, bytes) in order.

    A zip is not compared whole: ``zip_container.pack`` stamps each member with the time it is
    zipped again, so the archive's bytes differ from the source's once the clock has moved on.
    """
    from contract.documents import ZIPPED_FORMATS

    if fmt not in ZIPPED_FORMATS:
        return assembled == source

    def members(document: str) -> list[tuple[str, int, bytes]]:
        archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(document)))
        return [(info.filename, info.compress_type, archive.read(info)) for info in archive.infolist()]

    return members(assembled) == members(source)


def _shout(text: str) -> str:
    """A stand-in translation: the text in capitals, placeholder tags as they were."""
    from contract.inline_tags import Tag, tokens

    return "".join(str(t) if isinstance(t, Tag) else t.upper() for t in tokens(text))


def formats_table(result: dict[str, Any]) -> str:
    """The result of :func:`measure_formats` as a Markdown table, one row per format."""
    rows = [
        "| format | MB (text/XML) | file MB | segments | split, CPU s/MB | stand-in, CPU s/MB "
        "| assemble (+ zip), CPU s/MB | total, CPU s/MB | identity |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for fmt, row in result["formats"].items():
        rows.append(
            f"| {fmt} | {row['bytes'] / 1e6:.2f} | {row['file_bytes'] / 1e6:.2f} | {row['segments']} | "
            f"{row['split_s_per_mb']:.3f} | {row['translate_s_per_mb']:.3f} | {row['assemble_s_per_mb']:.3f} | "
            f"{row['total_s_per_mb']:.3f} | {'yes' if row['identity'] else 'NO'} |"
        )
    return "\n".join(rows)


def corpus_table(result: dict[str, Any]) -> str:
    """The per-format result of :func:`measure_corpus` as a Markdown table."""
    rows = [
        "| format | documents | MB | segments per document | whole sentences (strict) "
        "| split + assemble, CPU s per MB |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    formats = result["formats"]
    for fmt in sorted(formats):
        total = formats[fmt]
        rows.append(
            f"| {fmt} | {total['documents']} | {total['bytes'] / 1e6:.2f} | {total['segments_per_document']} | "
            f"{total['whole_share']:.1%} ({total['strict_whole_share']:.1%}) | {total['seconds_per_mb']:.2f} |"
        )
    words = sum(t["words"] for t in formats.values())
    whole = sum(t["whole_share"] * t["words"] for t in formats.values())
    strict = sum(t["strict_whole_share"] * t["words"] for t in formats.values())
    documents = sum(t["documents"] for t in formats.values())
    megabytes = sum(t["bytes"] for t in formats.values()) / 1e6
    seconds = sum(t["seconds"] for t in formats.values())
    segments = sum(t["segments"] for t in formats.values())
    rows.append(
        f"| all | {documents} | {megabytes:.2f} | {segments / max(documents, 1):.1f} | "
        f"{(whole / words if words else 1.0):.1%} ({(strict / words if words else 1.0):.1%}) | "
        f"{seconds / megabytes if megabytes else 0.0:.2f} |"
    )
    return "\n".join(rows)


def _before(revision: str) -> dict[str, Any]:
    """The same measurement with the segmenting code of ``revision`` (a child process in its tree)."""
    with tempfile.TemporaryDirectory(prefix="dragoman-before-") as tree:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, "orchestrator", "contract"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": tree}
        result = subprocess.run(
            [sys.executable, "-c", _CHILD, str(ROOT)], cwd=tree, env=env, check=True, capture_output=True, text=True
        )
        return dict(json.loads(result.stdout))


_CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("documents_bench", sys.argv[1] + "/bench/documents.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(module.measure_all()))
"""


def tags_on_cpu(target: str) -> dict[str, Any]:
    """Every tagged segment of the samples but the README through the real CPU engine: how its tags fared."""
    import asyncio

    import msgspec

    from contract.schemas import build_job_spec
    from contract.settings import Settings
    from orchestrator.segmenting import split_document
    from worker.model import prepare_default_model
    from worker.profiles import choose_profile
    from worker.translator import Translator
    from worker.vllm_engine import VllmEngine

    texts: list[str] = []
    for name, (fmt, path) in SAMPLES.items():
        if name != "README.md":
            data = path.read_bytes()
            source = base64.b64encode(data).decode() if fmt == "docx" else data.decode()
            texts += [s.text for s in split_document(source, fmt, MAX_SEGMENT_CHARS).segments if s.codes]
    model = prepare_default_model(Settings().model_cache_dir)
    engine = VllmEngine.start(model, ["--max-num-seqs=16", "--max-model-len=1024"])
    translator = Translator(engine, choose_profile(None, model, engine.tokenizer), None)

    async def run() -> list[Any]:
        specs = [
            msgspec.structs.replace(
                build_job_spec(str(uuid.uuid4()), text, "en", target, max_chars=100_000),
                inline_tags=True,
                document_id=str(uuid.uuid4()),
            )
            for text in texts
        ]
        return list(await asyncio.gather(*(translator.translate(spec, spec.job_id) for spec in specs)))

    try:
        results = asyncio.run(run())
    finally:
        engine.shutdown()
    outcomes = [r.inline_tags for r in results]
    return {
        "target": target,
        "segments": len(texts),
        "kept": outcomes.count("kept"),
        "retried": outcomes.count("retried"),
        "fallback": outcomes.count("fallback"),
        "examples": [[t, r.text, r.inline_tags] for t, r in zip(texts, results, strict=True)][:8],
    }


def main() -> None:
    """Measure both splitters, print a table and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", default="6da7ad9", help="git revision of the splitter to compare with")
    parser.add_argument("--out", type=Path, help="where the JSON goes (default: bench/results/documents[-corpus].json)")
    parser.add_argument(
        "--corpus", action="store_true", help="measure the real documents of this machine (bench.corpus)"
    )
    parser.add_argument(
        "--per-format",
        action="store_true",
        help="time split + assemble per MB on a built document of every format (bench.format_sizes)",
    )
    parser.add_argument("--mb", type=float, default=1.0, help="the size of each --per-format document, MB of text/XML")
    parser.add_argument(
        "--tags-on-cpu", metavar="LANG", help="also send the tagged segments through the CPU engine into LANG"
    )
    args = parser.parse_args()
    results = ROOT / "bench" / "results"
    if args.per_format:
        outcome = measure_formats(args.mb)
        print(formats_table(outcome))
        out = args.out or results / "documents-formats.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(outcome, indent=2) + "\n")
        return
    if args.corpus:
        outcome = measure_corpus()
        print(corpus_table(outcome))
        out = args.out or results / "documents-corpus.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(outcome, indent=2, ensure_ascii=False) + "\n")
        return
    args.out = args.out or results / "documents.json"
    if args.tags_on_cpu:
        outcome = tags_on_cpu(args.tags_on_cpu)
        print(json.dumps(outcome, indent=2, ensure_ascii=False))
        path = args.out.with_name(f"documents-tags-cpu-{args.tags_on_cpu}.json")
        path.write_text(json.dumps(outcome, indent=2, ensure_ascii=False) + "\n")
        return
    after = measure_all()
    before = _before(args.before)
    print(f"{'sample':<22} {'segments':>17} {'requests':>17} {'whole sentences':>21}")
    for name in SAMPLES:
        old, new = before.get(name), after[name]
        if old is None:
            print(
                f"{name:<22} {'-':>7} -> {new['segments']:<7} {'-':>7} -> {new['requests']:<7} "
                f"{'-':>8} -> {new['whole_share']:<8.1%} (format new)"
            )
            continue
        print(
            f"{name:<22} {old['segments']:>7} -> {new['segments']:<7} {old['requests']:>7} -> {new['requests']:<7} "
            f"{old['whole_share']:>8.1%} -> {new['whole_share']:<8.1%}"
        )
    total_words = sum(after[n]["words"] for n in SAMPLES)
    share = sum(after[n]["whole_share"] * after[n]["words"] for n in SAMPLES) / total_words
    old_words = sum(before[n]["words"] for n in before)
    old_share = sum(before[n]["whole_share"] * before[n]["words"] for n in before) / old_words
    print(f"all samples: whole-sentence share of words {old_share:.1%} -> {share:.1%} (target >= 95%)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"before_revision": args.before, "before": before, "after": after, "share": [old_share, share]}, indent=2
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
