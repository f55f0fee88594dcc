from ocrbatch.pipeline.batcher import Batcher


def by_size(item):
    return item[0]


def test_batch_closes_when_full():
    b = Batcher(max_batch=3, max_wait_s=1.0, key=by_size)
    assert b.add(("A4", 1), now=0.0) == []
    assert b.add(("A4", 2), now=0.1) == []
    assert b.add(("A4", 3), now=0.2) == [("A4", [("A4", 1), ("A4", 2), ("A4", 3)])]
    assert len(b) == 0 and b.next_deadline() is None


def test_batch_closes_when_oldest_page_waited_its_window():
    b = Batcher(max_batch=8, max_wait_s=0.5, key=by_size)
    b.add(("A4", 1), now=10.0)
    b.add(("A4", 2), now=10.4)
    assert b.next_deadline() == 10.5
    assert b.due(now=10.49) == []
    assert b.due(now=10.5) == [("A4", [("A4", 1), ("A4", 2)])]


def test_pages_of_different_shapes_wait_in_separate_buckets():
    b = Batcher(max_batch=2, max_wait_s=1.0, key=by_size)
    b.add(("A4", 1), now=0.0)
    b.add(("receipt", 2), now=0.1)
    assert len(b) == 2
    assert b.add(("receipt", 3), now=0.2) == [("receipt", [("receipt", 2), ("receipt", 3)])]
    # the A4 page keeps its own window, measured from when it arrived
    assert b.due(now=0.9) == []
    assert b.due(now=1.0) == [("A4", [("A4", 1)])]


def test_due_returns_oldest_bucket_first_and_flush_empties_everything():
    b = Batcher(max_batch=5, max_wait_s=1.0, key=by_size)
    b.add(("y", 1), now=0.3)
    b.add(("x", 2), now=0.1)
    assert [k for k, _ in b.due(now=5.0)] == ["x", "y"]
    b.add(("z", 3), now=6.0)
    assert b.flush() == [("z", [("z", 3)])]
    assert b.flush() == []


def test_a_lowered_cap_applies_to_pages_already_waiting():
    b = Batcher(max_batch=8, max_wait_s=1.0, key=by_size)
    for i in range(5):
        b.add(("A4", i), now=0.0)
    b.max_batch = 2  # e.g. after an out-of-memory error
    assert [len(items) for _, items in b.due(now=1.0)] == [2, 2, 1]
