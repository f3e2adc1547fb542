"""Sentence chrF, chrF++ and BLEU of every hypothesis against every reference, in one batch.

MBR decoding scores N candidates against N pseudo-references: N x N sentence scores, which
sacreBLEU computes one pair at a time in Python. Here each sentence's n-grams are counted once,
into a dense (sentences, n-grams) count matrix per order, and the matches of every pair are the
sum of element-wise minima, in numpy; the scores then follow sacreBLEU's formulas exactly
(`sentence_chrf`, chrF++ with word_order=2, `sentence_bleu` with its exp smoothing and
effective order), as the tests hold on random pairs.
"""

from collections import Counter
from collections.abc import Callable

import numpy as np
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

UTILITIES = ("chrf", "chrf++", "bleu")
CHAR_ORDER, BETA, BLEU_ORDER = 6, 2, 4
# Element-wise minima computed at once: rows of hypotheses x references x n-grams, at most.
BLOCK = 1 << 22

_PUNCTUATION = frozenset(CHRF._PUNCTS)
_tokenize_13a = Tokenizer13a()


def utility_matrix(hypotheses: list[str], references: list[str], utility: str) -> np.ndarray:
    """(H, R) sentence score of hypothesis i against reference j, 0 to 100, as sacreBLEU's."""
    if utility not in UTILITIES:
        raise ValueError(f"utility must be one of {UTILITIES}, got {utility!r}")
    if utility == "bleu":
        return _bleu(hypotheses, references)
    return _chrf(hypotheses, references, word_order=2 if utility == "chrf++" else 0)


def _counts(
    hypotheses: list[str], references: list[str], ngrams: Callable[[str], Counter]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One order's (H, R) matches, (H,) and (R,) n-gram totals, and (R,) reference n-grams."""
    hyp, ref = [ngrams(s) for s in hypotheses], [ngrams(s) for s in references]
    index: dict = {}
    for counter in hyp + ref:
        for gram in counter:
            index.setdefault(gram, len(index))
    H, R = _dense(hyp, index), _dense(ref, index)  # (H, G), (R, G)
    matches = np.zeros((len(hyp), len(ref)), dtype=np.int64)
    rows = max(1, BLOCK // max(1, R.size))
    for start in range(0, len(hyp), rows):  # (rows, R, G) minima at a time
        block = H[start : start + rows, None, :]
        matches[start : start + rows] = np.minimum(block, R[None]).sum(axis=-1)
    return matches, H.sum(axis=1), R.sum(axis=1), (R > 0).any(axis=1)


def _dense(counters: list[Counter], index: dict) -> np.ndarray:
    """(len(counters), len(index)) counts."""
    out = np.zeros((len(counters), max(1, len(index))), dtype=np.int32)
    for row, counter in enumerate(counters):
        for gram, count in counter.items():
            out[row, index[gram]] = count
    return out


def _chrf(hypotheses: list[str], references: list[str], word_order: int) -> np.ndarray:
    """sacreBLEU's sentence chrF (beta 2, character 6-grams without white space), with
    word_order word n-grams too (chrF++: 2), its effective-order averaging included."""
    orders = [_char_ngrams(n) for n in range(1, CHAR_ORDER + 1)]
    orders += [_word_ngrams(n) for n in range(1, word_order + 1)]
    shape = (len(hypotheses), len(references))
    precision, recall, effective = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for ngrams in orders:
        matches, n_hyp, n_ref, ref_has = _counts(hypotheses, references, ngrams)
        n_hyp = np.where(ref_has[None, :], n_hyp[:, None], 0)  # sacreBLEU: no hits, no count
        n_ref = np.broadcast_to(n_ref[None, :], shape)
        both = (n_hyp > 0) & (n_ref > 0)
        precision += np.where(both, matches / np.maximum(n_hyp, 1), 0.0)
        recall += np.where(both, matches / np.maximum(n_ref, 1), 0.0)
        effective += both
    precision /= np.maximum(effective, 1)
    recall /= np.maximum(effective, 1)
    factor = BETA**2
    denominator = factor * precision + recall
    score = (1 + factor) * precision * recall / np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, 100 * score, 0.0)


def _char_ngrams(n: int) -> Callable[[str], Counter]:
    def grams(sentence: str) -> Counter:
        line = "".join(sentence.split())
        return Counter(line[i : i + n] for i in range(len(line) - n + 1))

    return grams


def _word_ngrams(n: int) -> Callable[[str], Counter]:
    def grams(sentence: str) -> Counter:
        words = _chrf_words(sentence)
        return Counter(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))

    return grams


def _chrf_words(sentence: str) -> list[str]:
    """chrF++'s words: punctuation split off a word's end, else off its start (sacreBLEU's)."""
    words = []
    for word in sentence.split():
        if len(word) > 1 and word[-1] in _PUNCTUATION:
            words += [word[:-1], word[-1]]
        elif len(word) > 1 and word[0] in _PUNCTUATION:
            words += [word[0], word[1:]]
        else:
            words.append(word)
    return words


def _bleu(hypotheses: list[str], references: list[str]) -> np.ndarray:
    """sacreBLEU's `sentence_bleu`: 13a tokens, exp smoothing, effective order."""
    hyp = [_tokenize_13a(s.rstrip()) for s in hypotheses]
    ref = [_tokenize_13a(s.rstrip()) for s in references]
    shape = (len(hyp), len(ref))
    sys_len = np.array([len(s.split()) for s in hyp], dtype=np.float64)[:, None]
    ref_len = np.array([len(s.split()) for s in ref], dtype=np.float64)[None, :]
    log_sum, order, smooth = np.zeros(shape), np.zeros(shape), np.ones(shape)
    any_correct = np.zeros(shape, dtype=bool)
    for n in range(1, BLEU_ORDER + 1):
        correct, total, _, _ = _counts(hyp, ref, _token_ngrams(n))
        total = np.broadcast_to(total[:, None], shape).astype(np.float64)
        counted = total > 0  # orders past the hypothesis' length are left out (effective order)
        zero = counted & (correct == 0)
        smooth = np.where(zero, smooth * 2, smooth)
        precision = np.where(zero, 100.0 / (smooth * np.maximum(total, 1)), 0.0)
        precision = np.where(correct > 0, 100.0 * correct / np.maximum(total, 1), precision)
        log_sum += np.where(counted, np.log(np.where(counted, precision, 1.0)), 0.0)
        order += counted
        any_correct |= correct > 0
    shorter = sys_len < ref_len
    brevity = np.where(shorter, np.exp(1 - ref_len / np.maximum(sys_len, 1)), 1.0)
    brevity = np.where(shorter & (sys_len == 0), 0.0, brevity)
    score = brevity * np.exp(log_sum / np.maximum(order, 1))
    return np.where(any_correct, score, 0.0)


def _token_ngrams(n: int) -> Callable[[str], Counter]:
    def grams(sentence: str) -> Counter:
        tokens = sentence.split()
        return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))

    return grams
