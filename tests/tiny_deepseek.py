"""A tiny, random DeepSeek-OCR-2 checkpoint for tests: the real architecture at toy width.

`build(folder)` writes config, weights, tokenizer and processor files into `folder`, so tests load the
model through the same `from_pretrained(folder)` path a user's real weights take. Nothing is downloaded.
The model's weights are random: what it writes is noise, never OCR.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<image>", "<|grounding|>", "<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>"]
BOS, EOS, PAD = "<|begin_of_sentence|>", "<|end_of_sentence|>", "<|pad|>"


def build_tokenizer():
    """A byte-level BPE with no merges (every byte is a token), the model's special tokens and single-id
    `<td>`/`</td>` as in the real vocabulary; BOS first, left padding."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(ByteLevel.alphabet()))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens([AddedToken(t, special=True) for t in (BOS, EOS, PAD, *SPECIALS)])
    core.add_tokens([AddedToken(t, special=False) for t in ("<td>", "</td>")])
    core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, core.token_to_id(BOS))])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   additional_special_tokens=SPECIALS, padding_side="left")


def build_config(tok, *, vocab_size: int | None = None):
    from transformers import DeepseekOcr2Config

    vocab = vocab_size or len(tok)
    sam = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, patch_size=16, global_attn_indexes=[],
               downsample_channels=[32, 64], output_channels=32, window_size=4, mlp_dim=64)
    encoder = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=2, vocab_size=vocab)
    text = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, mlp_layer_types=["dense", "sparse"],
                n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, max_position_embeddings=4096,
                bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return DeepseekOcr2Config(vision_config={"sam_config": sam, "encoder_config": encoder}, text_config=text,
                              image_token_id=tok.convert_tokens_to_ids("<image>"))


def build(folder: Path, seed: int = 0) -> Path:
    """Write a tiny random checkpoint (model + tokenizer + processor) into `folder`; returns it."""
    import torch
    from transformers import (DeepseekOcr2ForConditionalGeneration, DeepseekOcr2ImageProcessorPil,
                              DeepseekOcr2Processor, GenerationConfig)

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    config = build_config(tok)
    torch.manual_seed(seed)
    model = DeepseekOcr2ForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id)
    model.save_pretrained(folder)
    processor = DeepseekOcr2Processor(image_processor=DeepseekOcr2ImageProcessorPil(), tokenizer=tok)
    processor.save_pretrained(folder)
    return folder


if __name__ == "__main__":  # python tests/tiny_deepseek.py DIR
    import sys

    print(build(Path(sys.argv[1])))
