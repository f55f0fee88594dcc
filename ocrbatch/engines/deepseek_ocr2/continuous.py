"""Continuous (iteration-level) decoding for DeepSeek-OCR-2: rows leave the batch the step they end and
waiting pages join it between steps.

    decoder = ContinuousDecoder(engine)
    decoder.add(pages)                    pages prepared into pool slots (inputs.Preprocessor)
    done = decoder.step(rows=cap)         admit waiting pages into free rows, then one token for every row
    for page, generated, info in done:    pages whose rows ended at this step (retries included)

A step is a forward pass of the language model over one token per row, with the KV cache (a transformers
`DynamicCache`, tensors of batch × heads × length × dim per layer), the attention mask and explicit per-row
position ids. Admitting pages prefills them together (left-padded among themselves, the tiles staged to the
device just before and released just after), then merges their cache into the running one: both are
left-padded with zeros to the longer length and concatenated on the batch axis, the mask 0 over the
padding. A row that ends is dropped from every cache tensor at once, and leading columns no row attends to
any more are cut off. Greedy decoding then gives each page the tokens it gets alone (a test checks this
against `generate`, token for token).

The n-gram guard is applied per row over that row's own generated tokens (the same rule as ngram_guard.py,
vectorised over rows of different lengths). A page that runs into the token limit without its end token
(a loop the guard missed) joins the waiting pages again, with the stronger retry guard, instead of running
alone; its second result is final.

Figures for `ocrbatch bench`: `steps` (forward passes), `slot_steps` (rows × steps at the cap: what the
device could have decoded) and `useful` (tokens the pages kept, end tokens included).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ...gpu.throughput import SlotFigures
from ...records import PageImage
from .inputs import batch_inputs, unstage

NO_TOKEN = -1  # history filler: equals no token id


@dataclass(eq=False)
class _Row:
    page: PageImage
    guard: tuple[int, int]
    retry: bool = False
    first: Any = None  # the first attempt's _Generated, kept while the page is retried
    tokens: list[int] = field(default_factory=list)
    position: int = 0  # position id of the next token fed
    joined_step: int = 0


class ContinuousDecoder:
    def __init__(self, engine: Any) -> None:
        from .engine import GUARD, RETRY_GUARD

        self.engine = engine
        self.model = engine.model
        self.device = torch.device(engine.device)
        self.guard, self.retry_guard = GUARD, RETRY_GUARD
        self.max_new = engine.options.max_new_tokens
        self.min_new = engine.options.min_new_tokens
        self.fixed_length = engine.options.min_new_tokens >= engine.options.max_new_tokens
        self.retries = not self.fixed_length and not engine.options.page_lengths
        self.end_ids = list(engine._end_ids)
        self.width = max(GUARD[1], RETRY_GUARD[1])  # history kept per row
        # Most pages prefilled at once: what the device buffers were sized for (more join at the next step).
        self.group = engine.options.batch_pages or 1 << 30
        self.figures = SlotFigures()
        self.waiting: collections.deque[_Row] = collections.deque()
        self._reset()

    # -- what the scheduler sees -------------------------------------------------------------------
    def add(self, pages: Sequence[PageImage]) -> None:
        """Pages (prepared) wait to join at the next step."""
        self.waiting.extend(_Row(p, self.guard) for p in pages)

    @property
    def active(self) -> int:
        return len(self.rows)

    def idle(self) -> bool:
        return not self.rows and not self.waiting

    def pages(self) -> list[PageImage]:
        """Every page the decoder holds, running or waiting."""
        return [r.page for r in self.rows] + [r.page for r in self.waiting]

    def abandon(self) -> list[PageImage]:
        """Drop every row and waiting page (after an error): their pages, unstaged, for another path."""
        pages = self.pages()
        unstage([p.prepared for p in pages if p.prepared is not None])
        self.waiting.clear()
        self._reset()
        return pages

    def step(self, rows: int) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        """Admit waiting pages while fewer than `rows` run, then decode one token for every row. Returns the
        pages that ended: (page, _Generated, info)."""
        done: list[tuple[PageImage, Any, dict[str, Any]]] = []
        free = min(max(0, rows - len(self.rows)), self.group)
        if free and self.waiting:
            group = [self.waiting.popleft() for _ in range(min(free, len(self.waiting)))]
            done += self._admit(group)
        if self.rows:
            t0 = time.perf_counter()
            self.figures.steps += 1
            self.figures.slot_steps += max(rows, len(self.rows))
            self.figures.row_steps += len(self.rows)
            done += self._decode()
            self.figures.step_s += time.perf_counter() - t0
        return done

    # -- the model ------------------------------------------------------------------------------------
    def _reset(self) -> None:
        self.rows: list[_Row] = []
        self.cache: Any = None
        self.mask: torch.Tensor | None = None  # (rows, length) 1 where a row attends
        self.last: torch.Tensor | None = None  # (rows,) the token each row feeds next
        self.hist: torch.Tensor | None = None  # (rows, width) generated tokens, right-aligned, NO_TOKEN before
        self.hlen: torch.Tensor | None = None  # (rows,) generated tokens so far

    @torch.no_grad()
    def _admit(self, group: list[_Row]) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        """Prefill `group` together, choose each row's first token, merge the rest into the running batch."""
        t0 = time.perf_counter()
        engine = self.engine
        pages = [r.page for r in group]
        prepared = [p.prepared for p in pages]
        unstage(prepared)  # pages staged apart (the worker's first batch): one copy per group, one buffer set
        engine.stage(pages)
        try:
            inputs = batch_inputs(prepared, engine._prompt_pad_id, engine.device, self.model.dtype)
            mask = inputs["attention_mask"]
            positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
            out = self.model(**inputs, position_ids=positions, use_cache=True, logits_to_keep=1)
        finally:
            unstage(prepared)  # the model has read the tiles: the buffers may take the next group
        self.figures.prefills += 1
        for row, length in zip(group, mask.sum(-1).tolist()):
            row.position = int(length)
            row.joined_step = self.figures.steps
        n = len(group)
        hist = torch.full((n, self.width), NO_TOKEN, dtype=torch.long, device=self.device)
        hlen = torch.zeros(n, dtype=torch.long, device=self.device)
        chosen = self._choose(group, hist, hlen, out.logits[:, -1, :])
        self._merge(group, out.cache, mask, chosen, hist, hlen)
        self.figures.prefill_s += time.perf_counter() - t0
        return self._finish()

    def _merge(self, group: list[_Row], cache: Any, mask: torch.Tensor, last: torch.Tensor, hist: torch.Tensor,
               hlen: torch.Tensor) -> None:
        if not self.rows:
            self.rows, self.cache, self.mask, self.last, self.hist, self.hlen = \
                list(group), cache, mask, last, hist, hlen
            return
        have, new = self.mask.shape[1], mask.shape[1]
        length = max(have, new)
        for old_layer, new_layer in zip(self.cache.layers, cache.layers):
            old_layer.keys = torch.cat([_pad_left(old_layer.keys, length, 2), _pad_left(new_layer.keys, length, 2)])
            old_layer.values = torch.cat([_pad_left(old_layer.values, length, 2),
                                          _pad_left(new_layer.values, length, 2)])
        self.mask = torch.cat([_pad_left(self.mask, length, 1), _pad_left(mask, length, 1)])
        self.last = torch.cat([self.last, last])
        self.hist = torch.cat([self.hist, hist])
        self.hlen = torch.cat([self.hlen, hlen])
        self.rows += group

    @torch.no_grad()
    def _decode(self) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        rows = self.rows
        self.mask = torch.cat([self.mask, self.mask.new_ones((len(rows), 1))], dim=1)
        positions = torch.tensor([[r.position] for r in rows], dtype=torch.long, device=self.device)
        out = self.model(input_ids=self.last[:, None], attention_mask=self.mask, position_ids=positions,
                         cache=self.cache, use_cache=True, logits_to_keep=1)
        self.cache = out.cache
        for r in rows:
            r.position += 1
        self.last = self._choose(rows, self.hist, self.hlen, out.logits[:, -1, :])
        return self._finish()

    def _choose(self, rows: list[_Row], hist: torch.Tensor, hlen: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Each row's next token (greedy, the guard and the engine's row hook applied); history updated."""
        scores = scores.float() if scores.dtype != torch.float32 else scores
        scores = scores.clone()
        for guard in {r.guard for r in rows}:
            which = torch.tensor([r.guard == guard for r in rows], device=self.device)
            ban = banned_per_row(hist[:, -guard[1]:], hlen, guard[0], scores.shape[-1], self.engine._exempt)
            scores.masked_fill_(ban & which[:, None], float("-inf"))
        if self.min_new:
            short = torch.tensor([len(r.tokens) < self.min_new for r in rows], device=self.device)
            for end in self.end_ids:
                scores[:, end].masked_fill_(short, float("-inf"))
        hook = self.engine.row_hook
        if hook is not None:
            scores = hook([r.page for r in rows], [len(r.tokens) for r in rows], scores)
        chosen = scores.argmax(-1)
        hist[:, :-1] = hist[:, 1:].clone()
        hist[:, -1] = chosen
        hlen += 1
        for r, t in zip(rows, chosen.tolist()):
            r.tokens.append(t)
        self.figures.useful += len(rows)
        return chosen

    def _finish(self) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        """Rows that ended leave the batch; loops go back to wait for a retry."""
        from .engine import _Generated

        ends = set(self.end_ids)
        keep: list[int] = []
        done: list[tuple[PageImage, Any, dict[str, Any]]] = []
        for i, r in enumerate(self.rows):
            ended = r.tokens[-1] in ends
            if not ended and len(r.tokens) < self.max_new:
                keep.append(i)
                continue
            gen = _Generated(r.tokens[:-1] if ended else list(r.tokens), ended)
            if not ended and self.retries and not r.retry:  # a loop the guard missed: once more, harder
                self.waiting.append(_Row(r.page, self.retry_guard, retry=True, first=gen))
                continue
            info: dict[str, Any] = {"joined_step": r.joined_step}
            if r.retry:
                info["retried"] = True
            done.append((r.page, gen, info))
        if len(keep) < len(self.rows):
            self._keep(keep)
        return done

    def _keep(self, keep: list[int]) -> None:
        if not keep:
            self._reset()
            return
        idx = torch.tensor(keep, dtype=torch.long, device=self.device)
        mask = self.mask.index_select(0, idx)
        used = mask.any(0).nonzero()
        cut = int(used[0]) if used.numel() else 0  # leading columns no remaining row attends to
        for layer in self.cache.layers:
            layer.keys = layer.keys.index_select(0, idx)[:, :, cut:]
            layer.values = layer.values.index_select(0, idx)[:, :, cut:]
        self.mask = mask[:, cut:]
        self.last = self.last.index_select(0, idx)
        self.hist = self.hist.index_select(0, idx)
        self.hlen = self.hlen.index_select(0, idx)
        self.rows = [self.rows[i] for i in keep]


def _pad_left(t: torch.Tensor, length: int, dim: int) -> torch.Tensor:
    missing = length - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def banned_per_row(hist: torch.Tensor, hlen: torch.Tensor, n: int, vocab_size: int,
                   exempt: Sequence[int] = ()) -> torch.Tensor:
    """ngram_guard.NgramGuard's rule for rows of different lengths: `hist` (rows, window) holds each row's last
    generated tokens right-aligned, `hlen` how many it has. A (rows, vocab) bool mask of the banned tokens."""
    rows, window = hist.shape
    ban = torch.zeros((rows, vocab_size + 1), dtype=torch.bool, device=hist.device)
    if window < n:
        return ban[:, :vocab_size]
    grams = hist.unfold(1, n, 1)  # (rows, window - n + 1, n)
    prefix = hist[:, window - n + 1:]
    hit = (grams[:, :, :-1] == prefix[:, None, :]).all(dim=-1)
    start = torch.arange(grams.shape[1], device=hist.device)
    hit &= start[None, :] >= (window - hlen.clamp(max=window))[:, None]  # grams wholly inside the row's history
    follow = torch.where(hit, grams[:, :, -1], torch.full_like(grams[:, :, -1], vocab_size))
    ban.scatter_(1, follow.clamp(min=0, max=vocab_size), True)
    ban = ban[:, :vocab_size]
    if exempt:
        ban[:, [t for t in exempt if t < vocab_size]] = False
    return ban
