"""``dragoman run ...`` (JSONL runs) and ``dragoman translate FILE`` (whole documents)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cli.glossary_option import parse_glossary_option
from cli.help import EXAMPLE_ID, MODEL_HELP, SubParsers, add_command, examples
from cli.progress import ProgressLine
from cli.stats_view import format_duration
from cli.wording import LISTED, more_line
from contract.documents import FORMATS, decode_document, encode_document
from contract.errors import InvalidJobError, JobNotCancellableError, JobTimeoutError
from contract.progress import GroupProgress
from contract.quality import FLAG_NAMES
from contract.settings import Settings
from contract.wording import counted

if TYPE_CHECKING:
    from producer.client import Client

FINAL_DOCUMENT_STATUSES = ("completed", "failed", "cancelled")
SPLIT_HINT_AFTER_S = 20.0


def add_commands(sub: SubParsers) -> None:
    """Register ``run`` and ``translate`` on the ``dragoman`` parser."""
    run = add_command(
        sub,
        "run",
        help="bulk runs from a JSONL file: submit, status, results, cancel",
        description="Bulk runs: a JSONL file in (custom_id and text per line), one JSON line per input line out, "
        "in input order. Needs `dragoman rq-worker` next to the worker.",
        epilog=examples(
            "dragoman run submit lines.jsonl --from en --to fr",
            f"dragoman run status {EXAMPLE_ID}",
            f"dragoman run results {EXAMPLE_ID} -o out.jsonl",
        ),
    )
    actions = run.add_subparsers(
        dest="run_action",
        required=True,
        metavar="ACTION",
        title="actions",
        help="`dragoman run ACTION --help` for more",
    )
    submit = add_command(
        actions,
        "submit",
        help="submit FILE.jsonl (custom_id and text per line); prints the run id",
        description="Validate FILE.jsonl (a bad line means nothing is submitted), submit it in chunks and print "
        "the run id. Each line: custom_id, text, and optionally source_lang, target_lang, metadata, model. Once "
        "part of the run is queued, stderr says how to resume it (--run-id) should submitting stop.",
        epilog=examples("dragoman run submit lines.jsonl --from en --to fr --name nightly"),
    )
    submit.add_argument("file", type=Path, help="the JSONL file, one request per line")
    submit.add_argument(
        "--from", dest="source", help="source language of lines that do not say (auto: each line detects its own)"
    )
    submit.add_argument("--to", dest="target", help="target language of lines that do not say")
    submit.add_argument("--model", help="served model of lines that do not name one (" + MODEL_HELP + ")")
    submit.add_argument("--name", help="a name for the run (default: the file name)")
    submit.add_argument("--callback", help="URL POSTed (signed) when the run finishes")
    submit.add_argument(
        "--run-id",
        help="the run's id (a UUID; default: a new one, printed first). Submitting the same file with the "
        "same id again adds only the jobs a stopped submission left out",
    )
    status = add_command(
        actions,
        "status",
        help="counts per status, percent, rate and time left",
        epilog=examples(f"dragoman run status {EXAMPLE_ID}", f"dragoman run status {EXAMPLE_ID} --json"),
    )
    status.add_argument("run_id", help="the run id that run submit printed")
    status.add_argument("--json", action="store_true", help="print JSON")
    results = add_command(
        actions,
        "results",
        help="one JSON line per input line, in input order",
        description="Write one JSON line per input line, in input order (custom_id, status, translation or "
        "error, and quality_flags for a checked translation: {flag: evidence}, {} when clean). Refused while "
        "jobs are pending, unless --partial. --flagged writes only the lines whose quality checks found something.",
        epilog=examples(
            f"dragoman run results {EXAMPLE_ID} -o out.jsonl",
            f"dragoman run results {EXAMPLE_ID} --flagged",
            f"dragoman run results {EXAMPLE_ID} --flagged numbers,wrong_language",
        ),
    )
    results.add_argument("run_id", help="the run id that run submit printed")
    results.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")
    results.add_argument("--partial", action="store_true", help="write what is finished even if jobs are pending")
    results.add_argument(
        "--flagged",
        nargs="?",
        const="true",
        metavar="FLAGS",
        help="only the lines of jobs whose quality checks found something; with FLAGS (comma-separated: "
        + ", ".join(FLAG_NAMES)
        + ") only those with any of them",
    )
    cancel = add_command(
        actions,
        "cancel",
        help="cancel the run's jobs that have not finished",
        description="Cancel the run's jobs that have not finished (queued ones at once, running ones are aborted "
        "in the engine); finished ones keep their results. Prints the run's progress. A run that already "
        "finished has nothing to cancel (exit 1, as for a finished job); cancelling a cancelled run does nothing.",
        epilog=examples(f"dragoman run cancel {EXAMPLE_ID}"),
    )
    cancel.add_argument("run_id", help="the run id that run submit printed")
    run.set_defaults(func=cmd_run)

    translate = add_command(
        sub,
        "translate",
        help="translate a document (txt, md, html, srt, vtt, po, json, xliff, docx, pptx, xlsx, epub, odt, odp, "
        "ods), keeping its structure",
        description="Translate a document sentence by sentence, keeping its structure (markup, code, URLs, "
        "timings, keys and placeholders untouched; inline markup travels as placeholder tags inside whole "
        "sentences), and write NAME.<to>.<suffix> beside it. Formats: "
        + ", ".join(FORMATS)
        + ". Needs `dragoman rq-worker` next to the worker. Ctrl-C cancels the document.",
        epilog=examples(
            "dragoman translate notes.md --to fr",
            "dragoman translate notes.md --from en --to fr",
            "dragoman translate page.html --to de --from en -o out.html",
            "dragoman translate messages.pot --from en --to ja -o ja.po",
            "dragoman translate report.docx --from en --to de",
        ),
    )
    translate.add_argument("file", type=Path, help="the document to translate (UTF-8)")
    translate.add_argument(
        "--from",
        dest="source",
        default="auto",
        help="source language (default auto: detected from the document's text, shown as it is split)",
    )
    translate.add_argument("--to", dest="target", required=True, help="target language")
    translate.add_argument("-o", "--output", type=Path, help="output file (default: NAME.<to>.<suffix> beside it)")
    translate.add_argument("--format", choices=FORMATS, help="default: from the file's suffix")
    translate.add_argument("--model", help=MODEL_HELP)
    translate.add_argument(
        "--glossary",
        help="JSON object of source term -> target term every segment must use, or @FILE holding one: "
        '\'{"cat": "chat"}\'',
    )
    translate.add_argument("--context", help="what the document is (the model sees it with every segment)")
    translate.add_argument("--formality", choices=["formal", "informal"], help="register, where the profile has one")
    translate.add_argument(
        "--retranslate",
        action="store_true",
        help=".po/.xliff: translate the entries that already have a translation too (default: keep them)",
    )
    translate.add_argument(
        "--keep-failed-source",
        action="store_true",
        help="write the file even if segments failed, with their source text",
    )
    translate.add_argument("--max-segment-chars", type=int, help="cut longer prose at sentence ends")
    translate.add_argument("--callback", help="URL POSTed (signed) when the document is assembled")
    translate.add_argument("--timeout", type=float, default=3_600.0, help="seconds to wait (default 3600)")
    translate.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    translate.set_defaults(func=cmd_translate)


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """The ``run`` sub-commands."""
    from producer.client import Client

    with Client(settings) as client:
        if args.run_action == "submit":
            import uuid

            run_id = args.run_id or str(uuid.uuid4())
            line = ProgressLine(sys.stderr)
            hinted = False

            def report(done: int, total: int) -> None:
                nonlocal hinted
                if done < total and not hinted:
                    # Something is queued now and more is to come: this is when a resume can be needed.
                    line.finish()
                    print(resume_hint(run_id), file=sys.stderr)
                    hinted = True
                if total > settings.submit_chunk_size:
                    line.update(f"submitted {done:,}/{total:,}", percent=100.0 * done / total)

            try:
                run_id = client.submit_run(
                    args.file,
                    source_lang=args.source,
                    target_lang=args.target,
                    name=args.name,
                    callback_url=args.callback,
                    on_chunk=report,
                    run_id=run_id,
                    model=args.model,
                )
            except BaseException:
                line.finish()
                if not hinted and _run_exists(client, run_id):
                    print(resume_hint(run_id), file=sys.stderr)
                raise
            line.finish()
            print(run_id)
        elif args.run_action == "status":
            status = client.get_run(args.run_id)
            print(json.dumps(status.to_dict(), indent=2) if args.json else format_progress(status))
        elif args.run_action == "results":
            lines = client.iter_run_results(args.run_id, allow_partial=args.partial, flagged=args.flagged or False)
            if args.output is None:
                _write_lines(lines, sys.stdout)
            else:
                with open(args.output, "w", encoding="utf-8") as out:
                    count = _write_lines(lines, out)
                print(f"{counted(count, 'result')} written to {args.output}", file=sys.stderr)
        else:
            refuse_finished_run(client.get_run(args.run_id))
            print(format_progress(client.cancel_run(args.run_id)))
    return 0


def resume_hint(run_id: str) -> str:
    """What ``run submit`` prints once part of a run is queued: how to finish it if submitting stops."""
    return f"run {run_id}: if submitting stops, run the same command with --run-id {run_id} to add the rest"


def _run_exists(client: Client, run_id: str) -> bool:
    """Whether a run with this id was created (so a stopped submission can be resumed); ``False`` if unsure."""
    try:
        client.get_run(run_id)
    except Exception:
        return False
    return True


def refuse_finished_run(progress: GroupProgress) -> None:
    """``run cancel`` on a run that has nothing left to cancel fails, as ``cancel`` on a finished job does.

    A run already cancelled is left as it is (cancelling twice is not an error, as for a job).
    """
    if progress.status not in ("cancelled", "submitting") and progress.counts.pending == 0:
        raise JobNotCancellableError(
            f"run {progress.id} already finished ({progress.status}: {progress.counts.succeeded:,} succeeded, "
            f"{progress.counts.failed:,} failed): nothing left to cancel"
        )


def _write_lines(lines: Iterable[dict[str, Any]], out: TextIO) -> int:
    count = 0
    for line in lines:
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
        count += 1
    return count


def format_progress(progress: GroupProgress) -> str:
    """A run or document's progress as a few aligned lines."""
    c = progress.counts
    rate = "-" if progress.jobs_per_second is None else f"{progress.jobs_per_second:,.1f} jobs/s"
    left = "-" if progress.seconds_left is None else format_duration(progress.seconds_left)
    lines = [
        f"{progress.kind:<10} {progress.id}" + (f"  ({progress.name})" if progress.name else ""),
        f"status     {progress.status}",
        *([f"detected   {progress.detected_source_lang}"] if progress.detected_source_lang else []),
        f"progress   {c.finished:,}/{c.total:,} ({c.percent:.1f}%)",
        f"counts     succeeded {c.succeeded:,}, failed {c.failed:,}, cancelled {c.cancelled:,}, pending {c.pending:,}",
        f"flagged    {format_flags(c.flagged, c.flags)}",
        f"rate       {rate}",
        f"time left  {left}",
    ]
    if progress.error:
        lines.append(f"error      {progress.error}")
    return "\n".join(lines)


def format_flags(flagged: int, flags: Mapping[str, int]) -> str:
    """The quality flags of a group's finished jobs in a few words: ``none``, or the count and each flag's."""
    if not flagged:
        return "none"
    return f"{counted(flagged, 'job')} ({per_flag(flags)})" if flags else counted(flagged, "job")


def per_flag(flags: Mapping[str, int]) -> str:
    """Each flag with its count, the most frequent first: ``numbers 2, tags 1``."""
    return ", ".join(f"{name} {count:,}" for name, count in sorted(flags.items(), key=lambda item: -item[1]))


def cmd_translate(args: argparse.Namespace, settings: Settings) -> int:
    """Submit a document, show its progress, write the assembled file (or report failed segments)."""
    from producer.client import Client
    from producer.groups import document_format

    fmt = document_format(args.file, args.format)
    try:
        text = encode_document(fmt, args.file.read_bytes())
    except FileNotFoundError:
        raise InvalidJobError(f"{args.file}: no such file") from None
    except InvalidJobError as exc:
        raise InvalidJobError(f"{args.file}: {exc}") from None
    output = args.output or args.file.with_name(f"{args.file.stem}.{args.target}{args.file.suffix}")
    with Client(settings) as client:
        document_id = client.submit_document(
            text,
            fmt,
            args.source,
            args.target,
            name=args.file.name,
            callback_url=args.callback,
            max_segment_chars=args.max_segment_chars,
            retranslate=args.retranslate,
            model=args.model,
            glossary=parse_glossary_option(args.glossary),
            context=args.context,
            formality=args.formality,
        )
        print(f"document {document_id}", file=sys.stderr)
        try:
            progress = _wait_for_document(client, document_id, args.timeout, show=not args.no_progress)
        except KeyboardInterrupt:
            client.cancel_document(document_id)
            print(f"interrupted: document {document_id} cancelled", file=sys.stderr)
            return 130
        if progress.status == "failed" and progress.error:
            print(f"error: the document could not be split: {progress.error}", file=sys.stderr)
            return 1
        if progress.detected_source_lang:
            print(f"source language detected: {progress.detected_source_lang}", file=sys.stderr)
        result = client.document_result(document_id)
    _print_tag_report(result.report)
    _print_flag_report(result.report)
    if result.failed_segments:
        did_not = len(result.failed_segments)
        print(f"{did_not} of {counted(progress.counts.total, 'segment')} did not translate:", file=sys.stderr)
        for failed in result.failed_segments:
            print(
                f"  segment {failed['segment']} ({failed['status']}): {failed['error']}\n"
                f"    source: {failed['source'][:120]!r}",
                file=sys.stderr,
            )
        if not args.keep_failed_source:
            print("nothing written; --keep-failed-source writes the file with their source text", file=sys.stderr)
            return 1
    output.write_bytes(decode_document(fmt, result.text))
    print(f"wrote {output} ({counted(progress.counts.total, 'segment')})", file=sys.stderr)
    return 0


def _wait_for_document(client: Client, document_id: str, timeout: float, *, show: bool) -> GroupProgress:
    """Poll the document until it is final; its progress on stderr (plain lines if stderr is no terminal)."""
    started = time.monotonic()
    hinted = False
    line = ProgressLine(sys.stderr)
    try:
        while True:
            progress = client.get_document(document_id)
            if show:
                text, percent = document_progress_text(progress)
                line.update(text, percent=percent, stage=progress.status)
            if progress.status in FINAL_DOCUMENT_STATUSES:
                return progress
            waited = time.monotonic() - started
            if progress.status == "splitting" and waited > SPLIT_HINT_AFTER_S and not hinted:
                line.note("still waiting to be split: is `dragoman rq-worker` running?")
                hinted = True
            if waited > timeout:
                raise JobTimeoutError(
                    f"document {document_id} not done after {timeout:.0f}s "
                    f"({progress.counts.finished}/{counted(progress.counts.total, 'segment')})"
                )
            time.sleep(0.5)
    finally:
        line.finish()


def document_progress_text(progress: GroupProgress) -> tuple[str, float | None]:
    """A document's progress as one line (a bar of 30) and its percent (None while it waits to be split)."""
    if progress.status == "splitting":
        return "[waiting to be split into segments]", None
    c = progress.counts
    width = 30
    filled = int(width * c.percent / 100)
    left = "" if progress.seconds_left is None else f"  ~{format_duration(progress.seconds_left)} left"
    bar = f"[{'#' * filled}{'.' * (width - filled)}]"
    flagged = f"  {c.flagged} flagged" if c.flagged else ""
    detected = f"  from {progress.detected_source_lang} (detected)" if progress.detected_source_lang else ""
    done = f"{c.finished}/{counted(c.total, 'segment')}"
    line = f"{bar} {done} {c.percent:5.1f}%{flagged}  {progress.status}{detected}{left}"
    return line, c.percent


def _print_tag_report(report: dict[str, Any] | None) -> None:
    """One line on stderr about the inline markup, and the segments that were not translated whole."""
    if not report or not report.get("with_tags"):
        return
    fell_back = report.get("fell_back") or []
    print(
        f"inline markup: {counted(report['with_tags'], 'segment')} with placeholder tags, "
        f"{report['tags_kept']} kept them, "
        f"{len(report.get('retried') or [])} on a retry, {len(fell_back)} translated between the tags",
        file=sys.stderr,
    )
    for entry in fell_back[:LISTED]:
        print(f"  segment {entry['segment']} not translated whole: {entry['source']!r}", file=sys.stderr)
    if (more := more_line(fell_back, "GET /v1/documents/ID")) is not None:
        print(more, file=sys.stderr)


def _print_flag_report(report: dict[str, Any] | None) -> None:
    """On stderr: how many segments the quality checks flagged, and for the first ten which flags and why."""
    flagged = (report or {}).get("flagged") or []
    if not flagged:
        return
    counts = (report or {}).get("flags") or {}
    total = (report or {}).get("segments", "?")
    of = counted(total, "segment") if isinstance(total, int) else f"{total} segments"
    print(f"quality: {len(flagged)} of {of} flagged ({per_flag(counts)})", file=sys.stderr)
    for entry in flagged[:LISTED]:
        why = "; ".join(f"{flag}: {evidence}" for flag, evidence in entry["flags"].items())
        print(f"  segment {entry['segment']}: {why}\n    source: {entry['source']!r}", file=sys.stderr)
    if (more := more_line(flagged, "GET /v1/documents/ID")) is not None:
        print(more, file=sys.stderr)
