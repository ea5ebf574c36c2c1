"""The controller: the one owner of cluster state.

``model`` and ``scheduling`` are pure (values; quota maths, flavor
assignment, the cycle, preemption, placement); ``cache``, ``queues``,
``lifecycle`` and ``fleet`` hold and evolve live state; ``manager`` orders
every change (validate, store, apply, publish); ``store`` persists it;
``service`` is the gRPC edge and ``server`` the process around it all.
"""
