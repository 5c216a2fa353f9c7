"""Checkpoints: storage layout and the coordinator of asynchronous barrier snapshots."""
