"""The DeepSeek-OCR-2 engine (transformers): engine.py (load, batched greedy generation), inputs.py (image
tiling and host staging), post.py (grounding tags to Markdown), ngram_guard.py (the repetition guard) and
synthetic.py (a tiny random-weight checkpoint for tests and benches). Importing this package imports no torch."""
