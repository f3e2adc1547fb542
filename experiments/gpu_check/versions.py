"""The check's first row: the libraries, the device and the commit every other row ran on."""

import importlib.metadata
import platform
import subprocess

import torch

# The Python packages the rows run (distribution names); "-" where one is not installed.
PACKAGES = ("torch", "lightning", "transformers", "ctranslate2")


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def versions(device: torch.device) -> dict[str, str]:
    """torch, CUDA, cuDNN, lightning, transformers, ctranslate2, the device, driver and commit."""
    found = {name: package_version(name) for name in PACKAGES}
    found["CUDA"] = torch.version.cuda or "-"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    found["cuDNN"] = str(cudnn) if cudnn else "-"
    if device.type == "cuda":
        found["device"] = torch.cuda.get_device_name(device)
        found["driver"] = output(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        )
    else:
        found["device"] = platform.processor() or platform.machine()
        found["driver"] = "-"
    found["commit"] = output(["git", "rev-parse", "--short", "HEAD"])
    return found


def output(command: list[str]) -> str:
    """What `command` prints, "-" where it cannot run or prints nothing."""
    try:
        printed = subprocess.run(command, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "-"
    return printed.strip() or "-"


def describe(found: dict[str, str]) -> str:
    """One line: `name version` pairs in the order `versions` gives them."""
    return ", ".join(f"{name} {version}" for name, version in found.items())
