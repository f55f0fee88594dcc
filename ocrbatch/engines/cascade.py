"""The cascade's choice of lines to read again: how sure the fast recognizer was of a line.

The tiny recognizer reads every line; the small one reads again those the tiny one is unsure of
(`--reread-below`). A line's mean character probability (its score) hides one doubtful character among
fifty sure ones; its weakest characters show it. The signal is the UNSURE_QUANTILE quantile of the
probabilities of the characters the model emitted (the lowest ones), measured on every line the small
detector finds on the dev corpus and the stress set (scripts/reread_table.py, notes of issue 26): for the
same accuracy it sends fewer lines (by width, which is what the small recognizer's time goes with) to the
second reading than the mean did.

Reading again only the unsure words of a line, not the whole line, was measured too and dropped: the tiny
model's worst mistakes on the dev corpus (a word split in two, a character misread with confidence) are
not at its low-probability characters, and BoW-F1 fell to 0.931-0.933 (goal 0.94).

No model, no numpy: the engine (rapid.py) reads, schedules and decides with these.
"""

from __future__ import annotations

from dataclasses import dataclass

# Which quantile of a line's character probabilities is its sureness (0: the least sure character; 0.5: the
# median). Measured: see the module's docstring.
UNSURE_QUANTILE = 0.15


@dataclass(frozen=True)
class Reading:
    """A line as a recognizer read it (ppocr.Recognizer.read): the text, its score (the mean probability of
    the characters the model emitted), and the probability of each character it emitted, in order."""

    text: str
    score: float
    probs: tuple[float, ...] = ()
    frames: int = 0  # the CTC frames the line spans (one per ppocr.REC_STRIDE input columns); 0: not known
    gap: float = 0.0  # the longest run of frames where the blank wins, in line heights (rapid.other_script)


def sureness(reading: Reading, quantile: float = UNSURE_QUANTILE) -> float:
    """How sure the recognizer was of the line: the `quantile` quantile (linear between the two nearest
    ranks) of its characters' probabilities; 0 for a line with none."""
    probs = sorted(reading.probs)
    if not probs:
        return 0.0
    at = quantile * (len(probs) - 1)
    lo = int(at)
    hi = min(lo + 1, len(probs) - 1)
    return probs[lo] + (probs[hi] - probs[lo]) * (at - lo)
