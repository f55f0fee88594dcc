"""How sure the engine was of a page: one small record per page, kept in the manifest as `info.confidence`.

    method       what the figures come from
      recognizer   rapidocr: the line recognizer's scores (a line's score is the mean probability of the
                   characters it read), over the lines kept on the page
      tokens       deepseek-ocr2: the log-probabilities the model gave the tokens it chose
      text-layer   the page was read from its PDF text layer, not recognized: there is nothing to doubt
    score        0..1, higher is surer: what `--review-below` compares (None for text-layer pages, which are
                 never listed for review)

The recognizer's `score` is the mean line score over the page's least sure tenth of text, by characters
(`recognizer_score`); how it tracks the character error rate on the development corpus is measured by
scripts/confidence_table.py (the table is in docs/benchmarks.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

RECOGNIZER, TOKENS, TEXT_LAYER = "recognizer", "tokens", "text-layer"
LOW_LINE = 0.8  # a kept line the recognizer scored under this counts in `low_lines`
LOW_TOKEN = math.log(0.5)  # a token chosen with less than even odds counts in `low_tokens`
WEAK_SHARE = 0.1  # a page's recognizer score is the mean over its least sure tenth of characters


@dataclass(frozen=True)
class Confidence:
    method: str  # RECOGNIZER, TOKENS or TEXT_LAYER
    score: float | None  # 0..1, higher is surer; None: nothing was recognized (text layer)
    # recognizer
    lines: int | None = None  # lines kept on the page
    mean: float | None = None  # their mean score
    low_lines: int | None = None  # of which scored under LOW_LINE
    reread: int | None = None  # rapidocr's cascade (--model-size auto, tiny): lines read again by the small recognizer
    # tokens
    tokens: int | None = None  # tokens generated (the end token not counted)
    mean_logprob: float | None = None
    min_logprob: float | None = None
    low_tokens: int | None = None  # chosen with a log-probability under LOW_TOKEN
    guard_fired: bool | None = None  # the repetition guard changed a token the model would have chosen

    def as_dict(self) -> dict[str, Any]:
        """The manifest's `info.confidence`: the fields that apply (None ones left out, `score` always there)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k == "score"}

    @classmethod
    def from_dict(cls, data: Any) -> "Confidence | None":
        if not isinstance(data, dict) or "method" not in data:
            return None
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})

    def below(self, threshold: float) -> bool:
        """Whether a person should look at this page (`--review-below`): recognized, and scored under it."""
        return self.score is not None and self.score < threshold


def text_layer() -> Confidence:
    return Confidence(TEXT_LAYER, None)


def recognizer(scores: Sequence[float], chars: Sequence[int], reread: int | None = None) -> Confidence:
    """A page's confidence from the score and character count of each line kept on it (and, for a cascade, how
    many of the page's lines the second recognizer read again)."""
    if not scores:
        return Confidence(RECOGNIZER, 0.0, lines=0, mean=None, low_lines=0, reread=reread)
    return Confidence(RECOGNIZER, round(recognizer_score(scores, chars), 4), lines=len(scores),
                      mean=round(sum(scores) / len(scores), 4), low_lines=sum(1 for s in scores if s < LOW_LINE),
                      reread=reread)


def recognizer_score(scores: Sequence[float], chars: Sequence[int]) -> float:
    """The mean line score of the page's least sure tenth of text, by characters (WEAK_SHARE): the lines with the
    lowest scores, taken until they hold a tenth of the page's characters (the last one in part), each weighed
    by its characters. A page is as good as its worst-read parts: a plain mean of a page of clean lines hides
    the few that came out wrong, and the tenth by characters keeps a stray mark or a one-word line from
    deciding the page. On the development corpus it ranks pages by their CER better than the plain or
    character-weighted mean, the minimum and the tenth percentile line (scripts/confidence_table.py)."""
    weights = [max(1, c) for c in chars]
    want = WEAK_SHARE * sum(weights)
    taken = total = 0.0
    for i in sorted(range(len(scores)), key=lambda i: scores[i]):
        take = min(weights[i], want - taken)
        if take <= 0:
            break
        total += take * scores[i]
        taken += take
    return total / taken


def tokens(logprobs: Sequence[float], guard_fired: bool) -> Confidence:
    """A page's confidence from the log-probability of each token the model chose (its end token left out)."""
    if not logprobs:
        return Confidence(TOKENS, 0.0, tokens=0, guard_fired=guard_fired)
    mean = sum(logprobs) / len(logprobs)
    return Confidence(TOKENS, round(math.exp(mean), 4), tokens=len(logprobs), mean_logprob=round(mean, 4),
                      min_logprob=round(min(logprobs), 4), low_tokens=sum(1 for p in logprobs if p < LOW_TOKEN),
                      guard_fired=guard_fired)
