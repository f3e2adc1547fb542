"""Settings whose fastest value depends on the device: a config's `auto` resolves here.

CPU values are measured in experiments/speed/; CUDA values come from the A/B rows of
experiments/gpu_check/: a lever that wins there changes its "cuda" value here, CPUs keep theirs.
"""

DEFAULTS: dict[str, dict[str, bool]] = {
    # torch.compile of the training forward: it lost on CPUs (experiments/speed/README.md); on
    # CUDA it stays off until experiments/gpu_check/ has measured it.
    "compile": {"cpu": False, "cuda": False},
}


def device_default(name: str, device_type: str) -> bool:
    """The value of setting `name` on this device type ("cpu", "cuda"); others take the CPU's."""
    values = DEFAULTS[name]
    return values.get(device_type, values["cpu"])
