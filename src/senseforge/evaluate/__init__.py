"""Evaluation: tasks x formulations x models -> per-sample records -> metrics with confidence intervals."""
