"""A batch's validated jobs on local disk: read back whole, in order, a round trip's worth at a time."""

from __future__ import annotations

import msgspec

from contract.schemas import JobSpec, build_job_spec
from tenancy.job_spill import _FLUSH_BYTES, JobSpill


def _spec(n: int, text: str = "") -> JobSpec:
    spec = build_job_spec(
        f"job-{n}", text or f"line {n}", "en", "fr", max_chars=10_000, metadata={"custom_id": f"r{n}"}
    )
    return msgspec.structs.replace(spec, sequence=n, run_id="run-1")


async def test_jobs_come_back_in_order_in_frames_of_the_asked_size() -> None:
    async with JobSpill(frame_size=4) as spill:
        specs = [_spec(n) for n in range(10)]
        for spec in specs:
            await spill.add(spec)
        assert spill.count == 10
        frames = [frame async for frame in spill.frames()]
    assert [len(frame) for frame in frames] == [4, 4, 2]
    assert [spec for frame in frames for spec in frame] == specs


async def test_more_than_the_memory_buffer_goes_through_the_file() -> None:
    long_text = "x" * 4_000
    count = _FLUSH_BYTES // 4_000 * 2  # about two flushes' worth
    async with JobSpill(frame_size=500) as spill:
        for n in range(count):
            await spill.add(_spec(n, long_text))
        sequences = [spec.sequence async for frame in spill.frames() for spec in frame]
    assert sequences == list(range(count))


async def test_an_empty_spill_has_no_frames_and_closing_twice_is_harmless() -> None:
    spill = JobSpill(frame_size=10)
    assert [frame async for frame in spill.frames()] == []
    await spill.close()
    await spill.close()
