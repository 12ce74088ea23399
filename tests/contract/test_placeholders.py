"""The placeholder grammar shared by the gettext splitter and the ``placeholders`` quality flag."""

from __future__ import annotations

import pytest

from contract.placeholders import placeholder_difference, placeholders


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%s files in %d folders", ["%s", "%d"]),
        ("%1$s moved to %2$s", ["%1$s", "%2$s"]),
        ("total %-5.2f, %*d, %ld, %08.3f", ["%-5.2f", "%*d", "%ld", "%08.3f"]),
        ("%(count)d of %(name)s", ["%(count)d", "%(name)s"]),
        ("%@ shared %1$@", ["%@", "%1$@"]),
        ("Hello %{user}", ["%{user}"]),
        (
            "{} and {0} and {name} and {0:>8} and {x!r} and {user.name} and {items[0]}",
            ["{}", "{0}", "{name}", "{0:>8}", "{x!r}", "{user.name}", "{items[0]}"],
        ),
        ("{count} files, {n, number}, {d, date, short}", ["{count}", "{n, number}", "{d, date, short}"]),
        ("Hi {{ user.name }} and {{other}}", ["{{user.name}}", "{{other}}"]),
        ("Total: ${amount}", ["${amount}"]),
        ("%I64d and %I64u on Windows, %ls, %zu, %lld", ["%I64d", "%I64u", "%ls", "%zu", "%lld"]),
        ("glibc: %m, %Zu, %Id, %S, %C", ["%m", "%Zu", "%Id", "%S", "%C"]),
        ("%<PRId64> bytes at %#<PRIx64>, %15<PRIuMAX>", ["%<PRId64>", "%#<PRIx64>", "%15<PRIuMAX>"]),
        ("%1$*2$d and %1$-*2$.*3$f", ["%1$*2$d", "%1$-*2$.*3$f"]),
    ],
)
def test_each_form_is_one_placeholder(text: str, expected: list[str]) -> None:
    assert sorted(placeholders(text).elements()) == sorted(expected)


def test_a_doubled_percent_is_no_placeholder_and_hides_none() -> None:
    assert not placeholders("100%% sure, 100%%s")


@pytest.mark.parametrize("prose", ["50% de remise", "10%-20% off", "it costs $5 or $HOME", "a {b c} d", "x % y"])
def test_prose_has_no_placeholders(prose: str) -> None:
    assert not placeholders(prose)


def test_an_icu_plural_is_its_argument_and_its_inner_messages_placeholders() -> None:
    text = "{n, plural, one {# item for {name}} other {# items for {name}}} left, {when}"
    assert dict(placeholders(text)) == {"{n, plural}": 1, "{name}": 2, "{when}": 1}


def test_an_icu_inner_message_of_one_word_is_text() -> None:
    source = "{n, plural, =0 {none} one {item} other {items}}"
    translation = "{n, plural, =0 {aucun} one {article} other {articles}}"
    assert placeholder_difference(source, translation) == ([], [])


def test_a_broken_icu_construct_is_scanned_as_text() -> None:
    assert dict(placeholders("{n, plural, one {x")) == {"{n, plural}": 1}


def test_the_difference_lists_missing_and_invented_with_repeats() -> None:
    assert placeholder_difference("%s and %s, {name}", "%s et {nom}") == (["%s", "{name}"], ["{nom}"])
    assert placeholder_difference("%1$s %2$s", "%2$s %1$s") == ([], [])
    assert placeholder_difference("{{ a }}", "{{a}}") == ([], [])


def test_numbering_an_unnumbered_message_to_reorder_it_is_no_change() -> None:
    assert placeholder_difference("%s: %d", "%2$d : %1$s") == ([], [])
    assert placeholder_difference("%1$s %2$d", "%2$s %1$d") == (["%1$s", "%2$d"], ["%1$d", "%2$s"])
