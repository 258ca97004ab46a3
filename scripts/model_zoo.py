"""The real models Kiln is tested and benchmarked on, built from code with
random weights (nothing is downloaded): ResNet-50, MobileNetV2, BERT-base,
DistilBERT, GPT-2 small and ViT-B/16 from `transformers` (each config class's defaults,
spelled out here, are the published architecture) and DenseNet-121 from
densenet.py.

MODELS maps a name to a function returning (torch module, make_inputs), where
make_inputs(rng, batch) gives {input name: numpy array} for that batch size.
"""
import numpy as np

SEQUENCE = 128
IMAGE = 224


def _image_input(rng, batch):
    return {"pixel_values": rng.standard_normal((batch, 3, IMAGE, IMAGE)).astype(np.float32)}


def _resnet50():
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(
        embedding_size=64,
        hidden_sizes=[256, 512, 1024, 2048],
        depths=[3, 4, 6, 3],
        layer_type="bottleneck",
        hidden_act="relu",
        num_labels=1000,
    )
    return ResNetForImageClassification(config), _image_input


def _mobilenet_v2():
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    config = MobileNetV2Config(depth_multiplier=1.0, image_size=IMAGE, num_labels=1001)
    return MobileNetV2ForImageClassification(config), _image_input


def _densenet121():
    from densenet import densenet121

    return densenet121(num_classes=1000), _image_input


def _bert_base():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    )

    def inputs(rng, batch):
        # The last tokens are padding, so the attention mask does something.
        mask = np.ones((batch, SEQUENCE), np.int64)
        mask[:, SEQUENCE - 16 :] = 0
        return {
            "input_ids": rng.integers(0, config.vocab_size, (batch, SEQUENCE), dtype=np.int64),
            "attention_mask": mask,
            "token_type_ids": np.repeat((np.arange(SEQUENCE) >= SEQUENCE // 2).astype(np.int64)[None, :], batch, 0),
        }

    return BertModel(config, add_pooling_layer=True), inputs


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072)

    def inputs(rng, batch):
        mask = np.ones((batch, SEQUENCE), np.int64)
        mask[:, SEQUENCE - 16 :] = 0  # padding at the end, as for BERT
        return {"input_ids": rng.integers(0, config.vocab_size, (batch, SEQUENCE), dtype=np.int64),
                "attention_mask": mask}

    return DistilBertModel(config), inputs


def _gpt2_small():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257, use_cache=False)

    def inputs(rng, batch):
        return {"input_ids": rng.integers(0, config.vocab_size, (batch, SEQUENCE), dtype=np.int64)}

    return GPT2LMHeadModel(config), inputs


def _vit_b16():
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        image_size=IMAGE,
        patch_size=16,
        num_labels=1000,
    )
    return ViTForImageClassification(config), _image_input


MODELS = {
    "resnet50": _resnet50,
    "mobilenet_v2": _mobilenet_v2,
    "densenet121": _densenet121,
    "bert_base": _bert_base,
    "distilbert": _distilbert,
    "gpt2_small": _gpt2_small,
    "vit_b16": _vit_b16,
}

# What the benchmark tables call each model.
TITLES = {
    "resnet50": "ResNet-50",
    "mobilenet_v2": "MobileNetV2",
    "densenet121": "DenseNet-121",
    "bert_base": "BERT-base (seq 128)",
    "distilbert": "DistilBERT (seq 128)",
    "gpt2_small": "GPT-2 small (128-token prefill)",
    "vit_b16": "ViT-B/16",
}
