"""Tests of the daemon plumbing in sluicegate.common (a package so module names stay unique)."""
