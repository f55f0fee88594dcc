"""DeepSeek-OCR-2 on vLLM (`--engine deepseek-ocr2 --backend vllm`): vLLM's own model, scheduler and paged KV
cache do the continuous batching; ocrbatch keeps everything around them (discovery, decoding, lanes, the
manifest, resume, serve) and the same prompt, repetition guard policy and Markdown post-processing as the
transformers backend (engines/deepseek_ocr2).

    engine.py    the engine: checks, identity, load (a vLLM LLMEngine on one device), static batches, output
    decoder.py   pages in and out of vLLM's running batch: requests added, aborted and collected per step
    towers.py    a DeepSeek-OCR-2 whose vision towers take their sizes from config.json (vLLM builds only the
                 published ones): for the small random checkpoints of the tests and benches

Importing this package imports neither torch nor vLLM.
"""
