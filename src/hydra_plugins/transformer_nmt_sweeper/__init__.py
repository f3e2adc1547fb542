"""Our Hydra sweeper: workers of one Optuna study, on one machine or many, resumable.

Hydra finds plugins only in the `hydra_plugins` namespace package, hence this folder beside
`transformer_nmt`. Hydra imports every public module here at start-up (every run, not only
sweeps), so the Optuna code lives in the private modules, which it skips.
"""
