"""What every layer of the kernel reads: configuration, stats, clocks (no I/O of their own)."""
