"""Random DeepSeek-OCR-2 checkpoints for tests: the builder lives in the package (`ocrbatch bench` uses it
too); this module keeps the tests' name for it.

`build(folder)` writes config, weights, tokenizer and processor files into `folder`, so tests load the
model through the same `from_pretrained(folder)` path a user's real weights take. Nothing is downloaded.
"""

from __future__ import annotations

from ocrbatch.engines.deepseek_ocr2.synthetic import (  # noqa: F401 - re-exported for the tests
    BOS, EOS, PAD, REAL_VOCAB, SPECIALS, build, build_tokenizer, real_size_config, tiny_config)

if __name__ == "__main__":  # python tests/tiny_deepseek.py DIR
    import sys
    from pathlib import Path

    print(build(Path(sys.argv[1])))
