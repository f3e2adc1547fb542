"""Lightning and Hydra stay at the edges: the model package, and everything a user who only
translates runs, import neither. Each check runs in a fresh interpreter, where nothing is loaded."""

import json
import subprocess
import sys

import pytest

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.data.tokenizer import BPETokenizer

TRAINER = ("lightning", "pytorch_lightning", "hydra")
# The model package does not even read configs; the model card reads the run's with OmegaConf.
CONFIG = ("omegaconf",)
# The translator, each inference command and each exporter.
INFERENCE = [
    "transformer_nmt.inference.translator",
    "transformer_nmt.cli.translate",
    "transformer_nmt.cli.evaluate",
    "transformer_nmt.cli.average",
    "transformer_nmt.cli.plot_attention",
    "transformer_nmt.cli.export",
    "transformer_nmt.export.card",
    "transformer_nmt.export.ct2",
    "transformer_nmt.export.hf",
    "transformer_nmt.export.native",
    "transformer_nmt.export.vmap",
    "transformer_nmt.export.hub_push",
]


def loaded_after(code: str, packages: tuple[str, ...], *args: str) -> list[str]:
    """Which of `packages` a fresh interpreter has loaded after running `code` with `args`."""
    loaded = (
        "import json, sys; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{packages!r})))"
    )
    run = [sys.executable, "-c", f"{code}\n{loaded}", *args]
    out = subprocess.run(run, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_the_model_package_imports_neither_lightning_nor_hydra():
    assert loaded_after("import transformer_nmt.model", TRAINER + CONFIG) == []


@pytest.mark.slow  # imports every exporter's runtime (transformers, ctranslate2)
def test_translating_a_checkpoint_imports_neither_lightning_nor_hydra(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "tiny.ckpt", tokenizer)
    code = "\n".join(
        [
            *(f"import {module}" for module in INFERENCE),
            "from transformer_nmt import Translator",
            "(text,) = Translator.from_checkpoint(sys.argv[1], 'cpu').translate(['one two three'])",
            "assert isinstance(text, str)",
        ]
    )
    assert loaded_after(f"import sys\n{code}", TRAINER, str(path)) == []
