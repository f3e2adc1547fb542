"""Lightning callbacks: what a run shows (attention maps, translation table, batch telemetry)
and what keeps it safe (last checkpoint, finite loss)."""
