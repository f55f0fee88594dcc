"""vLLM's DeepSeek-OCR-2 with vision towers sized by config.json, for random test and bench checkpoints.

vLLM builds the published towers whatever the config says (a SAM ViT-B and a 24-layer 896-wide Qwen2 encoder,
some 500M parameters): too big for a test on two CPU cores. The small random checkpoints that synthetic.py
writes carry their towers' sizes in the official config's `vision_config.sam_config` and `encoder_config`
(checkpoint.py); for those, the engine registers this class (`SizedTowers`) with vLLM's model registry under
`ARCH` and names it in `hf_overrides`. Everything else is vLLM's: its tower classes (at these sizes), its
language model, scheduler, attention and weight loading. A real checkpoint never uses it.

While the parent class builds its towers, the two factories it calls are swapped, under a lock, for ones that
read the sizes from the config (imported only when the engine loads such a checkpoint: needs vLLM).
"""

from __future__ import annotations

import threading
from typing import Any

ARCH = "OcrbatchSizedTowersDeepseekOCR2"
_LOCK = threading.Lock()


def register() -> None:
    """Make `ARCH` known to vLLM's model registry (idempotent; cheap: the class is made when vLLM asks for it).
    Also a vLLM general plugin (pyproject.toml), so that an engine core in its own process knows it too."""
    from vllm import ModelRegistry

    if ARCH not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(ARCH, f"{__name__}:SizedTowers")


_CLASS: Any = None


def __getattr__(name: str) -> Any:
    if name == "SizedTowers":
        global _CLASS
        if _CLASS is None:
            _CLASS = _make_class()
        return _CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_class() -> Any:
    from vllm.model_executor.models import deepseek_ocr2 as stock
    from vllm.model_executor.models.deepencoder import ImageEncoderViT
    from vllm.model_executor.models.deepencoder2 import CustomQwen2Decoder, Qwen2Decoder2Encoder
    from vllm.model_executor.layers.conv import Conv2dLayer

    from ..deepseek_ocr2.checkpoint import PUBLISHED_ENCODER, PUBLISHED_SAM

    class SizedTowers(stock.DeepseekOCR2ForCausalLM):
        def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
            vision = vllm_config.model_config.hf_config.vision_config
            sam = {**PUBLISHED_SAM, **(getattr(vision, "sam_config", None) or {})}
            enc = {**PUBLISHED_ENCODER, **(getattr(vision, "encoder_config", None) or {})}

            def sam_tower(**published: Any) -> Any:
                middle, out = sam["downsample_channels"]
                tower = ImageEncoderViT(**{**published, "depth": sam["num_hidden_layers"],
                                           "embed_dim": sam["hidden_size"], "num_heads": sam["num_attention_heads"],
                                           "mlp_ratio": sam["mlp_dim"] / sam["hidden_size"],
                                           "patch_size": sam["patch_size"], "window_size": sam["window_size"],
                                           "global_attn_indexes": tuple(sam["global_attn_indexes"]),
                                           "out_chans": sam["output_channels"], "last_conv_output": out})
                # The stock tower's first downsampling conv takes 256 channels whatever out_chans is.
                tower.net_2 = Conv2dLayer(sam["output_channels"], middle, kernel_size=3, stride=2, padding=1,
                                          bias=False)
                tower.net_3 = Conv2dLayer(middle, out, kernel_size=3, stride=2, padding=1, bias=False)
                return tower

            def encoder_tower() -> Any:
                tower = Qwen2Decoder2Encoder(decoder_layer=enc["num_hidden_layers"],
                                             hidden_dimension=enc["hidden_size"],
                                             num_attention_heads=enc["num_attention_heads"],
                                             num_key_value_heads=enc["num_key_value_heads"],
                                             intermediate_size=enc["intermediate_size"])
                rope = enc.get("rope_parameters") or {}
                tower.model = CustomQwen2Decoder(  # the stock one fixes rope theta and positions: take the config's
                    decoder_layer=enc["num_hidden_layers"], hidden_dimension=enc["hidden_size"],
                    num_attention_heads=enc["num_attention_heads"], num_key_value_heads=enc["num_key_value_heads"],
                    intermediate_size=enc["intermediate_size"],
                    max_position_embeddings=enc.get("max_position_embeddings", 131072),
                    rms_norm_eps=enc.get("rms_norm_eps", 1e-6), rope_theta=rope.get("rope_theta", 1000000.0))
                return tower

            with _LOCK:
                saved = stock.ImageEncoderViT, stock.build_qwen2_decoder_as_encoder
                stock.ImageEncoderViT, stock.build_qwen2_decoder_as_encoder = sam_tower, encoder_tower
                try:
                    super().__init__(vllm_config=vllm_config, prefix=prefix)
                finally:
                    stock.ImageEncoderViT, stock.build_qwen2_decoder_as_encoder = saved

    SizedTowers.__name__ = SizedTowers.__qualname__ = ARCH
    return SizedTowers
