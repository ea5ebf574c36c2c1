"""The node agent: runs the pods the controller binds here as Linux processes.

``policy`` is pure (QoS, node admission, eviction ranking); ``runtime``,
``cgroups``, ``monitor`` and ``checkpoint`` start, watch, limit and re-adopt
processes; ``node`` is the agent's view of its node; ``link`` is the stream to
the controller; ``static`` and ``pressure`` are the kubelet's static pods and
eviction manager; ``server`` wires them under one supervisor.
"""
