"""The run plan: what a run decides once at its start, on global rank 0, and hands to every rank."""
