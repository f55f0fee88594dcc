"""The batching policy, driven by a fake clock: no threads, no sleeps."""

from ocrbatch.pipeline.batcher import Batcher


def by_size(item):
    return item[0]


def test_batch_closes_when_full():
    b = Batcher(max_batch=3, max_wait_s=1.0, key=by_size)
    b.add(("A4", 1), now=0.0)
    b.add(("A4", 2), now=0.1)
    assert b.next(now=0.15) is None
    b.add(("A4", 3), now=0.2)
    assert b.next(now=0.2) == ("A4", [("A4", 1), ("A4", 2), ("A4", 3)])
    assert len(b) == 0 and b.next_deadline() is None


def test_batch_closes_when_oldest_page_waited_its_window():
    b = Batcher(max_batch=8, max_wait_s=0.5, key=by_size)
    b.add(("A4", 1), now=10.0)
    b.add(("A4", 2), now=10.4)
    assert b.next_deadline() == 10.5
    assert b.next(now=10.49) is None
    assert b.next(now=10.5) == ("A4", [("A4", 1), ("A4", 2)])


def test_pages_of_different_shapes_wait_in_separate_buckets():
    b = Batcher(max_batch=2, max_wait_s=1.0, key=by_size)
    b.add(("A4", 1), now=0.0)
    b.add(("receipt", 2), now=0.1)
    assert len(b) == 2
    b.add(("receipt", 3), now=0.2)
    assert b.next(now=0.2) == ("receipt", [("receipt", 2), ("receipt", 3)])
    # the A4 page keeps its own window, measured from when it arrived
    assert b.next(now=0.9) is None
    assert b.next(now=1.0) == ("A4", [("A4", 1)])


def test_due_buckets_go_oldest_first_and_expire_makes_everything_due():
    b = Batcher(max_batch=5, max_wait_s=1.0, key=by_size)
    b.add(("y", 1), now=0.3)
    b.add(("x", 2), now=0.1)
    assert [b.next(now=5.0)[0], b.next(now=5.0)[0]] == ["x", "y"]
    b.add(("z", 3), now=6.0)
    assert b.next(now=6.0) is None
    b.expire(now=6.0)
    assert b.next(now=6.0) == ("z", [("z", 3)])
    assert b.next(now=6.0) is None


def test_a_lowered_cap_applies_to_pages_already_waiting():
    b = Batcher(max_batch=8, max_wait_s=1.0, key=by_size)
    for i in range(5):
        b.add(("A4", i), now=0.0)
    b.max_batch = 2  # e.g. after an out-of-memory error
    assert [len(b.next(now=1.0)[1]) for _ in range(3)] == [2, 2, 1]


def test_interactive_pages_go_before_full_bulk_batches_and_ride_with_bulk_pages():
    b = Batcher(max_batch=4, max_wait_s=0.2, key=by_size)
    for i in range(8):
        b.add(("A4", f"bulk{i}"), now=0.0)
    b.add(("A4", "urgent"), now=0.05, lane="interactive")
    # A device is free and bulk work is ready: the interactive page goes first, topped up with bulk pages.
    assert b.next(now=0.05) == ("A4", [("A4", "urgent"), ("A4", "bulk0"), ("A4", "bulk1"), ("A4", "bulk2")])
    assert b.depth() == {"interactive": 0, "bulk": 5}


def test_an_interactive_page_waits_its_window_until_bulk_work_would_run_then_goes_first():
    b = Batcher(max_batch=4, max_wait_s=0.2, key=by_size)
    b.add(("receipt", "bulk"), now=0.0)
    b.add(("A4", "urgent"), now=0.1, lane="interactive")
    b.add(("A4", "urgent2"), now=0.15, lane="interactive")
    assert b.next(now=0.12) is None  # nothing is due: the interactive pages wait for company
    # At 0.2 the bulk page is due: the interactive pages go first, both in one batch, before their own window ends.
    assert b.next(now=0.2) == ("A4", [("A4", "urgent"), ("A4", "urgent2")])
    assert b.next(now=0.2) == ("receipt", [("receipt", "bulk")])


def test_interactive_pages_alone_share_a_batch_within_their_window():
    b = Batcher(max_batch=8, max_wait_s=0.2, key=by_size)
    for i in range(3):
        b.add(("A4", f"user{i}"), now=0.01 * i, lane="interactive")
    assert b.next(now=0.1) is None
    assert b.next_deadline() == 0.2
    assert b.next(now=0.2) == ("A4", [("A4", "user0"), ("A4", "user1"), ("A4", "user2")])


def test_bulk_pages_are_not_starved_by_a_stream_of_interactive_pages():
    b = Batcher(max_batch=2, max_wait_s=0.1, key=by_size, starve_s=1.0)
    b.add(("A4", "bulk"), now=0.0)
    served = []
    t = 0.0
    while t < 3.0:
        b.add(("A4", f"i{t:.1f}a"), now=t, lane="interactive")
        b.add(("A4", f"i{t:.1f}b"), now=t, lane="interactive")
        batch = b.next(now=t)
        served += batch[1] if batch else []
        t = round(t + 0.1, 1)
    assert ("A4", "bulk") in served
    assert served.index(("A4", "bulk")) <= 2 * 11  # it went once it had waited starve_s (1 s: 11 batches of 2)


def test_remove_takes_out_pages_nobody_wants():
    b = Batcher(max_batch=8, max_wait_s=0.2, key=by_size)
    b.add(("A4", "keep"), now=0.0)
    b.add(("A4", "gone"), now=0.0, lane="interactive")
    assert b.remove(lambda item: item[1] == "gone") == [("A4", "gone")]
    assert b.depth() == {"interactive": 0, "bulk": 1}


def test_an_interactive_page_rides_on_top_of_a_full_bulk_batch_and_pushes_no_bulk_page_out():
    b = Batcher(max_batch=4, max_wait_s=0.2, key=by_size, room=1)
    for i in range(4):
        b.add(("A4", f"bulk{i}"), now=0.0)
    b.add(("A4", "urgent"), now=0.01, lane="interactive")
    b.add(("A4", "urgent2"), now=0.01, lane="interactive")
    assert b.next(now=0.01) == ("A4", [("A4", "urgent"), ("A4", "urgent2"), ("A4", "bulk0"), ("A4", "bulk1"),
                                       ("A4", "bulk2")])  # 4 + room 1: two interactive pages take one bulk slot
    assert b.next(now=0.3) == ("A4", [("A4", "bulk3")])
    c = Batcher(max_batch=4, max_wait_s=0.2, key=by_size, room=1)
    for i in range(6):
        c.add(("A4", f"bulk{i}"), now=0.0)
    assert len(c.next(now=0.0)[1]) == 4  # without interactive pages, max_batch holds


def test_interactive_pages_alone_keep_to_max_batch():
    """The room on top is for riding on bulk pages: `--max-batch 1` runs one page at a time."""
    b = Batcher(max_batch=1, max_wait_s=0.2, key=by_size, room=1)
    for i in range(3):
        b.add(("A4", f"urgent{i}"), now=0.0, lane="interactive")
    assert [len(b.next(now=0.3)[1]) for _ in range(3)] == [1, 1, 1]
    c = Batcher(max_batch=2, max_wait_s=0.2, key=by_size, room=1)
    for i in range(5):
        c.add(("A4", f"urgent{i}"), now=0.0, lane="interactive")
    c.add(("A4", "bulk0"), now=0.0)
    assert c.next(now=0.3)[1] == [("A4", "urgent0"), ("A4", "urgent1"), ("A4", "bulk0")]  # one bulk page rides
