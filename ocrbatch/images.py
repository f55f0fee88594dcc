"""Page images with Pillow, as discovery and decoding both need them: opened with our own size limit
(`--max-pixels`) instead of Pillow's process-wide bomb check, frames counted, and any mode turned into
8-bit RGB with high-depth samples scaled (not clipped) to 0..255.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import DecodeError
from .records import Kind

DEFAULT_MAX_PIXELS = 200_000_000  # 200 MP: an A0 sheet at 400 dpi; about 600 MB as RGB
MULTIFRAME = (Kind.TIFF, Kind.GIF, Kind.WEBP)  # every frame is a page


def open_image(path: Path) -> Any:
    """Open (headers only: no pixels are decoded yet). Pillow's own bomb check is replaced by `check_size`,
    which names the limit and the option that raises it."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None  # noqa: the limit is --max-pixels, checked per frame by check_size
    return Image.open(path)


def frame_count(im: Any, kind: Kind) -> int:
    return int(getattr(im, "n_frames", 1) or 1) if kind in MULTIFRAME else 1


MIN_PAGE_PX = 2  # a page narrower or lower than this has nothing to read (and engines divide by its size)


def too_small(width: int, height: int) -> str | None:
    """Why a page of this size cannot be read ("page is too small (0x0 px)"), or None."""
    if width < MIN_PAGE_PX or height < MIN_PAGE_PX:
        return f"page is too small ({width}x{height} px)"
    return None


def check_size(width: int, height: int, max_pixels: int) -> None:
    small = too_small(width, height)
    if small is not None:
        raise DecodeError(small)
    if width * height > max_pixels:
        raise DecodeError(f"image is {width}x{height} px ({width * height / 1e6:.0f} MP), over --max-pixels "
                          f"{max_pixels / 1e6:.0f} MP (raise it to read this page)")


def to_rgb(image: Any) -> Any:
    """8-bit RGB; transparent areas read as paper; 16-bit and float samples scaled to the full 0..255."""
    from PIL import Image

    if image.mode == "RGB":
        return image
    if image.mode.startswith("I") or image.mode == "F":
        image = _scale_to_l(image)
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, (255, 255, 255))
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    return image.convert("RGB")


def _scale_to_l(image: Any) -> Any:
    """A one-channel high-depth image (I;16*, I, F) as 8-bit L, by its sample range: 16-bit samples are
    divided by 257; 32-bit integers by the 16-bit range when they fit it, else by their maximum; floats
    in 0..1 are multiplied by 255."""
    import numpy as np
    from PIL import Image

    a = np.asarray(image)
    if a.dtype.kind == "f":
        a = np.nan_to_num(a.astype(np.float64))
        top = 1.0 if a.max(initial=0.0) <= 1.0 else (65535.0 if a.max() <= 65535 else float(a.max()))
    elif image.mode.startswith("I;16"):
        top = 65535.0
    else:
        peak = int(a.max(initial=0))
        top = 65535.0 if peak <= 65535 else float(peak)
    scaled = np.clip(a.astype(np.float64) * (255.0 / max(top, 1e-12)), 0, 255).round().astype(np.uint8)
    return Image.fromarray(scaled, "L")

