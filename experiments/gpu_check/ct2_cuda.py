"""Whether CTranslate2's CUDA libraries load here: a tiny translate on the GPU, in a subprocess.

Its wheel is built against one CUDA major version (12 for 4.x) and loads cuBLAS and the CUDA
runtime only when a model first runs on the GPU; where they are missing it raises, or aborts
the process. So the check tries it the way the decoding row would, in a child that may crash,
rather than comparing version strings.

    python -m experiments.gpu_check.ct2_cuda      # exits 0 where it translated on the GPU
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120  # seconds: loading the libraries and one beam over 3 tokens


def problem() -> str | None:
    """None where a tiny model translates on the GPU; else the child's last line saying why."""
    try:
        child = subprocess.run(
            [sys.executable, "-m", __name__],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return f"a tiny translate on the GPU did not end within {TIMEOUT} s"
    if child.returncode == 0:
        return None
    lines = (child.stdout + child.stderr).strip().splitlines()
    said = lines[-1][:200] if lines else f"exit status {child.returncode}, nothing printed"
    return said


def translate_tiny() -> None:
    """Convert a 1-layer model to CTranslate2 and beam-search one sentence with it on cuda:0."""
    import ctranslate2

    if ctranslate2.get_cuda_device_count() < 1:
        raise SystemExit(f"ctranslate2 {ctranslate2.__version__} sees no CUDA device")
    import torch

    from experiments.gpu_check.decoding import word_tokenizer
    from transformer_nmt.data.tokenizer import PAD_ID
    from transformer_nmt.export.ct2 import CT2Search
    from transformer_nmt.model import Transformer

    vocab = 16
    model = Transformer(vocab, PAD_ID, N=1, d_model=16, d_ff=32, h=2)
    search = CT2Search(model, word_tokenizer(vocab), torch.device("cuda", 0), "float16")
    options = dict(beam_size=2, alpha=0.6, penalty="fairseq", max_len_b=2, n_best=1)
    list(search([[[5, 6, 7]]], **options))


if __name__ == "__main__":
    translate_tiny()
