"""Per-process background work: the runtime, scheduler loops, leases, long polls."""
