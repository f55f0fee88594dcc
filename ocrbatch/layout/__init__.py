"""Text lines with boxes → Markdown (reading order, paragraphs, headings, lists)."""

from .markdown import lines_to_markdown

__all__ = ["lines_to_markdown"]
