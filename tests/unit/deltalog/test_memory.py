"""The allocator settings of a log operation: freed blocks stay in glibc's heaps while it runs
(no page handed back and faulted in again), glibc's initial thresholds and a trim at its end,
and a user's own malloc tuning left alone."""

from __future__ import annotations

import pytest

from airflow_delta_maintenance.deltalog._runtime import memory


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    seen: list[tuple[str, int, int]] = []
    monkeypatch.setattr(memory, "_mallopt", lambda param, value: seen.append(("mallopt", param, value)) or 1)
    monkeypatch.setattr(memory, "_malloc_trim", lambda pad: seen.append(("trim", pad, 0)) or 1)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    return seen


def test_an_operation_keeps_freed_blocks_and_restores_glibc_after_it(calls: list[tuple[str, int, int]]) -> None:
    with memory.log_operation_memory():
        assert calls == [("mallopt", -3, 32 << 20), ("mallopt", -1, 1 << 30)]
        with memory.log_operation_memory():  # nested: nothing changes until the outer one ends
            pass
        assert len(calls) == 2
    assert calls[2:] == [("mallopt", -3, 128 << 10), ("mallopt", -1, 128 << 10), ("trim", 0, 0)]


def test_a_failed_operation_restores_them_too(calls: list[tuple[str, int, int]]) -> None:
    with pytest.raises(RuntimeError), memory.log_operation_memory():
        raise RuntimeError("boom")
    assert calls[-3:] == [("mallopt", -3, 128 << 10), ("mallopt", -1, 128 << 10), ("trim", 0, 0)]


def test_a_pool_the_user_chose_is_kept_and_freed_memory_is_still_handed_back(calls: list[tuple[str, int, int]],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/operators/optimize.md tells an Airflow worker to set ``ARROW_DEFAULT_MEMORY_POOL``:
    its operations keep that pool and still trim at their end, as without the variable."""
    import pyarrow as pa

    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
    saved = pa.default_memory_pool()
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    try:
        with memory.log_operation_memory():
            assert pa.default_memory_pool().backend_name == "mimalloc"
        assert pa.default_memory_pool().backend_name == "mimalloc"
    finally:
        pa.set_memory_pool(saved)
    assert calls == [("mallopt", -3, 32 << 20), ("mallopt", -1, 1 << 30), ("mallopt", -3, 128 << 10), ("mallopt", -1, 128 << 10), ("trim", 0, 0)]


@pytest.mark.parametrize(
    "env",
    [
        {"MALLOC_MMAP_THRESHOLD_": "65536"},
        {"MALLOC_TRIM_THRESHOLD_": "0"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"},
        {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=4096"},
    ],
)
def test_a_users_malloc_thresholds_are_left_alone(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert memory._load_mallopt() is None


def test_other_malloc_settings_do_not_turn_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")  # common in Airflow images; not a threshold
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    assert (memory._load_mallopt() is not None) == (memory._malloc_trim is not None)
