"""Engines turn batches of page images into Markdown. See base.py for the interface."""
