"""Our Hydra sweeper: hydra-optuna-sweeper's, resuming a stored study where it stopped.

Hydra finds plugins only in the `hydra_plugins` namespace package, hence this folder beside
`transformer_nmt`. Hydra imports every public module here at start-up (every run, not only
sweeps), so the Optuna code lives in `_impl.py`, which it skips, as the Optuna plugin does.
"""
