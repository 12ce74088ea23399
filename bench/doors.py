"""The doors side by side: the same sentences through the native, DeepL and LibreTranslate APIs (zero-cost engine).

    python -m bench.doors [--sentences 1000] [--per-request 50] [--clients 4] [--rounds 6]
                          [--doors native,deepl,libretranslate,native-submit] [--api-checkout DIR]
                          [--out bench/out/doors.json]

One run, one embedded Redis and PostgreSQL (or DRAGOMAN_REDIS_URL / DRAGOMAN_DATABASE_URL), one real
``dragoman api`` process (uvicorn) and one worker with the deterministic engine in a process of its own
(translation memory off, so that no door is served from the memory an earlier one filled). The
``--sentences`` sentences (drawn with a fixed seed from bench/samples/english-words.txt, 4-24 words)
go through each door as lists of ``--per-request`` texts (DeepL's own limit is 50), over ``--clients``
concurrent keep-alive connections, timed from the first request to the last translation in hand (and
the CPU the API process spent meanwhile, per job: the door's own cost, apart from the worker's):

- native: ``POST /v1/jobs`` with a list answers ``202`` and the ids (``?wait=`` is for one job only),
  so a native client then reads each id with ``GET /v1/jobs/{id}``, in order, reading one that is not
  final again after ``NATIVE_POLL_SECONDS`` (what the Python client's ``wait`` does over HTTP);
- DeepL: ``POST /v2/translate`` ``{"text": [...], "source_lang": "EN", "target_lang": "FR"}`` with
  ``Authorization: DeepL-Auth-Key K``, answered with the translations;
- LibreTranslate: ``POST /translate`` ``{"q": [...], "source": "en", "target": "fr", "api_key": K}``,
  answered with ``translatedText`` as a list;
- native-submit (for reference, not a door's whole answer): the native lists alone, timed until the last
  ``202``: what queueing costs without waiting for a translation (the worker drains them meanwhile).

Every answer is checked (the deterministic engine echoes: each translation is its sentence). After an
untimed warm-up of each door, ``--rounds`` rounds run the doors in a rotating order (each door first in
turn); the figures are medians over the rounds, the ratios the medians of each round's own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.api import api_key, api_process, worker_process
from bench.servers import benchmark_servers
from contract.services import ServiceUrls
from contract.settings import Settings

WORDS_FILE = Path(__file__).parent / "samples" / "english-words.txt"
SEED = 35
NATIVE_POLL_SECONDS = 0.05
"""How long a native client waits before reading a job that was not final again."""
DOORS = ("native", "deepl", "libretranslate", "native-submit")
BASES = ("native", "native-submit")
"""What the DeepL and LibreTranslate doors are compared with: the native door, and its intake alone."""


def sentences(count: int, seed: int = SEED) -> list[str]:
    """``count`` sentences of 4-24 words from the words file, the same for a seed."""
    words = WORDS_FILE.read_text(encoding="utf-8").split()
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=rng.randint(4, 24))).capitalize() + "." for _ in range(count)]


@dataclass
class DoorCall:
    """What one door's client needs: a session on the API, the key, and a count of the HTTP requests sent."""

    session: aiohttp.ClientSession
    key: str
    http_requests: int = 0

    async def post(self, path: str, body: dict[str, Any] | list[Any], headers: dict[str, str]) -> Any:
        """POST ``body`` as JSON; the answer's JSON (raises, naming the door's answer, unless 200/202)."""
        self.http_requests += 1
        async with self.session.post(path, json=body, headers=headers) as response:
            if response.status not in (200, 202):
                raise SystemExit(f"POST {path} answered {response.status}: {await response.text()}")
            return await response.json()

    async def get(self, path: str, headers: dict[str, str]) -> Any:
        """GET ``path``; the answer's JSON (raises unless 200)."""
        self.http_requests += 1
        async with self.session.get(path, headers=headers) as response:
            if response.status != 200:
                raise SystemExit(f"GET {path} answered {response.status}: {await response.text()}")
            return await response.json()


async def native(call: DoorCall, texts: list[str]) -> list[str]:
    """``POST /v1/jobs`` with the list, then each id read until final: the translations in order."""
    headers = {"Authorization": f"Bearer {call.key}"}
    body = [{"text": text, "source_lang": "en", "target_lang": "fr"} for text in texts]
    ids = (await call.post("/v1/jobs", body, headers))["ids"]
    translations = []
    for job_id in ids:
        while True:
            job = await call.get(f"/v1/jobs/{job_id}", headers)
            if job["status"] in ("succeeded", "failed", "cancelled"):
                break
            await asyncio.sleep(NATIVE_POLL_SECONDS)
        translations.append(job["translation"])
    return translations


async def native_submit(call: DoorCall, texts: list[str]) -> None:
    """``POST /v1/jobs`` with the list, and nothing more (no translation is read: the door's intake alone)."""
    headers = {"Authorization": f"Bearer {call.key}"}
    body = [{"text": text, "source_lang": "en", "target_lang": "fr"} for text in texts]
    ids = (await call.post("/v1/jobs", body, headers))["ids"]
    assert len(ids) == len(texts), f"{len(ids)} ids for {len(texts)} jobs"


async def deepl(call: DoorCall, texts: list[str]) -> list[str]:
    """DeepL API v2: ``POST /v2/translate`` with the list; the translations it answers with."""
    headers = {"Authorization": f"DeepL-Auth-Key {call.key}"}
    answer = await call.post("/v2/translate", {"text": texts, "source_lang": "EN", "target_lang": "FR"}, headers)
    return [item["text"] for item in answer["translations"]]


async def libretranslate(call: DoorCall, texts: list[str]) -> list[str]:
    """LibreTranslate: ``POST /translate`` with ``q`` a list and the key in the body; its ``translatedText``."""
    answer = await call.post("/translate", {"q": texts, "source": "en", "target": "fr", "api_key": call.key}, {})
    return list(answer["translatedText"])


DOOR_CLIENTS: dict[str, Callable[[DoorCall, list[str]], Awaitable[list[str] | None]]] = {
    "native": native,
    "deepl": deepl,
    "libretranslate": libretranslate,
    "native-submit": native_submit,
}


async def through_door(
    base: str, key: str, door: str, texts: list[str], per_request: int, clients: int
) -> dict[str, Any]:
    """Every text through ``door`` in lists of ``per_request`` over ``clients`` connections; the seconds,
    the translate requests and the HTTP requests it took. Raises if a translation is not its sentence."""
    lists = [texts[n : n + per_request] for n in range(0, len(texts), per_request)]
    pending = iter(enumerate(lists))
    answers: list[list[str] | None] = [None for _ in lists]
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(base, connector=connector, timeout=timeout) as session:
        call = DoorCall(session, key)

        async def client() -> None:
            for index, chunk in pending:
                answers[index] = await DOOR_CLIENTS[door](call, chunk)

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        seconds = time.perf_counter() - start
    got = [translation for answer in answers for translation in answer or ()]
    if door != "native-submit" and got != texts:
        wrong = sum(1 for a, b in zip(got, texts, strict=False) if a != b) + abs(len(got) - len(texts))
        raise SystemExit(f"the {door} door answered {wrong} of {len(texts)} texts with something else than their echo")
    return {"seconds": seconds, "requests": len(lists), "http_requests": call.http_requests}


def rotations(doors: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The orders the rounds run ``doors`` in, round n taking the n-th (modulo): each door first in turn."""
    return [doors[start:] + doors[:start] for start in range(len(doors))]


def api_cpu_seconds(base: str) -> Callable[[], float]:
    """A reading of the CPU seconds (user and system) the ``dragoman api`` process serving ``base`` has used.

    What a door costs the API process itself, apart from the worker and the clients sharing the machine
    (Linux: ``/proc``; the process is found by its command line's port).
    """
    wanted = ["api", "--port", base.rsplit(":", 1)[1]]  # bench.api.api_process's command line
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
            if any(args[n : n + len(wanted)] == wanted for n in range(len(args))):
                found.append(cmdline.parent / "stat")
    if len(found) != 1:
        raise SystemExit(f"found {len(found)} dragoman api processes serving {base}, not one")
    stat, ticks = found[0], os.sysconf("SC_CLK_TCK")

    def read() -> float:
        fields = stat.read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    return read


def measure(base: str, key: str, args: argparse.Namespace) -> dict[str, Any]:
    """The warm-up, then ``args.rounds`` rounds of every door; each round's figures and the medians."""
    api_cpu = api_cpu_seconds(base)
    texts, doors = sentences(args.sentences), tuple(args.doors)
    orders = rotations(doors)
    for door in doors:  # untimed: connections, the finish waiter, the API's first requests of each route
        asyncio.run(
            through_door(base, key, door, texts[: args.per_request * args.clients], args.per_request, args.clients)
        )
    rounds: list[dict[str, Any]] = []
    for number in range(args.rounds):
        order = orders[number % len(orders)]
        measured: dict[str, dict[str, Any]] = {}
        for door in order:
            cpu_before = api_cpu()
            measured[door] = asyncio.run(through_door(base, key, door, texts, args.per_request, args.clients))
            measured[door]["api_cpu_seconds"] = api_cpu() - cpu_before
        rounds.append({"order": list(order), **measured})
        line = ", ".join(f"{door} {measured[door]['seconds']:.2f} s" for door in doors)
        print(f"round {number + 1} ({', '.join(order)}): {line}", flush=True)
    summary: dict[str, Any] = {}
    for door in doors:
        seconds = statistics.median(r[door]["seconds"] for r in rounds)
        requests = rounds[0][door]["requests"]
        summary[door] = {
            "seconds": round(seconds, 3),
            "requests_per_s": round(requests / seconds, 1),
            "jobs_per_s": round(len(texts) / seconds),
            "translate_requests": requests,
            "api_cpu_ms_per_job": round(
                statistics.median(r[door]["api_cpu_seconds"] for r in rounds) * 1000 / len(texts), 3
            ),
            "http_requests": rounds[0][door]["http_requests"],
        }
    ratios = {  # jobs/s against the base's, each round's own, their median
        f"{door}_vs_{base}": round(statistics.median(r[base]["seconds"] / r[door]["seconds"] for r in rounds), 3)
        for base in BASES
        for door in doors
        if base in doors and door not in BASES
    }
    for r in rounds:
        for door in doors:
            r[door]["seconds"] = round(r[door]["seconds"], 3)
            r[door]["api_cpu_seconds"] = round(r[door]["api_cpu_seconds"], 3)
    return {"sentences": len(texts), "per_request": args.per_request, "clients": args.clients, "rounds": rounds,
            "doors": summary, "ratios": ratios}  # fmt: skip


def run(urls: ServiceUrls, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """The API and a zero-cost worker on ``urls``, a key of a fresh tenant, and the measurement."""
    settings = Settings(
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        key_prefix=f"bench-{uuid.uuid4().hex[:8]}",
        memory_enabled=False,
    )
    key = api_key(settings, f"bench-{uuid.uuid4().hex[:8]}")
    with api_process(settings, log_dir / "api.log", checkout=args.api_checkout) as base, worker_process(settings):
        return measure(base, key, args)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options (``argv``: the command line without the program, else ``sys.argv``'s)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=1_000, help="sentences through each door a round")
    parser.add_argument("--per-request", type=int, default=50, help="texts in one request (DeepL allows 50)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent connections")
    parser.add_argument("--rounds", type=int, default=6, help="rounds, the doors' order rotating")
    parser.add_argument(
        "--doors", type=_doors, default=DOORS, help=f"comma-separated, of {', '.join(DOORS)} (default: all)"
    )
    parser.add_argument(
        "--api-checkout",
        type=Path,
        default=None,
        help="run dragoman api from this source tree (another commit's, for a before/after); the worker is this one's",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out/doors.json"))
    return parser.parse_args(argv)


def _doors(value: str) -> tuple[str, ...]:
    doors = tuple(door.strip() for door in value.split(",") if door.strip())
    unknown = sorted(set(doors) - set(DOORS))
    if unknown or not doors:
        raise argparse.ArgumentTypeError(f"unknown door(s) {unknown}; the doors are {', '.join(DOORS)}")
    return doors


def main() -> None:
    """Measure once, print a table, write JSON."""
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-doors-") as logs, benchmark_servers() as urls:
        result = run(urls, args, Path(logs))
    result["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "when": time.strftime("%F %R"),
    }
    print(f"{result['sentences']:,} sentences, {result['per_request']} a request, {result['clients']} connections, "
          f"median of {len(result['rounds'])} rounds:")  # fmt: skip
    for door, figures in result["doors"].items():
        print(
            f"  {door:<15} {figures['seconds']:>7.2f} s {figures['requests_per_s']:>8.1f} requests/s "
            f"{figures['jobs_per_s']:>7,} jobs/s {figures['api_cpu_ms_per_job']:>6.3f} API CPU ms/job "
            f"({figures['http_requests']:,} HTTP requests)"
        )
    print(f"ratios (jobs/s against native's, median of the rounds'): {result['ratios']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
