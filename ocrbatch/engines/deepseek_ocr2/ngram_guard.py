"""A windowed no-repeat-n-gram guard for batched greedy decoding.

Before each new token, every row of the batch looks at its own last `window` generated tokens. If the
row's last `n - 1` tokens already occurred there followed by some token t, then t is banned now, so the
row cannot repeat an n-gram inside the window. Unlike transformers' `no_repeat_ngram_size`, the history
is a sliding window, so long documents may still repeat a phrase that appeared pages of text ago.
Tokens listed in `exempt` (table cells such as `<td>`/`</td>`) are never banned.

Only generated tokens count: the prompt (image placeholders, padding) is not part of the history, so a
row gets the same bans whether it runs alone or left-padded in a batch.

Imported by the DeepSeek-OCR-2 engine's `load()` only: it needs torch.
"""

from __future__ import annotations

from typing import Iterable

import torch


class NgramGuard:
    """A logits processor (callable on `(input_ids, scores)`) for `model.generate(logits_processor=[...])`."""

    def __init__(self, n: int, window: int, prompt_len: int, exempt: Iterable[int] = ()) -> None:
        if n < 2:
            raise ValueError("n must be at least 2")
        if window < n:
            raise ValueError("window must be at least n")
        self.n = n
        self.window = window
        self.prompt_len = prompt_len
        self.exempt = sorted(set(exempt))
        self._exempt_t: torch.Tensor | None = None

    def banned(self, input_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """A (batch, vocab) bool mask of the tokens each row may not emit next."""
        batch, cur = input_ids.shape
        ban = torch.zeros((batch, vocab_size + 1), dtype=torch.bool, device=input_ids.device)
        length = min(self.window, cur - self.prompt_len)
        if length < self.n:
            return ban[:, :vocab_size]
        hist = input_ids[:, cur - length:]
        grams = hist.unfold(1, self.n, 1)  # (batch, length - n + 1, n): every n-gram inside the window
        prefix = hist[:, length - self.n + 1:]  # (batch, n - 1): what the next token would extend
        hit = (grams[:, :, :-1] == prefix[:, None, :]).all(dim=-1)
        # Tokens that followed a matching prefix; misses go to a spare column that is then dropped.
        follow = torch.where(hit, grams[:, :, -1], torch.full_like(grams[:, :, -1], vocab_size))
        follow = follow.clamp(max=vocab_size)
        ban.scatter_(1, follow, True)
        ban = ban[:, :vocab_size]
        if self.exempt:
            if self._exempt_t is None or self._exempt_t.device != ban.device:
                self._exempt_t = torch.tensor([t for t in self.exempt if t < vocab_size], dtype=torch.long,
                                              device=ban.device)
            ban[:, self._exempt_t] = False
        return ban

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        ban = self.banned(input_ids, scores.shape[-1])
        return scores.masked_fill(ban, float("-inf"))
