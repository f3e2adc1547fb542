"""The experiments' code. Run a script from the repository root as a module, for example
`python -m experiments.speed.benchmark`; what several scripts share is in `common/`."""
