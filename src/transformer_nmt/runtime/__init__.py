"""What every process of a run leans on: atomic writes, locks, processes, run names, W&B ids."""
