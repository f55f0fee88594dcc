"""The one stall watchdog (pipeline/watchdog.py): a thing stuck past the timeout is given up once, with its
reason; one that finished in time never is. The paths that use it (a Converter's decode threads, a device, a
run, a server) are tested with real engines made to hang in test_faults.py and test_serve.py."""

from __future__ import annotations

from ocrbatch.pipeline.watchdog import Task, Watchdog


def test_a_page_stuck_past_the_timeout_is_given_up_once_with_its_reason():
    dog, given = Watchdog(timeout=2), []
    task = dog.watch(Task("reading or preparing the page", given.append))
    assert dog.check(task.since + 1) == 0 and given == []  # not stuck yet
    assert dog.check(task.since + 3) == 1
    assert dog.check(task.since + 9) == 0  # its page has its one result: never a second
    assert given == ["stalled: reading or preparing the page took over 2 s (stall_timeout)"]
    assert task.finish() is False  # the thread coming back late: its result is not the page's
    dog.close()


def test_a_page_that_finished_in_time_is_never_given_up():
    dog, given = Watchdog(timeout=2), []
    task = dog.watch(Task("reading or preparing the page", given.append))
    assert task.finish() is True
    assert dog.check(task.since + 60) == 0 and given == []
    dog.close()
