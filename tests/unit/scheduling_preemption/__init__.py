"""Tests of preemption (classic and fair sharing) and fair-sharing ordering."""
