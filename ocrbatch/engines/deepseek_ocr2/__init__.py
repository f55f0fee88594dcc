"""The DeepSeek-OCR-2 engine (transformers): engine.py (checks, load, batched greedy generation), common.py (what
the vLLM backend, engines/deepseek_ocr2_vllm, shares with it: prompts, dtypes, the guard's settings, the
`Generated` record, `page_output`, checkpoint resolution), loading.py (transformers' model loading, --quantize),
checkpoint.py (the two checkpoint layouts), inputs.py (image tiling and host staging), post.py (grounding tags to
Markdown), ngram_guard.py (the repetition guard) and synthetic.py (a tiny random-weight checkpoint for tests and
benches); continuous.py (the decode loop in which pages leave and join the running batch between steps).
Importing this package imports no torch."""
