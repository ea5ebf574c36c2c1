"""Replay of Kueue's scheduler performance test (test/performance/scheduler) against a real controller.

``run.py`` drives it: ``config`` reads Kueue's generator schema and expands it
into a plan, ``generator`` creates the objects over gRPC on schedule,
``fakenode`` plays the nodes through the real agent protocol, ``recorder``
turns workload events into Kueue's runner summary, ``profiling`` reads the
controller's profile.  A benchmark: it prints figures, it asserts nothing.
"""
