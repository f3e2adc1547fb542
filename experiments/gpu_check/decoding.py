"""The decoding rows: beam 4, ours against MarianMT's `generate` and CTranslate2, same batches.

Sources of WMT-shaped lengths with random ids, sorted by length and cut into token batches as
`nmt-evaluate --max-tokens` cuts them; every model's EOS is never predicted (`never_eos`), so
every output runs to its source's length (max_len_b 0) and each engine does the same work.
Ours and MarianMT decode under the rows' autocast (`--dtype bf16-mixed`), CTranslate2 in
bfloat16 weights on a GPU.
"""

import numpy as np
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from experiments.common.batches import random_ids
from experiments.common.peers import BEAM, build, missing
from experiments.common.timing import seconds
from experiments.gpu_check import ct2_cuda
from experiments.gpu_check.training_rows import Shape, free_device, wmt_lengths
from transformer_nmt.data.batching import greedy_sizes
from transformer_nmt.data.framing import source_batch
from transformer_nmt.data.tokenizer import SPECIAL_TOKENS, UNK_ID, BPETokenizer

ALPHA = 0.6


def word_tokenizer(vocab: int) -> BPETokenizer:
    """A vocabulary of `vocab` made-up tokens with ours specials: what CTranslate2 needs to map
    random ids to token strings (it reads and writes strings, not ids)."""
    words = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    words |= {f"w{i}": i for i in range(len(SPECIAL_TOKENS), vocab)}
    tokenizer = Tokenizer(WordLevel(words, unk_token=SPECIAL_TOKENS[UNK_ID]))
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    return BPETokenizer(tokenizer)


def token_batches(shape: Shape, sentences: int, max_tokens: int) -> list[list[list[int]]]:
    """Length-sorted sources (ids without EOS) cut into batches of at most max_tokens."""
    rng = np.random.default_rng(1)
    lengths = sorted(wmt_lengths(shape, seed=1)[0][:sentences].tolist())
    ids = [random_ids(rng, n - 1, shape.vocab) for n in lengths]
    sizes = greedy_sizes(lengths, max_tokens)
    ends = np.cumsum(sizes).tolist()
    return [ids[end - size : end] for size, end in zip(sizes, ends, strict=True)]


def section(rows, shape: Shape, name: str) -> None:
    cuda = shape.device.type == "cuda"
    sentences, max_tokens = (2048, 8192) if cuda else (32, 256)
    groups = token_batches(shape, sentences, max_tokens)
    count = sum(len(g) for g in groups)
    speeds = {}
    for engine in ("ours", "marian"):
        if package := missing(engine):
            rows.add(f"4. {name}: {engine} beam 4", f"skipped: {package} not installed")
            continue
        peer = build(engine, shape.size(name))
        model = peer.model.to(shape.device).eval()
        sources = [source_batch(g, 1024).to(shape.device) for g in groups]

        def decode(peer=peer, sources=sources) -> None:
            with shape.autocast():
                for src in sources:
                    peer.beam(src, 0)

        with shape.autocast():
            peer.beam(sources[0], 0)  # warm-up
        speeds[engine] = count / seconds(decode, shape.device)
        rows.add(
            f"4. {name}: {engine} beam 4, {count} sentences in {len(groups)} batches",
            f"{speeds[engine]:,.1f} sentences/s",
        )
        if engine == "ours":
            ct2(rows, shape, name, model, groups, count)
        peer = model = None
        free_device(shape.device)
    if len(speeds) == 2:
        ratio = speeds["ours"] / speeds["marian"]
        rows.add(
            f"4. {name}: ours over MarianMT's generate, beam 4 sentences/s",
            f"{ratio:.2f}x",
            ">= 1.5x",
            ratio >= 1.5,
        )


def ct2(rows, shape: Shape, name: str, model, groups, count: int) -> None:
    """CTranslate2 on our model, where its wheel runs on this device."""
    what = f"4. {name}: CTranslate2 beam 4, same batches"
    try:
        import ctranslate2

        from transformer_nmt.export.ct2 import CT2Search
    except ImportError as error:
        rows.add(what, f"skipped: {error}")
        return
    if shape.device.type == "cuda" and (why := ct2_cuda.problem()):
        rows.add(
            what, f"skipped: ctranslate2 {ctranslate2.__version__} cannot run on this GPU: {why}"
        )
        return
    try:
        quantization = "bfloat16" if shape.device.type == "cuda" else "float32"
        search = CT2Search(model, word_tokenizer(shape.vocab), shape.device, quantization)
        options = dict(beam_size=BEAM, alpha=ALPHA, penalty="fairseq", max_len_b=0, n_best=1)
        list(search(groups[:1], **options))  # warm-up
        rate = count / seconds(lambda: list(search(groups, **options)), shape.device)
        rows.add(what, f"{rate:,.1f} sentences/s")
    except Exception as error:  # noqa: BLE001 - a row, not the end of the check
        rows.add(what, f"failed: {type(error).__name__}: {str(error)[:200]}")
    finally:
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
