"""Stream operators: each reads like the paper (process_batch, on_watermark, snapshot_state)."""
