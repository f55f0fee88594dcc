import threading

import pytest

from ocrbatch.pipeline.queue import ClosableQueue, Closed


def test_get_drains_then_raises_closed_after_last_producer_closes():
    q = ClosableQueue(maxsize=4, producers=2)
    q.put(1)
    q.close()
    q.put(2)  # the second producer is still open
    q.close()
    assert [q.get(), q.get()] == [1, 2]
    with pytest.raises(Closed):
        q.get()


def test_get_with_timeout_returns_none_while_open_and_empty():
    q = ClosableQueue(maxsize=1)
    assert q.get(timeout=0.01) is None


def test_put_blocks_when_full_until_a_consumer_takes():
    q = ClosableQueue(maxsize=1)
    q.put("a")
    entered, finished = threading.Event(), threading.Event()

    def producer():
        entered.set()
        q.put("b")
        finished.set()

    t = threading.Thread(target=producer)
    t.start()
    entered.wait()
    assert not finished.wait(0.1)  # back-pressure: the queue is full
    assert q.get() == "a"
    assert finished.wait(5)
    assert q.get() == "b"
    t.join()


def test_abort_wakes_blocked_producers_and_consumers():
    q = ClosableQueue(maxsize=1)
    q.put("x")
    errors = []

    def producer():
        try:
            q.put("y")
        except Closed:
            errors.append("closed")

    t = threading.Thread(target=producer)
    t.start()
    q.abort()
    t.join(5)
    assert errors == ["closed"]
    with pytest.raises(Closed):
        q.get()
