from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_tasks.versions import ServerVersion


@pytest.mark.parametrize(
    ("text", "release", "known"),
    [
        ("0.32.0", (0, 32, 0), True),
        ("0.11.1.post2", (0, 11, 1), True),
        ("0.30.1.dev202609231158", (0, 30, 1), True),
        ("0.32.0+cpu", (0, 32, 0), True),
        ("0.10.1rc1", (0, 10, 1), True),
        ("v0.9", (0, 9, 0), True),
        ("dev", None, False),
        ("", None, False),
        ("unknown", None, False),
    ],
)
def test_parse(text: str, release: tuple[int, int, int] | None, known: bool) -> None:
    version = ServerVersion.parse(text)
    assert version.release == release
    assert version.known is known
    assert str(version) == text.strip()


def test_ordering_follows_pep440() -> None:
    ordered = [
        "0.11.0",
        "0.11.1.dev5",
        "0.11.1rc1",
        "0.11.1",
        "0.11.1+cpu",
        "0.11.1.post2",
        "0.30.1.dev202609231158",
        "0.30.1",
        "0.32.0",
    ]
    parsed = [ServerVersion.parse(v) for v in ordered]
    keys = [v.sort_key() for v in parsed]
    assert keys == sorted(keys)
    assert ServerVersion.parse("0.11.1.post2") > ServerVersion.parse("0.11.1")
    assert ServerVersion.parse("0.30.1.dev202609231158") < ServerVersion.parse("0.30.1")
    assert ServerVersion.parse("0.30.1.dev202609231158") > ServerVersion.parse("0.30.0")


def test_at_least() -> None:
    assert ServerVersion.parse("0.32.0+cpu").at_least("0.20.0")
    assert not ServerVersion.parse("0.19.1").at_least("0.20.0")
    assert ServerVersion.parse("dev").at_least("9.9.9")  # unknown: let the server decide


@given(st.text())
def test_parse_never_raises(text: str) -> None:
    version = ServerVersion.parse(text)
    assert isinstance(version.sort_key(), tuple)


@given(
    st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)),
    st.sampled_from(["", "+cpu", ".post1"]),
)
def test_generated_versions_round_trip(parts: tuple[int, int, int], suffix: str) -> None:
    text = ".".join(map(str, parts)) + suffix
    assert ServerVersion.parse(text).release == parts
