"""A test set's corpus scores as `nmt-evaluate` reports them: sacreBLEU's, with signatures,
and the paper's tokenized BLEU."""

import re
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER
from sacremoses import MosesTokenizer

# A hyphen between two non-spaces: the compound splitting of get_ende_bleu.sh.
COMPOUND = re.compile(r"(\S)-(\S)")


def score(hypotheses: list[str], references: list[str], lang: str = "en") -> dict[str, Any]:
    """Corpus BLEU, chrF, chrF++ and TER with sacreBLEU's defaults, each with its signature.

    Also BLEU-lc, sacreBLEU's `-lc` on the same output: comparable with the lowercased BLEU
    that many papers report. And BLEU-tok, the tokenized BLEU behind the paper's 27.3 (the
    tensor2tensor/fairseq `get_ende_bleu.sh` recipe): both sides Moses-tokenized (sacremoses
    `MosesTokenizer(lang)`, `escape=False`), then every "-" between two non-spaces replaced by
    " ##AT##-##AT## " (compound splitting), then BLEU on those tokens (`tokenize="none"`). It is
    for comparing with the paper, not a replacement for sacreBLEU: its value depends on the
    tokenization, so it is comparable only with numbers computed the same way.

    Args:
        hypotheses: one detokenized output a sentence.
        references: one detokenized reference a sentence, aligned with `hypotheses`.
        lang: the target language, for the Moses tokenizer's rules (e.g. "de").
    """
    tokenized = paper_tokenize(hypotheses, lang), paper_tokenize(references, lang)
    runs = {
        "BLEU": (BLEU(), hypotheses, references),
        "BLEU-lc": (BLEU(lowercase=True), hypotheses, references),
        # Tokenized on purpose: force, or sacreBLEU warns that it looks undetokenized.
        "BLEU-tok": (BLEU(tokenize="none", force=True), *tokenized),
        "chrF2": (CHRF(), hypotheses, references),
        "chrF2++": (CHRF(word_order=2), hypotheses, references),
        "TER": (TER(), hypotheses, references),
    }
    report = {}
    for name, (metric, hyps, refs) in runs.items():
        result = metric.corpus_score(hyps, [refs])
        signature = str(metric.get_signature())
        if name == "BLEU-tok":
            signature += f"|pretok:moses-{lang}+compound-split"
        report[name] = {"score": result.score, "result": str(result), "signature": signature}
    return report


def paper_tokenize(lines: list[str], lang: str) -> list[str]:
    """Moses tokenization and compound splitting, as `get_ende_bleu.sh` does before BLEU."""
    tokenizer = MosesTokenizer(lang=lang)
    out = []
    for line in lines:
        text = tokenizer.tokenize(line, escape=False, return_str=True)
        # One pass, as the script's `perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'`: it leaves
        # "2-3" of "1-2-3" whole, and a second pass would split the "#-#" inside its own markers.
        out.append(COMPOUND.sub(r"\1 ##AT##-##AT## \2", text))
    return out
