"""Sentence chrF, chrF++ and BLEU of every hypothesis against every reference, in one batch.

MBR decoding scores N candidates against N pseudo-references: N x N sentence scores, which
sacreBLEU computes one pair at a time in Python. Here each sentence's n-grams are counted once,
into a dense (sentences, n-grams) count matrix per order, and the clipped matches of every pair
come from a few matrix products in numpy; the scores then follow sacreBLEU's formulas exactly
(`sentence_chrf`, chrF++ with word_order=2, `sentence_bleu` with its exp smoothing and
effective order), as the tests hold on random pairs.
"""

from collections.abc import Callable

import numpy as np
import torch
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

UTILITIES = ("chrf", "chrf++", "bleu")
CHAR_ORDER, BETA, BLEU_ORDER = 6, 2, 4

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
    hypotheses: list[str], references: list[str], ngrams: Callable[[str], list]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One order's (H, R) matches, (H,) and (R,) n-gram totals, and (R,) reference n-grams.

    Each distinct sentence is counted once (MBR's references are its candidates, often
    repeated), into a dense (sentences, n-grams) matrix.
    """
    sentences = list(dict.fromkeys(hypotheses + references))
    row_of = {sentence: row for row, sentence in enumerate(sentences)}
    index: dict = {}
    rows, columns = [], []
    for row, sentence in enumerate(sentences):
        grams = ngrams(sentence)
        columns += [index.setdefault(gram, len(index)) for gram in grams]
        rows += [row] * len(grams)
    G = max(1, len(index))
    flat = np.asarray(rows, dtype=np.int64) * G + np.asarray(columns, dtype=np.int64)
    counts = np.bincount(flat, minlength=len(sentences) * G).reshape(len(sentences), G)
    hyp = np.array([row_of[s] for s in hypotheses], dtype=np.int64)
    ref = np.array([row_of[s] for s in references], dtype=np.int64)
    hyp_rows, hyp_back = np.unique(hyp, return_inverse=True)
    ref_rows, ref_back = np.unique(ref, return_inverse=True)
    H, R = counts[hyp_rows], counts[ref_rows]  # (H', G), (R', G)
    # sum_g min(h_g, r_g) = sum_k sum_g [h_g >= k][r_g >= k]: one matrix product per count level.
    # float32 products, exact below 2^24, on the threads the process gave torch (numpy's BLAS
    # would take every core, whatever --threads says).
    H_t, R_t = torch.from_numpy(H), torch.from_numpy(R)
    matches_t = torch.zeros(len(H), len(R), device=H_t.device)
    for k in range(1, int(counts.max(initial=0)) + 1):
        matches_t += (H_t >= k).float() @ (R_t >= k).float().T
    matches = matches_t.round().long().numpy()
    totals = counts.sum(axis=1)
    return matches[hyp_back][:, ref_back], totals[hyp], totals[ref], totals[ref] > 0


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


def _char_ngrams(n: int) -> Callable[[str], list[str]]:
    def grams(sentence: str) -> list[str]:
        line = "".join(sentence.split())
        return [line[i : i + n] for i in range(len(line) - n + 1)]

    return grams


def _word_ngrams(n: int) -> Callable[[str], list[str]]:
    def grams(sentence: str) -> list[str]:
        words = _chrf_words(sentence)
        return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]

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


def _token_ngrams(n: int) -> Callable[[str], list[tuple[str, ...]]]:
    def grams(sentence: str) -> list[tuple[str, ...]]:
        tokens = sentence.split()
        return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]

    return grams
