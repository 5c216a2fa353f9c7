"""Planner: SQL text -> logical plan -> optimized plan -> physical dataflow."""
