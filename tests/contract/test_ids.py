"""Ids: every spelling of a UUID becomes one canonical string; anything else is refused with ``None``."""

from __future__ import annotations

import uuid

import pytest

from contract.ids import canonical_uuid, job_id_for

CANONICAL = "0f8e2c1a-5b3d-4e6f-9a7b-1c2d3e4f5a6b"


@pytest.mark.parametrize(
    "spelling",
    [
        CANONICAL,
        CANONICAL.upper(),
        f"  {CANONICAL}\n",
        f"{{{CANONICAL}}}",
        f"urn:uuid:{CANONICAL}",
        CANONICAL.replace("-", ""),
        uuid.UUID(CANONICAL),
    ],
)
def test_every_spelling_of_a_uuid_has_one_canonical_form(spelling: object) -> None:
    assert canonical_uuid(spelling) == CANONICAL


@pytest.mark.parametrize(
    "value",
    [None, "", "   ", "42", "not-a-uuid", CANONICAL[:-1], CANONICAL + "0", 42, b"0f8e2c1a5b3d4e6f9a7b1c2d3e4f5a6b", []],
)
def test_what_is_not_a_uuid_gives_none(value: object) -> None:
    assert canonical_uuid(value) is None


def test_a_groups_job_ids_are_stable_distinct_and_canonical() -> None:
    group = str(uuid.uuid4())
    ids = [job_id_for(group, sequence) for sequence in range(100)]
    assert ids == [job_id_for(group, sequence) for sequence in range(100)]
    assert len(set(ids)) == 100
    assert all(canonical_uuid(job_id) == job_id for job_id in ids)
    assert job_id_for(str(uuid.uuid4()), 0) != ids[0]


def test_a_groups_job_ids_are_the_uuid5_of_the_sequence_whatever_form_the_group_id_has() -> None:
    group = uuid.uuid4()
    expected = [str(uuid.uuid5(group, str(sequence))) for sequence in (0, 1, 9, 10, 99_999, 1_000_000)]
    for form in (str(group), str(group).upper(), group.hex, "{" + str(group) + "}"):
        assert [job_id_for(form, sequence) for sequence in (0, 1, 9, 10, 99_999, 1_000_000)] == expected
