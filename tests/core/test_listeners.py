"""Listeners: one way to hear of an event (a record made, a region call timed, an op declared)."""
import functools
import threading

import pytest

from thunderlab.core.listeners import Listeners


def test_listeners_are_called_in_order_and_the_handle_removes_one():
    heard = []
    events = Listeners("a test event")
    stop_a = events.add(lambda x: heard.append(("a", x)))
    events.add(lambda x: heard.append(("b", x)))
    events(1)
    assert stop_a() is True
    events(2)
    assert heard == [("a", 1), ("b", 1), ("b", 2)]
    assert stop_a() is False  # removing twice is harmless


def test_a_function_listens_once_however_often_it_is_added():
    heard = []
    events = Listeners("a test event")
    events.add(heard.append)
    events.add(heard.append)  # an equal bound method: the same listener
    events("x")
    assert heard == ["x"] and len(events) == 1 and heard.append in events
    events.remove(heard.append)
    assert len(events) == 0


def test_a_listener_removed_while_an_event_is_announced_still_hears_that_one():
    heard = []
    events = Listeners("a test event")
    stops = []
    stops.append(events.add(lambda x: (heard.append(("first", x)), stops[1]())))
    stops.append(events.add(lambda x: heard.append(("second", x))))
    events(1)
    events(2)
    assert heard == [("first", 1), ("second", 1), ("first", 2)]


def test_adding_from_threads_loses_none():
    events = Listeners("a test event")
    fns = [functools.partial(int, i) for i in range(200)]
    threads = [threading.Thread(target=lambda part=fns[k::4]: [events.add(f) for f in part]) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(f() for f in events) == list(range(200))


def test_a_listener_must_be_callable():
    with pytest.raises(TypeError, match="a listener for a test event must be callable, got int"):
        Listeners("a test event").add(3)
