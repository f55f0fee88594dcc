"""ocrbatch: batch-convert folders of scanned PDFs and page images to Markdown, one file per page.

The Python API is `Converter` (converter.py); it is imported on first use, so `import ocrbatch` and
`ocrbatch --help` stay light."""

__version__ = "0.1.0"
__all__ = ["Converter", "__version__"]


def __getattr__(name: str):
    if name == "Converter":
        from .converter import Converter

        return Converter
    raise AttributeError(f"module 'ocrbatch' has no attribute {name!r}")
