"""bench.peer's parts that decide what is compared: the batch, the run-batch copy and command, the
output files read back, the start/drain split, the ratios and the options (no vLLM, GPU or server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench.peer import (
    COMPLETE_LINES,
    READY_LINES,
    parse_args,
    peer_ratios,
    per_model,
    run_batch_argv,
    run_vllm_batch,
    same_work,
)
from bench.peer_batch import (
    MAX_TOKENS,
    MIN_TOKENS,
    batch_lines,
    for_run_batch,
    requested_tokens,
    summarize_output,
    write_jsonl,
    wrong_models,
)
from bench.peer_deploy import WorkerConfig, worker_flags
from tests.waiting import FOREVER


def test_the_batch_is_the_same_for_a_seed_and_draws_max_tokens_from_24_to_96() -> None:
    lines = batch_lines(400, seed=7)
    assert lines == batch_lines(400, seed=7)
    assert lines != batch_lines(400, seed=8)
    budgets = [line["body"]["max_tokens"] for line in lines]
    assert min(budgets) >= MIN_TOKENS and max(budgets) <= MAX_TOKENS and len(set(budgets)) > 40
    assert {line["url"] for line in lines} == {"/v1/chat/completions"}
    assert len({line["custom_id"] for line in lines}) == 400
    assert all("model" not in line["body"] for line in lines)  # the deployment's default model
    assert requested_tokens(lines) == sum(budgets)


def test_lines_name_the_models_in_turn() -> None:
    lines = batch_lines(5, models=("small", "big"))
    assert [line["body"]["model"] for line in lines] == ["small", "big", "small", "big", "small"]


def test_dragoman_accepts_every_line_as_generated() -> None:
    """The file dragoman's side uploads holds only fields its batch lines take (no vLLM extras)."""
    from tenancy.batch_lines import parse_line

    for line in batch_lines(20, models=("small", None)):
        custom_id, spec = parse_line(json.dumps(line).encode(), "/v1/chat/completions", max_chars=10_000)
        assert custom_id == line["custom_id"]
        assert spec.generation is not None and spec.generation["max_tokens"] == line["body"]["max_tokens"]


def test_the_run_batch_copy_differs_only_by_its_served_model_and_ignore_eos() -> None:
    lines = batch_lines(3)
    copy = for_run_batch(lines, "/models/m", ignore_eos=True)
    for original, changed in zip(lines, copy, strict=True):
        assert changed["body"] == {**original["body"], "model": "/models/m", "ignore_eos": True}
        assert {k: v for k, v in changed.items() if k != "body"} == {k: v for k, v in original.items() if k != "body"}
    assert "ignore_eos" not in for_run_batch(lines, "m", ignore_eos=False)[0]["body"]
    assert "ignore_eos" not in lines[0]["body"]  # the original is left as it was


def _output_line(custom_id: str, tokens: int, model: str = "m", status: int = 200) -> str:
    body = {"model": model, "usage": {"prompt_tokens": 10, "completion_tokens": tokens}} if status == 200 else None
    error = None if status == 200 else {"message": "no"}
    return json.dumps({"custom_id": custom_id, "response": {"status_code": status, "body": body}, "error": error})


def test_an_output_file_is_read_for_answers_tokens_and_models() -> None:
    text = "\n".join([_output_line("a", 30, "small"), _output_line("b", 40, "big"), _output_line("c", 0, status=400)])
    summary = summarize_output(text + "\n")
    assert (summary.lines, summary.succeeded, summary.failed) == (3, 2, 1)
    assert (summary.output_tokens, summary.prompt_tokens) == (70, 20)
    assert summary.to_dict()["models_answering"] == {"small": 1, "big": 1}
    assert summary.errors and "no" in summary.errors[0]
    lines = [{"custom_id": c, "body": {"model": m}} for c, m in (("a", "small"), ("b", "small"), ("c", "big"))]
    assert wrong_models(lines, summary) == {"small->big": 1, "big-><no answer>": 1}
    assert wrong_models(lines[:1], summary) == {}


def test_run_batch_gets_vllms_defaults_and_only_the_flags_given(tmp_path: Path) -> None:
    argv = run_batch_argv(Path("/m"), tmp_path / "in", tmp_path / "out", "dummy", "")
    assert argv[1:] == [
        *("-m", "vllm.entrypoints.openai.run_batch", "-i", str(tmp_path / "in"), "-o", str(tmp_path / "out")),
        *("--model", "/m", "--load-format", "dummy"),
    ]
    extra = run_batch_argv(Path("/m"), tmp_path / "in", tmp_path / "out", None, "--max-num-seqs 512")
    assert "--load-format" not in extra and extra[-2:] == ["--max-num-seqs", "512"]


def test_run_batch_time_is_split_at_its_ready_line(tmp_path: Path) -> None:
    """A stand-in child that logs run-batch's lines: the start ends at "Reading batch from", the drain when
    every request is answered, before the teardown."""
    script = (
        "import time; time.sleep(0.3); print('INFO building the engine', flush=True); time.sleep(0.3); "
        f"print('INFO {READY_LINES[0]} in.jsonl...', flush=True); time.sleep(0.6); "
        f"print('INFO {COMPLETE_LINES[1]} x', flush=True); time.sleep(0.4)"
    )
    times = run_vllm_batch([sys.executable, "-c", script], tmp_path / "log", timeout=FOREVER)
    assert 0.5 <= times["start_s"] < times["total_s"]
    assert 0.55 <= times["drain_s"] < times["total_s"] - times["start_s"] - 0.3  # the teardown left out
    assert times["exit_after_answered_s"] >= 0.35
    assert times["start_s"] + times["drain_s"] + times["exit_after_answered_s"] == pytest.approx(
        times["total_s"], abs=0.003
    )
    assert READY_LINES[0] in (tmp_path / "log").read_text()


def test_run_batch_time_is_split_at_its_progress_bar_frames(tmp_path: Path) -> None:
    """vLLM 0.26 logs no "Reading batch from": its progress bar's frames, drawn after a carriage return on
    one line, mark the start (0 completed) and the end (100%) as each is drawn (found on the H100)."""
    script = (
        "import sys, time; time.sleep(0.3); "
        "sys.stdout.write('\\rRunning batch:   0% Completed | 0/3'); sys.stdout.flush(); time.sleep(0.6); "
        "sys.stdout.write('\\rRunning batch: 100% Completed | 3/3'); sys.stdout.flush(); time.sleep(0.4); "
        "print(' done', flush=True)"
    )
    times = run_vllm_batch([sys.executable, "-c", script], tmp_path / "log", timeout=FOREVER)
    # The child's sleeps are the least each span takes (a busy machine makes them longer, never shorter).
    assert 0.25 <= times["start_s"] < times["total_s"]
    assert times["drain_s"] >= 0.55  # from the 0% frame (from the 100% one, it would be the 0.4 s to the newline)
    assert times["exit_after_answered_s"] >= 0.35  # the frame at 100% ended it, not the newline 0.4 s later


def test_a_run_batch_that_fails_never_gets_ready_or_runs_too_long_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="exited with 3"):
        run_vllm_batch([sys.executable, "-c", "print('boom'); raise SystemExit(3)"], tmp_path / "log", timeout=FOREVER)
    with pytest.raises(RuntimeError, match="never logged"):
        run_vllm_batch([sys.executable, "-c", "print('done')"], tmp_path / "log2", timeout=FOREVER)
    with pytest.raises(TimeoutError, match="still running"):
        run_vllm_batch([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "log3", timeout=0.5)


def test_ratios_compare_jobs_per_second_without_start_and_total_time_with_it() -> None:
    results = {
        "run-batch": {"jobs_per_s": 200.0, "total_s": 100.0},
        "dragoman": {"jobs_per_s": 600.0, "total_s": 50.0},
        "dragoman-tuned": {"jobs_per_s": 640.0},
    }
    assert peer_ratios(results) == {
        "dragoman_vs_run_batch_drain": 3.0,
        "dragoman_vs_run_batch_total": 2.0,
        "dragoman_tuned_vs_run_batch_drain": 3.2,
        "flagless_vs_tuned": 0.938,
    }
    assert peer_ratios({"dragoman": {"jobs_per_s": 1.0}})["dragoman_vs_run_batch_drain"] is None
    work = same_work({"a": {"output": {"output_tokens": 5}}, "b": {"skipped": "x"}}, 5)
    assert work == {"requested_output_tokens": 5, "output_tokens": {"a": 5}, "all_equal": True}


def test_per_model_rates_run_from_the_create_to_the_models_last_finish() -> None:
    lines = [{"custom_id": c, "body": {"model": m}} for c, m in (("a", "small"), ("b", "big"), ("c", "small"))]
    result = per_model(lines, {"a": 102.0, "b": 110.0, "c": 104.0}, created_at=100.0)
    assert result["small"] == {"lines": 2, "finished": 2, "last_finish_s": 4.0, "jobs_per_s": 0.5}
    assert result["big"]["jobs_per_s"] == 0.1


def test_options_pick_sides_and_dummy_weights_ignore_eos() -> None:
    args = parse_args(["--model", "/m"])
    assert args.sides == ["run-batch", "dragoman"] and args.ignore_eos and args.mode == "peer"
    tuned = parse_args(["--model", "/m", "--worker-args", "--max-num-seqs 256"])
    assert tuned.sides == ["run-batch", "dragoman", "dragoman-tuned"]
    assert not parse_args(["--model", "/m", "--load-format", "auto"]).ignore_eos
    echo = parse_args(["--engine", "echo", "--two-models", "--shares", "0.5,0.3"])
    assert (echo.mode, echo.shares, echo.load_format) == ("two-models", (0.5, 0.3), None)
    for bad in (["--model", "/m", "--sides", "vllm"], ["--model", "/m", "--sides", "dragoman-tuned"], []):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_a_flagless_worker_gets_only_what_dummy_weights_need() -> None:
    plain = WorkerConfig("vllm", Path("/m"), "dummy", True).argv()
    assert plain[1:] == ["-m", "cli.main", "worker", "--log-level", "INFO", "--model", "/m", "--load-format", "dummy",
                         "--ignore-eos"]  # fmt: skip
    named = WorkerConfig("vllm", Path("/m"), None, False, "big", flags=worker_flags("--max-num-seqs 8", 0.4)).argv()
    assert named[-6:] == ["--served-model-name", "big", "--max-num-seqs", "8", "--gpu-memory-utilization", "0.4"]
    echo = WorkerConfig("echo", echo_delay_ms=3).argv()
    assert echo[-4:] == ["--engine", "echo", "--echo-delay-ms", "3"]
    with pytest.raises(ValueError, match="--model"):
        WorkerConfig("vllm").argv()


def test_write_jsonl_writes_one_line_per_item(tmp_path: Path) -> None:
    size = write_jsonl(tmp_path / "x" / "b.jsonl", batch_lines(3))
    text = (tmp_path / "x" / "b.jsonl").read_text()
    assert size == len(text.encode()) and text.count("\n") == 3
    assert [json.loads(line) for line in text.splitlines()] == batch_lines(3)
