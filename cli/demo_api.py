"""The demo's HTTP step: ``dragoman api`` started, a key created, one job submitted and polled with ``curl``.

The commands are printed as a user would type them, then run as they are, so what the demo
shows is what works from a shell (and from any language with an HTTP client).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

API_READY_TIMEOUT_S = 60.0
POLL_TIMEOUT_S = 300.0
SENTENCE = "The train to Lyon leaves from platform four."


def show_curl_round_trip(python: str, env: dict[str, str], port: int, log_path: Path) -> int:
    """Start the API on ``port``, submit one job with ``curl``, poll it until it is final; the exit code."""
    curl = shutil.which("curl")
    if curl is None:
        print("      (curl is not installed: skipping the HTTP API example)")
        return 0
    created = subprocess.run(
        [python, "-m", "cli.main", "api-key", "create", f"demo-{int(time.time())}", "--tenant", "demo", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    key = json.loads(created.stdout)
    with open(log_path, "w") as log_file:
        api = subprocess.Popen(
            [python, "-m", "cli.main", "api", "--port", str(port)], stdout=log_file, stderr=subprocess.STDOUT, env=env
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_up(base, api, log_path)
        print(f"      `dragoman api` on {base} (log: {log_path}); key from `dragoman api-key create demo`:")
        body = json.dumps({"text": SENTENCE, "source_lang": "en", "target_lang": "fr"})
        submit = ["curl", "-sS", "-X", "POST", f"{base}/v1/jobs", "-H", "Authorization: Bearer $KEY"]
        submit += ["-H", "Content-Type: application/json", "-d", body]
        accepted = json.loads(_run_shown(submit, key["key"]))
        poll = ["curl", "-sS", f"{base}/v1/jobs/{accepted['id']}", "-H", "Authorization: Bearer $KEY"]
        job = _poll(poll, key["key"])
        print(f"      => {job.get('translation') or job.get('error')}")
        return 0 if job["status"] == "succeeded" else 1
    finally:
        api.terminate()
        api.wait(timeout=30)
        subprocess.run([python, "-m", "cli.main", "api-key", "revoke", key["id"]], env=env, capture_output=True)


def _run(command: list[str], key: str) -> str:
    """Run ``command`` with ``$KEY`` replaced by the key; its output."""
    argv = [part.replace("$KEY", key) for part in command]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


def _run_shown(command: list[str], key: str) -> str:
    """Print ``command`` as typed (``$KEY`` for the key), run it, print and return its output."""
    print("      $ " + " ".join(f'"{part}"' if "$KEY" in part else shlex.quote(part) for part in command))
    output = _run(command, key)
    print(f"      {output.strip()}")
    return output


def _poll(command: list[str], key: str) -> dict[str, object]:
    """Run the GET until the job is final (printed the first time and at the end)."""
    deadline = time.monotonic() + POLL_TIMEOUT_S
    job: dict[str, object] = json.loads(_run_shown(command, key))
    while job["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.5)
        job = json.loads(_run(command, key))
    if job["status"] not in ("queued", "running"):
        shown = {k: job[k] for k in ("id", "status", "translation", "attempts", "model") if k in job}
        print(f"      (polled until final) {json.dumps(shown, ensure_ascii=False)}")
    return job


def _wait_until_up(base: str, api: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + API_READY_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2):
                return
        except OSError:
            if api.poll() is not None:
                raise SystemExit(f"`dragoman api` exited with code {api.returncode}; see {log_path}") from None
            if time.monotonic() > deadline:
                message = f"`dragoman api` was not ready after {API_READY_TIMEOUT_S:.0f}s; see {log_path}"
                raise SystemExit(message) from None
            time.sleep(0.3)
