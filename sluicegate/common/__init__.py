"""Process plumbing shared by the controller and agent daemons.

Everything a long-running sluicegate service needs in order to behave well
under systemd and be observable by operators, and nothing about queues,
quota or pods:

* ``sdnotify``  -- the systemd notify protocol (readiness, status, watchdog);
* ``supervise`` -- one supervisor for the named root tasks, stop signals and
  a hard shutdown deadline;
* ``health``    -- the operator HTTP port: liveness, readiness, metrics and
  caller-supplied JSON views;
* ``metrics``   -- per-daemon prometheus_client registries, scrape-time
  collectors, rendering.

This is an edge layer: it may use asyncio, aiohttp and prometheus_client, and the pure cores
(``model``, ``controller/scheduling``, ``agent/policy``) must never
import it.
"""
