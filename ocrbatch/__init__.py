"""ocrbatch: batch-convert folders of scanned PDFs and page images to Markdown, one file per page."""

__version__ = "0.1.0"
