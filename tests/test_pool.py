"""The buffer pool on a CPU-only torch: the same code path as on a GPU, without pinning."""

import threading

import pytest

torch = pytest.importorskip("torch")

from ocrbatch.gpu.pool import BufferPool, PoolExhausted  # noqa: E402

GLOBAL, CROP = (3, 64, 64), (3, 48, 48)


def test_slots_are_reused_allocation_count_flat_after_warm_up():
    pool = BufferPool("cpu", slots_per_shape=8)
    for batch in range(100):
        slots = [pool.acquire(GLOBAL) for _ in range(2)] + [pool.acquire(CROP) for _ in range(6)]
        for i, slot in enumerate(slots):
            slot.numpy()[:] = batch + i  # preprocessing writes straight into the host buffer
            assert float(slot.to_device()[0, 0, 0]) == batch + i
        if batch == 0:
            after_warm_up = pool.allocations
        pool.release(*slots)
    assert after_warm_up == 8  # 2 global + 6 crop slots; no device twins on a CPU
    assert pool.allocations == after_warm_up
    assert pool.stats()["acquired"] == 800 and pool.stats()["pinned"] == 0


def test_exhausted_pool_blocks_until_a_slot_comes_back():
    pool = BufferPool("cpu", slots_per_shape=2)
    held = [pool.acquire(CROP), pool.acquire(CROP)]
    with pytest.raises(PoolExhausted):
        pool.acquire(CROP, timeout=0.05)
    got = []
    waiting = threading.Thread(target=lambda: got.append(pool.acquire(CROP)))
    waiting.start()
    waiting.join(0.1)
    assert got == []  # back-pressure: decode waits instead of allocating
    pool.release(held[0])
    waiting.join(5)
    assert got == [held[0]] and pool.allocations == 2
    assert pool.stats()["waits"] >= 2


def test_shapes_have_their_own_slots():
    pool = BufferPool("cpu", slots_per_shape=1)
    a = pool.acquire(GLOBAL)
    b = pool.acquire(CROP)  # not blocked by the GLOBAL slot in use
    assert a.shape == GLOBAL and b.shape == CROP and pool.in_use() == 2
