"""sluicectl, the command-line client (its library is :mod:`sluicegate.client`)."""
