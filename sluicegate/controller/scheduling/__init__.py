"""The pure scheduling core: quota maths, flavor assignment, the cycle, preemption.

Everything here is a deterministic function of its inputs: no I/O, no
asyncio, no clock reads (``now`` arrives in the snapshot).  The controller's
services call in with a snapshot and act on the decisions that come back;
``sluicectl simulate`` runs the very same code on a YAML file.
"""
