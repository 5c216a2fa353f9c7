"""Runtime: executes a physical dataflow on Arrow record batches."""
