"""The hostile harness's registry covers the whole public surface: a public name it does not list fails
here (so a new method, function, result conversion, CLI command or integration class is attacked from its
first commit), and so does a name it lists that no longer exists."""

from __future__ import annotations

from ..hostile.registry import REGISTRY, public_names, resolve, size


def test_every_public_name_is_registered() -> None:
    missing = sorted(public_names() - set(REGISTRY))
    assert not missing, f"register these in tests/hostile/registry.py (how to attack each): {missing}"


def test_every_registered_name_exists() -> None:
    gone = []
    for name in REGISTRY:
        try:
            resolve(name)
        except (AttributeError, LookupError, ImportError):
            gone.append(name)
    assert not gone, f"tests/hostile/registry.py names what no longer exists: {gone}"


def test_registry_size(capsys: object) -> None:
    entries, cases = size()
    print(f"hostile registry: {len(REGISTRY)} entry points, {entries} calls, {cases} attacks")
    assert cases >= entries > 0
