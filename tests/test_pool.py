"""The buffer pool on a CPU-only torch: the same code path as on a GPU, without pinning; then the pool in the
pipeline (back-pressure). The DeepSeek-OCR-2 engine's use of it is tested in test_deepseek_ocr2.py."""

import threading

import pytest

torch = pytest.importorskip("torch")

from ocrbatch.gpu.pool import BufferPool, PoolExhausted  # noqa: E402

GLOBAL, CROP = (3, 64, 64), (3, 48, 48)


def test_slots_are_reused_allocation_count_flat_after_warm_up():
    pool = BufferPool(slots_per_shape=8)
    for batch in range(100):
        slots = [pool.acquire(GLOBAL) for _ in range(2)] + pool.acquire_many(CROP, 6)
        for i, slot in enumerate(slots):
            slot.numpy()[:] = batch + i  # preprocessing writes straight into the host buffer
            assert float(slot.host[0, 0, 0]) == batch + i
        if batch == 0:
            after_warm_up = pool.allocations
        pool.release(*slots)
    assert after_warm_up == 8  # 2 global + 6 crop slots
    assert pool.allocations == after_warm_up
    assert pool.stats()["acquired"] == 800 and pool.stats()["pinned"] == 0


def test_exhausted_pool_blocks_until_a_slot_comes_back():
    pool = BufferPool(slots_per_shape=2)
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
    pool = BufferPool(slots_per_shape=1)
    a = pool.acquire(GLOBAL)
    b = pool.acquire(CROP)  # not blocked by the GLOBAL slot in use
    assert a.shape == GLOBAL and b.shape == CROP and pool.in_use() == 2


def test_a_closed_pool_wakes_its_waiters():
    pool = BufferPool(slots_per_shape=1)
    pool.acquire(CROP)
    errors = []
    waiting = threading.Thread(target=lambda: _catch(errors, lambda: pool.acquire(CROP)))
    waiting.start()
    waiting.join(0.05)
    pool.close()  # the run is aborting
    waiting.join(5)
    assert not waiting.is_alive() and [type(e).__name__ for e in errors] == ["PoolClosed"]


def _catch(errors, fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        errors.append(exc)


# -- the pool in the real paths ----------------------------------------------------------------------------

def test_exhausted_slots_hold_the_decode_threads_back_through_the_pipeline(tmp_path, register_engine):
    from typer.testing import CliRunner

    from conftest import draw_page, manifest
    from engines import PooledEngine
    from ocrbatch.cli import app
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(8):
        draw_page(f"page {i}", size=(200, 260), font_size=18).save(docs / f"p{i}.png")
    draw_page("bad", size=(200, 260), font_size=18).save(docs / "poison.png")
    r = CliRunner().invoke(app, ["convert", str(docs), "-o", str(tmp_path / "out"), "--engine",
                                 register_engine(PooledEngine), "--max-batch", "1", "-j", "2", "--json",
                                 "--no-progress"])
    assert r.exit_code == 3, (r.stderr, r.exception)  # the poisoned page failed; the rest went through
    statuses = {rec["source"].rsplit("/", 1)[-1]: rec["status"] for rec in manifest(tmp_path / "out")}
    assert statuses.pop("poison.png") == "failed" and set(statuses.values()) == {"ok"} and len(statuses) == 8
    assert "poison.png: ValueError: cannot preprocess this page" in r.stderr
    pool = PooledEngine.last.pool
    assert pool.waits >= 1  # a decode thread waited for a slot instead of allocating
    assert pool.allocations == 2 and pool.in_use() == 0  # never more than its slots; every one came back


def test_device_staging_on_a_cpu_double_buffers_and_grows_only_when_a_batch_needs_more():
    from ocrbatch.gpu.staging import DeviceStaging

    staging = DeviceStaging("cpu")
    hosts = [torch.full(CROP, float(i)) for i in range(5)]
    first = staging.stage({"crops": hosts[:2]})
    second = staging.stage({"crops": hosts[:1]})  # the next batch, while the first one computes
    with pytest.raises(RuntimeError, match="every buffer set holds a batch"):
        staging.stage({"crops": hosts[:1]})
    first.wait()  # nothing to wait for on a CPU
    assert torch.equal(first.tensors["crops"], torch.stack(hosts[:2])) and second.tensors["crops"].shape[0] == 1
    first.done()
    first.done()  # idempotent
    third = staging.stage({"crops": hosts[:2]})  # into the first set's buffers again: no allocation
    assert staging.allocations == 2 and torch.equal(third.tensors["crops"][1], hosts[1])
    second.done()
    third.done()
    for _ in range(10):
        staged = staging.stage({"crops": hosts[:2]})
        staged.done()
    assert staging.allocations == 2  # both sets hold two crops now: steady state
    bigger = staging.stage({"crops": hosts})  # five crops: that set grows (to 8)
    assert staging.allocations == 3 and torch.equal(bigger.tensors["crops"], torch.stack(hosts))
    bigger.done()
    assert staging.stats()["copied_bytes"] > 0
