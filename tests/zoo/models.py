"""The model zoo: tiny Hugging Face models built from configs (random weights, nothing downloaded).

One row per architecture in ``ZOO``: its config and model classes, the kind of input it takes, a
few config values that make it tiny, and whether it is in the fast subset ``make test`` runs.
Every probability of dropping something (dropout, layerdrop, drop path, SpecAugment masking) is
set to 0, so training is deterministic and comparable with eager PyTorch.

timm and torchvision are absent: the torchvision wheel that pip offers for torch 2.13.0 is a CUDA
build that fails to import beside the CPU torch ("operator torchvision::nms does not exist"), and
timm imports torchvision. Their families (ResNet, ConvNeXt, RegNet, MobileNet, EfficientNet, ViT,
DeiT, Swin, BiT, DINOv2) are covered by transformers' own implementations below.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

VOCAB = 96
# the same tiny sizes for every text transformer; each config reads the names it knows
TEXT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64, use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
DECODER = dict(TEXT, num_key_value_heads=2, tie_word_embeddings=False)
SEQ2SEQ = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
               use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
VIT = dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
           intermediate_size=64, num_labels=10)
CNN = dict(num_labels=10)


@dataclass(frozen=True)
class Entry:
    """One architecture: ``transformers.<config>(**kwargs)`` built as ``transformers.<model>``."""

    name: str
    config: str
    model: str
    kind: str  # masked | causal | seq2seq | whisper | vision | cnn | clip | ctc
    kwargs: dict = field(default_factory=dict)
    fast: bool = False  # in the subset `make test` runs

    @property
    def family(self) -> str:
        return {"masked": "encoder", "causal": "decoder", "seq2seq": "encoder-decoder", "whisper": "audio",
                "ctc": "audio", "clip": "vision", "vision": "vision", "cnn": "vision"}[self.kind]


ZOO: list[Entry] = [
    # encoders
    Entry("bert", "BertConfig", "BertForMaskedLM", "masked", TEXT, fast=True),
    Entry("roberta", "RobertaConfig", "RobertaForMaskedLM", "masked", dict(TEXT, pad_token_id=1)),
    Entry("albert", "AlbertConfig", "AlbertForMaskedLM", "masked", dict(TEXT, embedding_size=16)),
    Entry("deberta", "DebertaConfig", "DebertaForMaskedLM", "masked", TEXT),
    Entry("deberta_v2", "DebertaV2Config", "DebertaV2ForMaskedLM", "masked", dict(TEXT, relative_attention=True,
          pos_att_type=["p2c", "c2p"], position_buckets=8, max_relative_positions=16), fast=True),
    Entry("distilbert", "DistilBertConfig", "DistilBertForMaskedLM", "masked",
          dict(TEXT, dim=32, n_layers=2, n_heads=4, hidden_dim=64)),
    Entry("electra", "ElectraConfig", "ElectraForMaskedLM", "masked", dict(TEXT, embedding_size=16)),
    Entry("mpnet", "MPNetConfig", "MPNetForMaskedLM", "masked", TEXT),
    # decoders
    Entry("gpt2", "GPT2Config", "GPT2LMHeadModel", "causal", dict(TEXT, n_positions=64)),
    Entry("gpt_neo", "GPTNeoConfig", "GPTNeoForCausalLM", "causal",
          dict(TEXT, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=4)),
    Entry("gptj", "GPTJConfig", "GPTJForCausalLM", "causal", dict(TEXT, n_positions=64, rotary_dim=4)),
    Entry("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", "causal", DECODER),
    Entry("opt", "OPTConfig", "OPTForCausalLM", "causal", dict(TEXT, ffn_dim=64, word_embed_proj_dim=32)),
    Entry("bloom", "BloomConfig", "BloomForCausalLM", "causal", dict(TEXT, n_layer=2, n_head=4), fast=True),
    Entry("llama", "LlamaConfig", "LlamaForCausalLM", "causal", DECODER, fast=True),
    Entry("mistral", "MistralConfig", "MistralForCausalLM", "causal", dict(DECODER, sliding_window=4)),
    Entry("mixtral", "MixtralConfig", "MixtralForCausalLM", "causal",
          dict(DECODER, num_local_experts=4, num_experts_per_tok=2)),
    Entry("qwen2", "Qwen2Config", "Qwen2ForCausalLM", "causal", DECODER),
    Entry("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM", "causal",
          dict(DECODER, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
               shared_expert_intermediate_size=32)),
    Entry("qwen3", "Qwen3Config", "Qwen3ForCausalLM", "causal", dict(DECODER, head_dim=8)),
    Entry("phi", "PhiConfig", "PhiForCausalLM", "causal", DECODER),
    Entry("phi3", "Phi3Config", "Phi3ForCausalLM", "causal", DECODER),
    Entry("gemma", "GemmaConfig", "GemmaForCausalLM", "causal", dict(DECODER, head_dim=8)),
    Entry("gemma2", "Gemma2Config", "Gemma2ForCausalLM", "causal", dict(DECODER, head_dim=8, sliding_window=4)),
    Entry("falcon", "FalconConfig", "FalconForCausalLM", "causal", dict(TEXT, num_kv_heads=4)),
    Entry("starcoder2", "Starcoder2Config", "Starcoder2ForCausalLM", "causal", DECODER),
    Entry("olmo", "OlmoConfig", "OlmoForCausalLM", "causal", DECODER),
    Entry("granite", "GraniteConfig", "GraniteForCausalLM", "causal", DECODER),
    # encoder-decoders
    Entry("t5", "T5Config", "T5ForConditionalGeneration", "seq2seq",
          dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, use_cache=False,
               pad_token_id=0, eos_token_id=2, decoder_start_token_id=0), fast=True),
    Entry("bart", "BartConfig", "BartForConditionalGeneration", "seq2seq", SEQ2SEQ),
    Entry("mbart", "MBartConfig", "MBartForConditionalGeneration", "seq2seq", SEQ2SEQ),
    Entry("pegasus", "PegasusConfig", "PegasusForConditionalGeneration", "seq2seq", SEQ2SEQ),
    Entry("marian", "MarianConfig", "MarianMTModel", "seq2seq", dict(SEQ2SEQ, decoder_vocab_size=VOCAB)),
    Entry("whisper", "WhisperConfig", "WhisperForConditionalGeneration", "whisper",
          dict(SEQ2SEQ, num_mel_bins=16, max_source_positions=16, max_target_positions=32)),
    # audio
    Entry("wav2vec2", "Wav2Vec2Config", "Wav2Vec2ForCTC", "ctc",
          dict(TEXT, vocab_size=32, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, mask_time_prob=0.0,
               ctc_loss_reduction="mean")),
    Entry("hubert", "HubertConfig", "HubertForCTC", "ctc",
          dict(TEXT, vocab_size=32, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, mask_time_prob=0.0,
               ctc_loss_reduction="mean")),
    # vision transformers
    Entry("vit", "ViTConfig", "ViTForImageClassification", "vision", VIT, fast=True),
    Entry("deit", "DeiTConfig", "DeiTForImageClassification", "vision", VIT),
    Entry("dinov2", "Dinov2Config", "Dinov2ForImageClassification", "vision", VIT),
    Entry("beit", "BeitConfig", "BeitForImageClassification", "vision", dict(VIT, use_relative_position_bias=True)),
    Entry("swin", "SwinConfig", "SwinForImageClassification", "vision",
          dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
               num_labels=10)),
    Entry("clip", "CLIPConfig", "CLIPModel", "clip",
          dict(text_config=dict(TEXT, max_position_embeddings=32),
               vision_config={k: v for k, v in VIT.items() if k != "num_labels"}, projection_dim=16)),
    # convolutional networks
    Entry("resnet", "ResNetConfig", "ResNetForImageClassification", "cnn",
          dict(CNN, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"), fast=True),
    Entry("resnet_bottleneck", "ResNetConfig", "ResNetForImageClassification", "cnn",
          dict(CNN, embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1], layer_type="bottleneck")),
    Entry("convnext", "ConvNextConfig", "ConvNextForImageClassification", "cnn",
          dict(CNN, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2)),
    Entry("regnet", "RegNetConfig", "RegNetForImageClassification", "cnn",
          dict(CNN, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=8)),
    Entry("mobilenet_v1", "MobileNetV1Config", "MobileNetV1ForImageClassification", "cnn",
          dict(CNN, depth_multiplier=0.25, image_size=32)),
    Entry("mobilenet_v2", "MobileNetV2Config", "MobileNetV2ForImageClassification", "cnn",
          dict(CNN, depth_multiplier=0.25, image_size=32), fast=True),
    Entry("efficientnet", "EfficientNetConfig", "EfficientNetForImageClassification", "cnn",
          dict(CNN, image_size=32, width_coefficient=0.1, depth_coefficient=0.1, hidden_dim=128)),
    Entry("bit", "BitConfig", "BitForImageClassification", "cnn",
          dict(CNN, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="preactivation", num_groups=4)),
]
BY_NAME = {e.name: e for e in ZOO}

_DROPS = ("dropout", "pdrop", "layerdrop", "drop_path", "drop_rate", "mask_time_prob", "mask_feature_prob")


def _no_drops(config) -> None:
    """Every probability of dropping something set to 0, in the config and its sub-configs."""
    for key, value in list(vars(config).items()):
        if isinstance(value, float) and any(d in key for d in _DROPS):
            setattr(config, key, 0.0)
        elif hasattr(value, "to_dict") and hasattr(value, "model_type"):
            _no_drops(value)


def config_of(entry: Entry, attn: str | None = None):
    import transformers

    kwargs = dict(entry.kwargs)
    if attn is not None:
        kwargs["attn_implementation"] = attn
    config = getattr(transformers, entry.config)(**kwargs)
    _no_drops(config)
    return config


def attn_implementations(entry: Entry) -> tuple[str | None, ...]:
    """The attention implementations the model offers among eager and sdpa (None: it has no such choice)."""
    import transformers

    cls = getattr(transformers, entry.model)
    if entry.kind == "cnn":
        return (None,)
    return ("eager", "sdpa") if getattr(cls, "_supports_sdpa", False) else ("eager",)


def build(entry: Entry, attn: str | None = None, seed: int = 0) -> torch.nn.Module:
    """The model with random weights (seeded), in eval mode."""
    import transformers

    config = config_of(entry, attn)
    torch.manual_seed(seed)
    model = getattr(transformers, entry.model)(config)
    if attn is not None and getattr(model.config, "_attn_implementation", attn) != attn:
        raise ValueError(f"{entry.name}: asked for attn_implementation={attn!r}, "
                         f"got {model.config._attn_implementation!r}")
    return model.eval()


def inputs(entry: Entry, model: torch.nn.Module, batch: int = 2, length: int = 8, seed: int = 1) -> dict:
    """Keyword inputs with labels (so the model returns a loss); text inputs have padding in their mask."""
    g = torch.Generator().manual_seed(seed)
    config = model.config
    if entry.kind in ("vision", "cnn", "clip"):
        vc = getattr(config, "vision_config", config)
        size = getattr(vc, "image_size", 32) if entry.kind != "cnn" else 16 + 2 * length
        out = {"pixel_values": torch.randn(batch, 3, size, size, generator=g)}
        if entry.kind == "clip":
            out.update(_text(length, batch, g), return_loss=True)
            del out["labels"]
        else:
            out["labels"] = torch.randint(0, config.num_labels, (batch,), generator=g)
        return out
    if entry.kind == "ctc":
        out = {"input_values": torch.randn(batch, 160 * length, generator=g),
               "labels": torch.randint(3, config.vocab_size, (batch, max(2, length // 4)), generator=g)}
        return out
    if entry.kind == "whisper":
        frames = 2 * config.max_source_positions
        text = _text(length, batch, g)
        return {"input_features": torch.randn(batch, config.num_mel_bins, frames, generator=g),
                "labels": text["labels"], "decoder_attention_mask": text["attention_mask"]}
    text = _text(length, batch, g)
    if entry.kind == "seq2seq":
        text["labels"] = _text(max(2, length - 2), batch, g)["labels"]
    return text


def _text(length: int, batch: int, g: torch.Generator) -> dict:
    ids = torch.randint(3, VOCAB, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[0, length - 2:] = 0  # the first row is padded at its end
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def pair(entry: Entry, attn: str | None = None) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The model and an identical copy (same weights) for eager reference runs."""
    model = build(entry, attn)
    return model, copy.deepcopy(model)


def cases(fast_only: bool = False) -> list[tuple[Entry, str | None]]:
    """Every (entry, attention implementation) pair of the zoo; or the fast subset, with transformers' default
    (sdpa)."""
    if fast_only:
        return [(e, attn_implementations(e)[-1]) for e in ZOO if e.fast]
    return [(e, a) for e in ZOO for a in attn_implementations(e)]
