"""How sure the engine was of a page: one small record per page, kept in the manifest as `info.confidence`.

    method       what the figures come from
      recognizer   rapidocr: the line recognizer's scores (a line's score is the mean probability of the
                   characters it read), over the lines kept on the page
      tokens       deepseek-ocr2: the log-probabilities the model gave the tokens it chose
      text-layer   the page was read from its PDF text layer, not recognized: there is nothing to doubt
    score        0..1, higher is surer: what `--review-below` compares (None for text-layer pages, which are
                 never listed for review)

The recognizer's `score` is the character-weighted mean line score with its weakest tenth of lines counted
twice (`recognizer_score`); how it tracks the character error rate on the development corpus is measured by
scripts/confidence_table.py (the table is in the README).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

RECOGNIZER, TOKENS, TEXT_LAYER = "recognizer", "tokens", "text-layer"
LOW_LINE = 0.8  # a kept line the recognizer scored under this counts in `low_lines`
LOW_TOKEN = math.log(0.5)  # a token chosen with less than even odds counts in `low_tokens`
WEAK_SHARE = 0.1  # the weakest tenth of a page's characters weigh twice in its recognizer score


@dataclass(frozen=True)
class Confidence:
    method: str  # RECOGNIZER, TOKENS or TEXT_LAYER
    score: float | None  # 0..1, higher is surer; None: nothing was recognized (text layer)
    # recognizer
    lines: int | None = None  # lines kept on the page
    mean: float | None = None  # their mean score
    low_lines: int | None = None  # of which scored under LOW_LINE
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


def recognizer(scores: Sequence[float], chars: Sequence[int]) -> Confidence:
    """A page's confidence from the score and character count of each line kept on it."""
    if not scores:
        return Confidence(RECOGNIZER, 0.0, lines=0, mean=None, low_lines=0)
    return Confidence(RECOGNIZER, round(recognizer_score(scores, chars), 4), lines=len(scores),
                      mean=round(sum(scores) / len(scores), 4), low_lines=sum(1 for s in scores if s < LOW_LINE))


def recognizer_score(scores: Sequence[float], chars: Sequence[int]) -> float:
    """The character-weighted mean of the line scores, the lines holding the weakest WEAK_SHARE of the page's
    characters counted twice: a few badly read lines on a page of good ones pull the score down more than in
    a plain mean, and a short line (a page number, a stray mark) weighs less than a paragraph's line."""
    weights = [max(1, c) for c in chars]
    total = sum(weights)
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    weak, extra = WEAK_SHARE * total, [0.0] * len(scores)
    for i in order:
        if weak <= 0:
            break
        extra[i] = min(weights[i], weak)
        weak -= extra[i]
    return sum((w + e) * s for w, e, s in zip(weights, extra, scores)) / (total + sum(extra))


def tokens(logprobs: Sequence[float], guard_fired: bool) -> Confidence:
    """A page's confidence from the log-probability of each token the model chose (its end token left out)."""
    if not logprobs:
        return Confidence(TOKENS, 0.0, tokens=0, guard_fired=guard_fired)
    mean = sum(logprobs) / len(logprobs)
    return Confidence(TOKENS, round(math.exp(mean), 4), tokens=len(logprobs), mean_logprob=round(mean, 4),
                      min_logprob=round(min(logprobs), 4), low_tokens=sum(1 for p in logprobs if p < LOW_TOKEN),
                      guard_fired=guard_fired)
