"""An NLLB folder's tokenizer (transformers' NllbTokenizer), read and written; the network is
M2M-100's (`m2m100.py`).

NLLB folders (facebook/nllb-200-*) have model_type "m2m_100" and no vocab.json: their tokenizer is
`tokenizer.json`, or only `sentencepiece.bpe.model`, which transformers converts. Both are read
through transformers' own NllbTokenizer, so the ids are the ones it gives, and kept as its
`tokenizers` backend (`data/nllb_tokenizer.py`). Its framing is non-legacy NLLB's, which
`tag_side="both"` is: the source `deu_Latn tokens </s>`, the decoder `</s> fra_Latn tokens`.
"""

import json
from pathlib import Path

from transformers import M2M100Config

from transformer_nmt.data.nllb_tokenizer import NllbTokenizer
from transformer_nmt.runtime.atomic import write_atomically

# Either is NllbTokenizer's (transformers converts the SentencePiece model when alone).
TOKENIZER_FILES = ("tokenizer.json", "sentencepiece.bpe.model")
CLASSES = ("NllbTokenizer", "NllbTokenizerFast")


def is_nllb(folder: Path) -> bool:
    """Whether an M2M-100-typed folder's tokenizer is NLLB's: no vocab.json, and NLLB's files or
    its class in tokenizer_config.json."""
    if (folder / "vocab.json").is_file():
        return False
    if (folder / "tokenizer.json").is_file():
        return True
    config = folder / "tokenizer_config.json"
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class") in CLASSES
    except (OSError, ValueError, AttributeError):  # none, unreadable: M2M-100's files are named
        return False


def missing_files(folder: Path) -> list[str]:
    """What the folder lacks of NLLB's tokenizer, as one entry."""
    if any((folder / name).is_file() for name in TOKENIZER_FILES):
        return []
    return [f"{' or '.join(TOKENIZER_FILES)} (NLLB's tokenizer)"]


def read_tokenizer(folder: Path, config: M2M100Config) -> NllbTokenizer:
    """The folder's tokenizer as transformers' NllbTokenizer reads it, checked against config."""
    from transformers import NllbTokenizer as Theirs

    try:
        theirs = Theirs.from_pretrained(folder)
    # transformers and tokenizers raise many kinds on a broken file (tokenizers a bare Exception).
    except Exception as e:
        raise ValueError(f"{folder}: transformers' NllbTokenizer cannot read it: {e}") from e
    backend = json.loads(theirs.backend_tokenizer.to_str())
    # The source's framing is ours (`Languages.frame`); the rest is what encoding reads.
    backend |= {"post_processor": None, "padding": None, "truncation": None}
    for key, token in (("pad_token_id", "<pad>"), ("eos_token_id", "</s>")):
        if theirs.convert_tokens_to_ids(token) != getattr(config, key):
            raise ValueError(
                f"{folder / 'config.json'}: {key}={getattr(config, key)} but its tokenizer gives "
                f"{token} the id {theirs.convert_tokens_to_ids(token)}"
            )
    languages = [str(token) for token in theirs.extra_special_tokens]
    try:
        return NllbTokenizer(json.dumps(backend, ensure_ascii=False), languages, config.vocab_size)
    except ValueError as e:
        raise ValueError(f"{folder}: its tokenizer is unusable: {e}") from e


def write_tokenizer(tokenizer: NllbTokenizer, out: Path) -> None:
    """Write what `transformers.NllbTokenizer` reads: tokenizer.json and its config."""
    from transformers import NllbTokenizer as Theirs

    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "tokenizer.json", tokenizer.tokenizer_json)
    config = {"tokenizer_class": "NllbTokenizer", "extra_special_tokens": tokenizer.languages}
    write_atomically(out / "tokenizer_config.json", json.dumps(config, ensure_ascii=False))
    # Saved again by transformers: the config then holds every setting it writes itself.
    Theirs.from_pretrained(out, src_lang=tokenizer.languages[0]).save_pretrained(out)


def usage() -> str:
    """The model card's section on loading the folder."""
    return """## Usage

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder", src_lang="deu_Latn")
model = AutoModelForSeq2SeqLM.from_pretrained("path/to/this/folder")
batch = tokenizer(["Ein Satz zum Übersetzen."], return_tensors="pt", padding=True)
output = model.generate(
    **batch,
    forced_bos_token_id=tokenizer.convert_tokens_to_ids("fra_Latn"),
    num_beams=4,
    max_new_tokens=128,
)
print(tokenizer.batch_decode(output, skip_special_tokens=True))
```

The tokenizer frames a source as `deu_Latn tokens </s>`; the decoder starts with `</s>` and the
target language's token, which `forced_bos_token_id` names, as in training. `nmt-translate
--src-lang deu_Latn --tgt-lang fra_Latn` translates the same. `generate`'s `length_penalty`
divides by |Y|^alpha, what `nmt-translate --penalty fairseq` does.
"""
