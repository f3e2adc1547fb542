"""A run through its stops: the agreed stop, SLURM requeue, the run lock, loggers, sweeps, DDP."""
