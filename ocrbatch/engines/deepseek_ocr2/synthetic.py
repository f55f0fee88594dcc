"""Random DeepSeek-OCR-2 checkpoints, for `ocrbatch bench` and the tests: the real architecture at toy width
(`arch="tiny"`, ~400k parameters, for a CPU) or at roughly its published size (`real_size=True`, ~3.4B
parameters, for a GPU).

`build(folder)` writes config, weights, tokenizer and processor files into `folder`, so the model is loaded
through the same `from_pretrained(folder)` path a user's real weights take. Nothing is downloaded. The
weights are random: what such a model writes is noise, never OCR.

Heavy imports (torch, transformers, tokenizers) happen inside the functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPECIALS = ["<image>", "<|grounding|>", "<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>"]
BOS, EOS, PAD = "<|begin_of_sentence|>", "<|end_of_sentence|>", "<|pad|>"
REAL_VOCAB = 129280  # the size of DeepSeek-OCR-2's vocabulary


def build_tokenizer(fill_to: int = 0):
    """A byte-level BPE with no merges (every byte is a token), the model's special tokens and single-id
    `<td>`/`</td>` as in the real vocabulary; BOS first, left padding.

    `fill_to`: pad the vocabulary with filler tokens (three bytes each, never produced by encoding) to about
    this many ids, so a full-size random model's output still decodes.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers.pre_tokenizers import ByteLevel

    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    n = len(alphabet)
    while len(vocab) < fill_to - len(SPECIALS) - 5:
        k = len(vocab) - n
        vocab[alphabet[k // (n * n) % n] + alphabet[k // n % n] + alphabet[k % n]] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens([AddedToken(t, special=True) for t in (BOS, EOS, PAD, *SPECIALS)])
    core.add_tokens([AddedToken(t, special=False) for t in ("<td>", "</td>")])
    core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A",
                                                        special_tokens=[(BOS, core.token_to_id(BOS))])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   additional_special_tokens=SPECIALS, padding_side="left")


def _token_ids(tok) -> dict[str, int]:
    return dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)


def tiny_config(tok):
    """About 400k parameters. SAM patch_size must stay 16-19 with the default processor (the vision tower's
    query tables hold 144 and 256 positions)."""
    from transformers import DeepseekOcr2Config

    sam = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, patch_size=16, global_attn_indexes=[],
               downsample_channels=[32, 64], output_channels=32, window_size=4, mlp_dim=64,
               initializer_range=0.02)  # the default (1e-10) would make every page look alike
    encoder = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=2)
    # Every language-model weight at least 64 wide on its input side: bitsandbytes packs 4-bit weights in
    # blocks of 64 (its CPU path fails on a narrower one, e.g. a 32-wide expert).
    text = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, moe_intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                mlp_layer_types=["dense", "sparse"], n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
                max_position_embeddings=4096, **_token_ids(tok))
    return DeepseekOcr2Config(vision_config={"sam_config": sam, "encoder_config": encoder}, text_config=text,
                              image_token_id=tok.convert_tokens_to_ids("<image>"))


def real_size_config(tok):
    """Roughly the published architecture (about 3.4B parameters): a SAM ViT-B, a 24-layer 896-wide encoder
    and a 12-layer mixture-of-experts decoder (64 routed experts, 6 per token, 2 shared). An approximation
    for timing and memory figures, not the checkpoint's exact config."""
    from transformers import DeepseekOcr2Config

    encoder = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                   num_key_value_heads=2, max_position_embeddings=131072, rms_norm_eps=1e-6,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})  # the published encoder's
    text = dict(vocab_size=len(tok), hidden_size=1280, intermediate_size=6848, moe_intermediate_size=896,
                num_hidden_layers=12, num_attention_heads=10, num_key_value_heads=10,
                mlp_layer_types=["dense"] + ["sparse"] * 11, n_routed_experts=64, n_shared_experts=2,
                num_experts_per_tok=6, max_position_embeddings=8192, **_token_ids(tok))
    return DeepseekOcr2Config(vision_config={"sam_config": {}, "encoder_config": encoder}, text_config=text,
                              image_token_id=tok.convert_tokens_to_ids("<image>"))


def build(folder: Path, seed: int = 0, never_ends: bool = False, real_size: bool = False,
          device: str = "cpu", dtype: Any = None, layout: str = "transformers") -> Path:
    """Write a random checkpoint (model + tokenizer + processor) into `folder`; returns it.

    `never_ends`: the end token's logit is always 0 while some other token's is (almost surely) above it, so
    greedy decoding never stops by itself: every page runs into --max-new-tokens, as a looping page does.
    `real_size`: roughly the published size instead of the toy one (build it on a GPU: `device="cuda"`).
    `layout`: "transformers" (deepseek-community's) or "official" (deepseek-ai's: what vLLM reads; the same
    weights, the towers' sizes kept in its vision_config, checkpoint.py).
    """
    import torch

    from transformers import (DeepseekOcr2ForConditionalGeneration, DeepseekOcr2ImageProcessorPil,
                              DeepseekOcr2Processor, GenerationConfig)

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(fill_to=REAL_VOCAB if real_size else 0)
    config = real_size_config(tok) if real_size else tiny_config(tok)
    torch.manual_seed(seed)
    with torch.device(device):
        model = DeepseekOcr2ForConditionalGeneration._from_config(config, dtype=dtype or torch.float32).eval()
    if never_ends:
        with torch.no_grad():
            model.lm_head.weight[tok.eos_token_id].zero_()
    model.generation_config = GenerationConfig(**_token_ids(tok))
    model.save_pretrained(folder)
    del model
    processor = DeepseekOcr2Processor(image_processor=DeepseekOcr2ImageProcessorPil(), tokenizer=tok)
    processor.save_pretrained(folder)
    if layout == "official":
        import json

        from .checkpoint import official_config, read_config

        (folder / "config.json").write_text(json.dumps(official_config(read_config(folder)), indent=2) + "\n",
                                            encoding="utf-8")
        (folder / "processor_config.json").unlink(missing_ok=True)
    elif layout != "transformers":
        raise ValueError(f"layout {layout!r}: transformers or official")
    return folder
