"""gRPC servicers: decode the request, call the manager, encode the answer.

Servicers hold no logic of their own.  Domain errors are mapped to status
codes in exactly one place (:func:`~sluicegate.controller.service.errors.status_for`).
"""
