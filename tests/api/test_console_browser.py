"""The web console in headless Chromium against a real API (uvicorn), worker (deterministic engine) and orchestrator.

Signs in (a wrong key first), uploads a Markdown document, watches it complete, downloads it and
compares its structure with the source; an unsupported file shows the API's error; the key is never
in the URL and signing out forgets it. ``DRAGOMAN_CONSOLE_SCREENSHOTS=<dir>`` keeps screenshots
(desktop and phone) of the completed document there (docs/images/console.png comes from it).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api import create_app
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from storage import AsyncConnectionPool
from storage.history import HistoryStore
from tests import waiting
from tests.api.conftest import KeyMaker, uvicorn_serving
from tests.orchestrator.test_runs_and_documents import run_orchestrator
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="needs Debian's chromium and its driver (/usr/bin/chromium, /usr/bin/chromedriver); make installs them",
    ),
]

SOURCE = """# Release notes

Some *new* features, described in [the guide](https://example.com/guide).

## Installing

1. Download the package.
2. Run the installer.

- Fast
- Small
  - and nested

```bash
pip install dragoman  # never translated
```

### Last words

> Thanks for reading.
"""


def line(i: int) -> str:
    """A run line: an English sentence, so that its language is detected (the console sends source "auto")."""
    return f"The train to the city leaves at {i} o'clock every morning."


def structure(markdown: str) -> list[str]:
    """The Markdown's skeleton: heading levels, list markers and code blocks (with their code), in order."""
    skeleton: list[str] = []
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            skeleton.append(line)
        elif in_code:
            skeleton.append(line)
        elif heading := re.match(r"#{1,6} ", line):
            skeleton.append(heading.group())
        elif item := re.match(r"\s*(?:[-*+]|\d+[.)]) ", line):
            skeleton.append(item.group())
        elif line.startswith(">"):
            skeleton.append(">")
    return skeleton


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The orchestrator's RQ tasks read their settings from the environment."""


@pytest.fixture
def worker(start_worker: WorkerFactory) -> Iterator[Callable[[], None]]:
    """``worker()`` starts a deterministic-engine worker (translation == text) on a loop thread (this test's
    thread drives the browser); it stops after the test."""
    loop = LoopThread("console-worker")
    running = start_worker(DeterministicEngine())
    started = False

    def start() -> None:
        nonlocal started
        loop.run(running.__aenter__())
        started = True

    try:
        yield start
    finally:
        if started:
            loop.run(running.__aexit__(None, None, None))
        loop.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium through Debian's chromedriver, downloading into ``tmp_path/downloads``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(check: Callable[[], Any], what: str, between: Callable[[], Any] | None = None) -> Any:
    """Poll ``check()`` until it is truthy, however long that takes (running ``between()`` before each try, then
    every 0.1 s: it runs the orchestrator or refreshes the page); its value."""
    if between is None:
        return waiting.wait_for(check, what)
    run_between = between

    def checked() -> Any:
        run_between()
        return check()

    return waiting.wait_for(checked, what, every=0.1)


def sign_in(browser: Any, key: str) -> None:
    """Sign in with ``key`` through the page's form."""
    from selenium.webdriver.common.by import By

    field = browser.find_element(By.ID, "api-key")
    field.clear()
    field.send_keys(key)
    browser.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()
    wait_for(lambda: browser.find_element(By.ID, "workspace").is_displayed(), "the signed-in workspace")


def test_sign_in_upload_a_document_watch_it_complete_and_download_it(
    settings: Settings, tenant_key: KeyMaker, worker: Callable[[], None], browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    def text_of(element_id: str) -> str:
        return str(browser.find_element(By.ID, element_id).text)

    key = tenant_key("console")
    markdown = tmp_path / "release-notes.md"
    markdown.write_text(SOURCE)
    unsupported = tmp_path / "notes.xyz"
    unsupported.write_text("Hello.")
    run = tmp_path / "strings.jsonl"
    # The console's source is "auto": each line's language is detected, so each is a sentence, not a label.
    run.write_text("".join(json.dumps({"custom_id": f"s{i}", "text": line(i)}) + "\n" for i in range(3)))
    worker()
    with uvicorn_serving(create_app(settings)) as url:
        browser.get(url + "/")
        # A wrong key shows the API's own error and does not get in.
        browser.find_element(By.ID, "api-key").send_keys("not-a-key")
        browser.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()
        wait_for(lambda: "not valid" in text_of("sign-in-error"), "the wrong key's error")
        assert not browser.find_element(By.ID, "workspace").is_displayed()

        sign_in(browser, key)
        assert browser.execute_script("return sessionStorage.getItem('dragoman.apiKey')") == key

        # A text, on the interactive lane: the identity engine gives it back.
        browser.find_element(By.ID, "text-input").send_keys("Good morning.")
        browser.find_element(By.CSS_SELECTOR, "#translate-form button[type=submit]").click()
        wait_for(lambda: text_of("translate-output") == "Good morning.", "the text's translation")
        # One word from "auto" (issue 49: "The job failed"): a best guess, the language said
        browser.find_element(By.ID, "text-input").clear()
        browser.find_element(By.ID, "text-input").send_keys("Save")
        browser.find_element(By.CSS_SELECTOR, "#translate-form button[type=submit]").click()
        wait_for(lambda: text_of("translate-output") == "Save", "the short text's translation")
        assert text_of("translate-status") == "Done, detected en." and not text_of("translate-error")

        # A file of no format dragoman knows: the API's 415 message, nothing listed.
        browser.find_element(By.ID, "file-input").send_keys(str(unsupported))
        browser.find_element(By.CSS_SELECTOR, "#files-form button[type=submit]").click()
        wait_for(lambda: "cannot tell the document's format" in text_of("files-error"), "the unsupported file's error")
        assert "notes.xyz → fr" in text_of("files-error")

        # A document and a JSONL run in one go.
        browser.find_element(By.ID, "file-input").send_keys(f"{markdown}\n{run}")
        browser.find_element(By.CSS_SELECTOR, "#files-form button[type=submit]").click()
        items = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#uploads li")[1:], "both uploads listed")
        assert "strings.jsonl → fr" in items[0].text
        wait_for(lambda: text_of("stream-state") == "Progress: live.", "the event stream open")  # before the split
        stream_states: set[str] = set()

        def completed() -> list[Any]:
            stream_states.add(text_of("stream-state"))
            found: list[Any] = browser.find_elements(By.CSS_SELECTOR, "#uploads li[data-status=completed] .download")
            return found[1:]

        # The orchestrator splits and assembles it (RQ's worker, on this thread); the page follows the events.
        wait_for(completed, "both completed, with their downloads", between=run_orchestrator)
        assert "Progress: live." in stream_states, stream_states
        # The segments' job.finished events came through the stream (read with fetch: the key is a header).
        assert int(browser.find_element(By.ID, "stream-state").get_attribute("data-events") or 0) >= 10
        assert text_of("files-error") == ""
        for progress in browser.find_elements(By.CSS_SELECTOR, "#uploads li progress"):
            assert progress.get_attribute("value") == "100"

        (document,) = [li for li in browser.find_elements(By.CSS_SELECTOR, "#uploads li") if "release-notes" in li.text]
        document.find_element(By.CSS_SELECTOR, "button.download").click()
        downloaded = tmp_path / "downloads" / "release-notes.fr.md"
        wait_for(downloaded.exists, "the downloaded file")
        translated = downloaded.read_text()
        assert structure(translated) == structure(SOURCE) and len(structure(SOURCE)) > 10
        assert translated == SOURCE  # the identity engine: the text itself comes back, in its structure

        browser.find_element(By.ID, "download-all").click()
        archive = tmp_path / "downloads" / "dragoman-translations.zip"
        wait_for(archive.exists, "the zip of every result")
        with zipfile.ZipFile(archive) as zipped:
            assert zipped.read("release-notes.fr.md").decode() == translated
            results = [json.loads(line) for line in zipped.read("strings.fr.results.jsonl").splitlines()]
        assert [(r["custom_id"], r["translation"]) for r in results] == [(f"s{i}", line(i)) for i in range(3)]

        assert key not in browser.current_url and "key" not in browser.current_url
        # Every form control has a label; on a phone-sized screen nothing runs off the side.
        unlabelled = browser.execute_script(
            "return [...document.querySelectorAll('input, select, textarea')]"
            ".filter((e) => !e.labels.length && !e.getAttribute('aria-label')).map((e) => e.id)"
        )
        assert unlabelled == []
        browser.set_window_size(390, 844)
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        browser.set_window_size(1280, 1000)
        # Nothing the policy blocked, no script error (the 401 and 415 answers are logged as failed loads).
        problems = [
            entry["message"]
            for entry in browser.get_log("browser")
            if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
        ]
        assert problems == []
        _screenshots(browser)

        browser.find_element(By.ID, "sign-out").click()
        wait_for(lambda: browser.find_element(By.ID, "sign-in").is_displayed(), "the sign-in form again")
        assert browser.execute_script("return sessionStorage.getItem('dragoman.apiKey')") is None
        assert browser.find_elements(By.CSS_SELECTOR, "#uploads li") == []


@pytest.fixture
def job_recorded(settings: Settings) -> Iterator[Callable[[str, str], bool]]:
    """``job_recorded(tenant, job_id)``: whether a worker has written the job's row (a job cancelled while
    queued is retryable from then on)."""
    assert settings.database_url
    loop = LoopThread("console-history")
    pool = AsyncConnectionPool(settings.database_url, max_connections=1)
    try:
        yield lambda tenant, job_id: loop.run(HistoryStore(pool).job_to_retry(tenant, job_id)) is not None
    finally:
        loop.run(pool.close())
        loop.close()


_ROW_SCRIPT = """
const [status, text, button] = arguments;
const row = [...document.querySelectorAll(`#history-list li[data-status=${status}]`)]
    .find((li) => li.textContent.includes(text));
if (row && button) row.querySelector(button).click();
return Boolean(row);
"""
"""Find the history's row of a status that shows a text (and click one of its buttons) in one step: the
list is redrawn on every refresh, so an element found in one call may be gone in the next."""


def test_history_cancel_and_retry(
    settings: Settings,
    make_key: KeyMaker,
    worker: Callable[[], None],
    job_recorded: Callable[[str, str], bool],
    browser: Any,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    tenant = f"console-{uuid.uuid4().hex[:8]}"
    key = make_key(tenant)
    draft = tmp_path / "draft.md"
    draft.write_text(SOURCE)

    def row(status: str, text: str, click: str | None = None) -> bool:
        return bool(browser.execute_script(_ROW_SCRIPT, status, text, click))

    def refresh() -> None:
        run_orchestrator()
        browser.find_element(By.ID, "history-refresh").click()

    with uvicorn_serving(create_app(settings)) as url:
        # No worker yet: a job cancelled while queued, for the history to retry.
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as http:
            submitted = http.post("/v1/jobs", json={"text": "Hello history.", "source_lang": "en", "target_lang": "fr"})
            job_id = submitted.json()["id"]
            assert http.post(f"/v1/jobs/{job_id}/cancel").json()["status"] == "cancelled"
        browser.get(url + "/")
        sign_in(browser, key)

        # An upload with the document options (this server takes them), cancelled from the list while it
        # waits to be split.
        browser.find_element(By.CSS_SELECTOR, "#files-form summary").click()
        assert browser.find_element(By.ID, "document-options").is_enabled()
        Select(browser.find_element(By.ID, "file-formality")).select_by_value("formal")
        browser.find_element(By.ID, "file-context").send_keys("Release notes of a command-line tool.")
        browser.find_element(By.ID, "file-glossary").send_keys("release = version\nnotes = notes")
        browser.find_element(By.ID, "file-input").send_keys(str(draft))
        browser.find_element(By.CSS_SELECTOR, "#files-form button[type=submit]").click()
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#uploads li button.cancel"), "its cancel")
        browser.execute_script("document.querySelector('#uploads li button.cancel').click()")  # redrawn meanwhile
        wait_for(
            lambda: browser.find_elements(By.CSS_SELECTOR, "#uploads li[data-status=cancelled]"),
            "the upload cancelled",
            between=run_orchestrator,
        )
        worker()

        # Jobs: the cancelled one, retried as a new job that the worker translates.
        wait_for(lambda: job_recorded(tenant, job_id), "the cancelled job's row")
        browser.find_element(By.ID, "tab-jobs").click()
        wait_for(lambda: row("cancelled", job_id, "button.retry"), "the cancelled job listed, retried")
        wait_for(lambda: row("succeeded", "Hello history."), "the retried job translated", between=refresh)

        # Documents (keys move between tabs with the arrows): the cancelled draft, retried, completed, downloaded.
        browser.find_element(By.ID, "tab-jobs").send_keys(Keys.ARROW_LEFT, Keys.ARROW_LEFT)
        assert browser.find_element(By.ID, "tab-documents").get_attribute("aria-selected") == "true"
        wait_for(lambda: row("cancelled", "draft.md", "button.retry"), "the cancelled draft listed, retried")
        wait_for(lambda: row("completed", "draft.md"), "the retried draft completed", between=refresh)
        row("completed", "draft.md", "button.download")
        downloaded = tmp_path / "downloads" / "draft.translated.md"
        wait_for(downloaded.exists, "the history's download")
        assert structure(downloaded.read_text()) == structure(SOURCE)


HOSTILE = '<img src=x onerror="window.pwned=1">'
"""Markup where the page shows server data (a file name, a job's text, an error): it must show as text."""

_DELAY_LISTS = """
const real = window.fetch;
window.fetch = async (url, options) => {
  const answer = await real(url, options);
  if (String(url).startsWith("/v1/jobs?")) await new Promise((resolve) => setTimeout(resolve, 800));
  return answer;
};
"""
"""Hold the job list's answers back 0.8 s, as a slow server would."""


def test_hostile_server_data_is_text_a_late_answer_after_sign_out_is_dropped_and_a_401_signs_out(
    settings: Settings, tenant_key: KeyMaker, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    key = tenant_key("console-hostile")
    with uvicorn_serving(create_app(settings)) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as http:
            document = http.post(
                "/v1/documents",
                params={"source_lang": "en", "target_lang": "fr", "filename": f"{HOSTILE}.md"},
                content=b"# Title\n\nHello.\n",
            )
            assert document.status_code == 202, document.text
            job = http.post("/v1/jobs", json={"text": HOSTILE, "source_lang": "en", "target_lang": "fr"})
            assert job.status_code == 202, job.text
            document_id = document.json()["id"]
            assert http.post(f"/v1/documents/{document_id}/cancel").status_code == 200
            wait_for(
                lambda: http.get(f"/v1/documents/{document_id}").json()["status"] == "cancelled",
                "the document cancelled",
                between=run_orchestrator,
            )
        browser.get(url + "/")
        sign_in(browser, key)

        # The document's hostile name is listed as text: no element made of it, nothing run.
        wait_for(lambda: HOSTILE in browser.find_element(By.ID, "history-list").text, "the hostile name listed")
        assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
        assert browser.execute_script("return window.pwned") is None
        retry = browser.find_element(By.CSS_SELECTOR, "#history-list li[data-status=cancelled] button.retry")
        assert HOSTILE in retry.get_attribute("aria-label")

        # A double click on Retry is one retry: one new document, not two.
        browser.execute_script("arguments[0].click(); arguments[0].click();", retry)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as http:
            wait_for(lambda: len(http.get("/v1/documents").json()["data"]) > 1, "the retried document")
            time.sleep(0.5)  # a second retry, had it been sent, has landed too
            assert len(http.get("/v1/documents").json()["data"]) == 2

        # On a phone, the hostile rows run off no side and every button is a target of at least 24x24 px.
        browser.set_window_size(390, 844)
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        small = browser.execute_script(
            "return [...document.querySelectorAll('button')].filter((b) => b.offsetParent)"
            ".map((b) => b.getBoundingClientRect()).filter((r) => r.width < 24 || r.height < 24).length"
        )
        assert small == 0
        browser.set_window_size(1280, 1000)

        # A list still on its way when the person signs out is not drawn afterwards (for the next one).
        browser.execute_script(_DELAY_LISTS)
        browser.find_element(By.ID, "tab-jobs").click()
        browser.find_element(By.ID, "sign-out").click()
        time.sleep(1.2)
        assert browser.find_element(By.ID, "history-list").get_attribute("childElementCount") == "0"
        assert browser.find_element(By.ID, "history-note").get_attribute("textContent") == ""
        assert browser.find_element(By.ID, "history-error").get_attribute("textContent") == ""

        # A key revoked mid-session (here: replaced by a wrong one): the next answer's 401 signs out, saying why.
        sign_in(browser, key)
        browser.execute_script("sessionStorage.setItem('dragoman.apiKey', 'dg_revoked')")
        browser.find_element(By.ID, "history-refresh").click()
        wait_for(lambda: browser.find_element(By.ID, "sign-in").is_displayed(), "back to the sign-in form")
        assert "not valid" in browser.find_element(By.ID, "sign-in-error").text
        assert browser.execute_script("return sessionStorage.getItem('dragoman.apiKey')") is None
        assert browser.execute_script("return localStorage.length") == 0
        assert key not in browser.current_url


def _screenshots(browser: Any) -> None:
    """Desktop and phone-sized (390x844) screenshots of the completed upload, into ``DRAGOMAN_CONSOLE_SCREENSHOTS``."""
    folder = os.environ.get("DRAGOMAN_CONSOLE_SCREENSHOTS")
    if not folder:
        return
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    for name, size in (("console.png", (1280, 1000)), ("console-phone.png", (390, 844))):
        browser.set_window_size(*size)
        browser.execute_script("document.getElementById('uploads-title').scrollIntoView({block: 'center'})")
        time.sleep(0.5)  # the new size laid out and painted
        browser.save_screenshot(str(target / name))
