"""Page refs → prepared page images: how one page is read (`read`), and the pool of threads the decode intake
(executor.py's `Intake`, every way in) reads pages on (`DecodePool`).

PDF pages are rendered lazily, one page at a time, under the PDFium lock; images are decoded with
Pillow outside it; then the engine's front prepares each page (`read`: the one prepare-or-fail path, given the
service's one `DecodeSettings` record: the intake calls it so for a run, a Converter and each Ray actor).
Output goes to bounded lanes, so memory does not grow with the size of a PDF.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import confidence, pdfium
from ..config import RunConfig, ServiceConfig
from ..engines.base import Front
from ..errors import DecodeError, EngineLoadError, OcrbatchError, error_line
from ..images import DEFAULT_MAX_PIXELS, MULTIFRAME, check_size, open_image, to_rgb, too_small
from ..records import Kind, PageImage, PageRef, PageResult, Status

log = logging.getLogger("ocrbatch")


class PdfCache:
    """A few open PDF documents, most recently used kept; pages of a document arrive together."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._open: collections.OrderedDict[Path, pdfium.PdfHandle] = collections.OrderedDict()
        self._closed = False

    def _handle(self, path: Path) -> pdfium.PdfHandle:
        # Called under the lock: no other thread can close the handle meanwhile.
        if self._closed:  # a page read after its owner let go (a converter closing): no document reopened,
            raise DecodeError("cannot read: the converter was closed")  # none left open at the process's exit
        handle = self._open.get(path)
        if handle is None:
            handle = pdfium.PdfHandle(path)
            self._open[path] = handle
            while len(self._open) > self.size:
                _, old = self._open.popitem(last=False)
                old.close()
        else:
            self._open.move_to_end(path)
        return handle

    def render(self, path: Path, index: int, dpi: int):
        with pdfium.LOCK:
            return self._handle(path).render(index, dpi)

    def text(self, path: Path, index: int) -> pdfium.PageText:
        with pdfium.LOCK:
            return self._handle(path).text_chars(index)

    def close(self) -> None:
        with pdfium.LOCK:
            self._closed = True
            for handle in self._open.values():
                handle.close()
            self._open.clear()


FRAME_DOCS = 4  # multi-frame images kept open between pages (the most recently read)
FRAME_HANDLES = 8  # open handles kept per image: one per decode thread reading it


class FramePool:
    """Multi-frame images (TIFF, GIF, WebP) kept open between their pages, so that page k is read on from the
    frame a handle was left at, not from frame 0 of a file opened again: a document of n frames costs n frame
    steps, not n²/2 (Pillow finds a frame by walking the frames before it). A handle is taken by one thread at
    a time (the one nearest below the frame wanted; else a new one), and given back after its frame is copied
    out. Documents are told apart by path and stat (a file replaced is a new document); one gone from disk, or
    the least recent past FRAME_DOCS, has its handles closed."""

    def __init__(self, docs: int = FRAME_DOCS, handles: int = FRAME_HANDLES) -> None:
        self.docs, self.handles = docs, handles
        self._idle: collections.OrderedDict[tuple, list] = collections.OrderedDict()
        self._lock = threading.Lock()

    def read(self, path: Path, index: int, max_pixels: int):
        """Frame `index` (0-based) of the image at `path`, loaded and copied out (over `max_pixels`: DecodeError
        before its pixels are decoded)."""
        from PIL import ImageOps

        key = _identity(path)
        im = self._take(key, index) or open_image(path)
        try:
            im.seek(index)
            check_size(im.width, im.height, max_pixels)
            im.load()
            image = ImageOps.exif_transpose(im) if index == 0 else im.copy()
        except BaseException:
            im.close()
            raise
        self._give(key, im)
        return image

    def _take(self, key: tuple, index: int):
        with self._lock:
            if key not in self._idle:
                self._idle[key] = []
                self._prune(key)
            self._idle.move_to_end(key)
            idle = self._idle[key]
            below = [i for i, h in enumerate(idle) if h.tell() <= index]
            if not below:
                return None
            # by position, never `idle.remove(h)`: images compare equal by their pixels, not by identity
            return idle.pop(max(below, key=lambda i: idle[i].tell()))

    def _give(self, key: tuple, im) -> None:
        with self._lock:
            idle = self._idle.get(key)
            if idle is not None and len(idle) < self.handles:
                idle.append(im)
                return
        im.close()

    def _prune(self, new: tuple) -> None:
        """Under the lock: close the handles of documents gone or changed, and of the least recent past `docs`."""
        for key in list(self._idle):
            if key != new and (len(self._idle) > self.docs or _identity(Path(key[0]), quiet=True) != key):
                for im in self._idle.pop(key):
                    im.close()

    def close(self) -> None:
        with self._lock:
            for handles in self._idle.values():
                for im in handles:
                    im.close()
            self._idle.clear()


def _identity(path: Path, quiet: bool = False) -> tuple:
    try:
        st = os.stat(path)
    except OSError:
        if quiet:
            return ()
        raise
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


FRAMES = FramePool()  # every way in reads multi-frame images through it


def text_layer_page(ref: PageRef, dpi: int, pdfs: PdfCache, mode: str,
                    keep_furniture: bool = False, debug_layout: "str | Path | None" = None) -> PageResult | None:
    """The page's Markdown from its PDF text layer (`--text-layer auto|only`), as a finished result;
    None when the page should be read by the engine instead. With `only`, a page without a usable
    layer is a failed result rather than None. Furniture is left out unless `keep_furniture`."""
    from .. import textlayer

    if mode == "off":
        return None
    t0 = time.perf_counter()
    reason = "not a PDF, so no text layer"
    if ref.source.kind is Kind.PDF:
        try:
            text = pdfs.text(ref.source.path, ref.page - 1)
            page = textlayer.page_markdown(text, dpi, keep_furniture, debug_layout, ref)
            if page is not None:
                sure = confidence.text_layer()
                info = {"path": "text-layer", "lines": page.lines, "confidence": sure.as_dict()}
                if page.turn:
                    info["rotated"] = page.turn
                return PageResult(ref=ref, status=Status.OK, markdown=page.markdown,
                                  timings={"decode_s": time.perf_counter() - t0}, info=info, lines=page.geometry,
                                  confidence=sure, record=page.record)
            reason = textlayer.unusable(text) or "the text layer has no lines"
        except DecodeError as exc:
            reason = str(exc)
        except Exception as exc:  # noqa: BLE001 - a layer we cannot lay out is read by the engine instead
            log.warning("%s: cannot lay out the text layer (%s); reading the page image instead",
                        ref.label, error_line(exc))
            log.debug("text layer of %s", ref.label, exc_info=True)
            reason = f"cannot lay out the text layer: {error_line(exc)}"
    if mode == "only":
        return PageResult(ref=ref, status=Status.FAILED, error=f"{reason} (--text-layer only)")
    return None


@dataclass(frozen=True)
class DecodeSettings:
    """How every way in reads and prepares a page (`read`): a run's decode threads, a Converter's, a Ray actor's
    (sent to it as it is). Built once from the run's options (`of`)."""

    dpi: int  # --dpi: PDF pages rendered at it (capped for a poster-sized page: pdfium.py)
    text_layer: str = "auto"  # --text-layer: auto, off, only
    max_pixels: int = DEFAULT_MAX_PIXELS  # --max-pixels: a larger image frame fails as a page
    keep_furniture: bool = False  # --keep-furniture: text-layer pages keep running heads, feet, page numbers
    debug_layout: Path | None = None  # --debug-layout: a picture of each text-layer page's layout goes there

    @classmethod
    def of(cls, config: RunConfig | ServiceConfig) -> "DecodeSettings":
        options = config.engine_options
        return cls(config.dpi, config.text_layer, config.max_pixels, options.keep_furniture, options.debug_layout)


def read_page(ref: PageRef, settings: DecodeSettings, pdfs: PdfCache) -> PageImage | PageResult:
    """The page as an image for the engine, or already finished: read from its PDF text layer, or failed
    (a one-line reason; a decoder's own bug fails this page only)."""
    s = settings
    done = text_layer_page(ref, s.dpi, pdfs, s.text_layer, s.keep_furniture, s.debug_layout)
    if done is not None:
        return done
    try:
        return decode_page(ref, s.dpi, pdfs, s.max_pixels)
    except OcrbatchError as exc:
        return PageResult(ref=ref, status=Status.FAILED, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - the run goes on
        log.debug("decoding %s failed", ref.label, exc_info=True)
        return PageResult(ref=ref, status=Status.FAILED, error=f"cannot decode: {error_line(exc)}")


def decode_page(ref: PageRef, dpi: int, pdfs: PdfCache, max_pixels: int = DEFAULT_MAX_PIXELS) -> PageImage:
    """Render or decode one page to an RGB PIL image; raises DecodeError with a user-facing reason.
    An image frame over `max_pixels` fails before its pixels are decoded."""
    from PIL import Image, ImageOps

    t0 = time.perf_counter()
    src = ref.source
    try:
        if src.kind is Kind.PDF:
            image = pdfs.render(src.path, ref.page - 1, dpi)
        elif src.kind in MULTIFRAME and src.page_count > 1:
            image = FRAMES.read(src.path, ref.page - 1, max_pixels)
        else:
            with open_image(src.path) as im:
                if ref.page > 1:
                    im.seek(ref.page - 1)
                check_size(im.width, im.height, max_pixels)
                im.load()
                image = ImageOps.exif_transpose(im) if ref.page == 1 else im.copy()
        if image.mode != "RGB":
            image = to_rgb(image)
    except DecodeError:
        raise
    except Image.DecompressionBombError as exc:
        raise DecodeError(f"image too large to decode safely: {exc}") from exc
    except (OSError, ValueError, EOFError, SyntaxError) as exc:
        raise DecodeError(f"cannot decode: {exc}") from exc
    small = too_small(image.width, image.height)
    if small is not None:
        raise DecodeError(small)
    return PageImage(ref=ref, image=image, decode_s=time.perf_counter() - t0, dpi=image.info.get(pdfium.CAPPED_DPI))


def given(ref: PageRef, image, max_pixels: int) -> PageImage | PageResult:
    """A PIL image handed to the Python API as a page: an RGB copy (the caller may change theirs), or a failed
    result when it is over `max_pixels`, as a file's frame would be (its copy alone would take gigabytes)."""
    if image.width * image.height > max_pixels:  # (one too small fails in `prepare`, as every page does)
        try:
            check_size(image.width, image.height, max_pixels)
        except DecodeError as exc:
            return PageResult(ref=ref, status=Status.FAILED, error=str(exc))
    return PageImage(ref, rgb_copy(image))


def rgb_copy(image):
    """An RGB copy of a PIL image (transparent areas as white paper), as decoding makes."""
    return to_rgb(image) if image.mode != "RGB" else image.copy()


def read(ref: PageRef, settings: DecodeSettings, pdfs: PdfCache, front: Front) -> PageImage | PageResult:
    """The page decoded and prepared by the engine's front (on this thread), or already finished: read from
    its text layer, or failed. EngineLoadError from `prepare` is raised (the engine cannot work at all). The
    one call every way in makes."""
    page = read_page(ref, settings, pdfs)
    if isinstance(page, PageResult):
        return page
    return prepare(front, page)


def prepare(front: Front, page: PageImage) -> PageImage | PageResult:
    """Front.prepare, with a failure confined to its page (its result, one line)."""
    small = too_small(*page.image.size)
    if small is not None:  # a page given as an image (the Python API): engines would divide by its size
        return PageResult(ref=page.ref, status=Status.FAILED, error=small)
    try:
        return front.prepare(page)
    except EngineLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - one page's preprocessing failed; the others go on
        log.debug("preparing %s failed", page.ref.label, exc_info=True)
        return PageResult(ref=page.ref, status=Status.FAILED, error=error_line(exc))


class DecodePool:
    """Threads that decode and prepare pages, in the order submitted (the intake keeps one pool per lane, so
    interactive pages never queue behind bulk ones)."""

    def __init__(self, threads: int, name: str = "decode") -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._name = name
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(max(1, threads))]
        for t in self._threads:
            t.start()

    def replace_stuck(self) -> None:
        """A thread of the pool is stuck in a job (its page was given up): one more takes its place, so the jobs
        queued behind it still run. The stuck one ends by itself if its job ever returns."""
        t = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
        self._threads.append(t)
        t.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception:  # noqa: BLE001 - a job answers its own errors; this is a last resort
                log.exception("a decode job failed")

    def close(self, wait: bool = True, drop: bool = False) -> list[Callable[[], None]]:
        """No more jobs; with `wait`, the queued ones are done first (without: a stuck thread is left behind).
        With `drop`, the jobs not started are taken off instead and returned, for their owner to answer."""
        left: list[Callable[[], None]] = []
        if drop:
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    left.append(job)
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for t in self._threads:
                t.join()
        return left
