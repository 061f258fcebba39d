"""attnviz.cache: the one bounded cache (bytes, count, TTL on a timer) and the one env_number rule."""

import threading
import time

import numpy as np
import pytest

from attnviz.cache import ByteCache, env_number, nbytes


def _wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_least_recently_used_is_evicted_first_by_bytes():
    a, b, c = (np.zeros(100, np.float64) for _ in range(3))  # 800 bytes each
    cache = ByteCache(2 * nbytes(a))
    cache.put("a", a)
    cache.put("b", b)
    assert cache.get("a")[0]  # a is now the most recent
    cache.put("c", c)
    assert cache.keys() == ["a", "c"]
    assert cache.bytes == 2 * nbytes(a) <= cache.budget


def test_a_value_over_the_budget_is_refused_unless_keep_one():
    big = np.zeros(1000)
    assert not ByteCache(100).put("big", big)
    kept = ByteCache(100, keep_one=True)
    kept.put("small", np.zeros(2))
    assert kept.put("big", big)
    assert kept.keys() == ["big"]  # the last one is kept; nothing else


def test_size_one_bounds_the_count():
    cache = ByteCache(3, size=lambda value: 1)
    for i in range(5):
        cache.put(i, object())
    assert cache.keys() == [2, 3, 4]


def test_entries_expire_on_a_timer_without_any_request():
    cache = ByteCache(10**6, ttl=0.3, reap_every=0.05)
    cache.put("x", np.zeros(10))
    assert len(cache) == 1
    # len() and stats() do not expire anything themselves: only the timer can empty it.
    assert _wait_until(lambda: len(cache) == 0, timeout=3.0)
    assert cache.stats()["bytes"] == 0


class Clock:
    """Seconds that move only when the test says (no dependence on how busy the machine is)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_hit_renews_the_lease():
    clock = Clock()
    cache = ByteCache(10**6, ttl=0.4, clock=clock)
    cache.put("x", 1)
    for _ in range(6):  # 0.9 s in all, each step within the lease
        clock.now += 0.15
        assert cache.get("x") == (True, 1)
    clock.now += 0.41  # unused for longer than the TTL
    assert cache.get("x") == (False, None)
    assert cache.stats()["bytes"] == 0


def test_get_or_build_builds_once_for_concurrent_callers():
    cache = ByteCache(10**6)
    calls = []

    def build():
        calls.append(1)
        time.sleep(0.2)
        return np.arange(3)

    results = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get_or_build("k", build))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert all(np.array_equal(r, np.arange(3)) for r in results)


def test_a_callable_budget_is_read_at_each_put():
    budget = [10**6]
    cache = ByteCache(lambda: budget[0], size=lambda value: 1)
    cache.put("a", 1)
    cache.put("b", 2)
    budget[0] = 1
    cache.put("c", 3)
    assert cache.keys() == ["c"]


@pytest.mark.parametrize(
    ("raw", "minimum", "expected", "warns"),
    [
        (None, 1, 7.0, False),
        ("3", 1, 3.0, False),
        ("0", 1, 7.0, True),  # a positive setting refuses 0 …
        ("0", 0, 0.0, False),  # … a setting whose rule allows 0 keeps it
        ("-2", 0, 7.0, True),
        ("nan", 0, 7.0, True),
        ("inf", 0, 7.0, True),
        ("lots", 0, 7.0, True),
    ],
)
def test_env_number_states_its_rule(monkeypatch, raw, minimum, expected, warns):
    if raw is None:
        monkeypatch.delenv("ATTNVIZ_TEST_NUMBER", raising=False)
    else:
        monkeypatch.setenv("ATTNVIZ_TEST_NUMBER", raw)
    if warns:
        with pytest.warns(RuntimeWarning, match="ATTNVIZ_TEST_NUMBER"):
            assert env_number("ATTNVIZ_TEST_NUMBER", 7, minimum=minimum) == expected
    else:
        assert env_number("ATTNVIZ_TEST_NUMBER", 7, minimum=minimum) == expected
