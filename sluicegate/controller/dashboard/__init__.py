"""The controller's read-only web dashboard (aiohttp; static HTML, one script, one stylesheet).

``start_dashboard`` serves it beside the API; ``views`` turns the Manager's
state into JSON; ``access`` authenticates requests as the API does.
"""

from sluicegate.controller.dashboard.access import serving_context
from sluicegate.controller.dashboard.app import Dashboard, DashboardError, start_dashboard

__all__ = ["Dashboard", "DashboardError", "serving_context", "start_dashboard"]
