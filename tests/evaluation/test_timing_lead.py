"""The GPU spin before each timed call (harness/runtime/timing.py): long enough that the host has
queued the whole call before the GPU reaches the start event, bounded, and not set by one outlier."""

from kernelevolve.harness.runtime.timing import LEAD_MAX_MS, LEAD_MIN_MS, lead_ms


def test_the_spin_covers_the_hosts_enqueue_time_with_margin():
    host = [0.030, 0.031, 0.029, 0.035, 0.030, 0.032, 0.030, 0.033, 0.031, 0.034]
    assert lead_ms(host) >= 2 * 0.034  # every sampled enqueue finishes inside the spin, twice over


def test_a_rare_preemption_does_not_set_the_spin():
    host = [0.02] * 95 + [5.0] * 5  # the OS took the CPU away for 5 ms on 5% of calls
    assert lead_ms(host) == 2 * 0.02


def test_the_spin_is_bounded_both_ways():
    assert lead_ms([0.0001] * 20) == LEAD_MIN_MS
    assert lead_ms([3.0] * 20) == LEAD_MAX_MS  # a call slower than that on the host pays for it
    assert lead_ms([]) == LEAD_MAX_MS
