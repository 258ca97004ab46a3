"""Models for the PyTorch front end's model suite and report.

Each entry builds a real architecture from `transformers` code (config
classes constructed here, weights random from a fixed seed, nothing
downloaded) or a small custom module with data-dependent control flow, and
its example inputs. Configs are reduced in width and depth where the
published size would make the suite too slow on two cores; the layer code is
the library's own. timm is not used: it needs torchvision, whose wheels here
are CUDA builds that fail to import against the CPU build of torch.

    from torch_model_zoo import MODELS, build
    module, inputs = build("bert")          # eval mode; inputs: {name: tensor}

`adapt(module, inputs)` wraps a model so that it takes its inputs
positionally and returns a flat tuple of tensors, which both compile paths
and the comparison with eager use.
"""
import dataclasses
import os
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402

SEQUENCE = 32
IMAGE = 64
VOCAB = 1000


@dataclasses.dataclass(frozen=True)
class ZooModel:
    name: str
    family: str
    builder: Callable  # () -> (module, rng -> {input name: tensor})
    # Data-dependent Python control flow: torch.compile splits the graph around
    # it and guards on the branch taken.
    control_flow: bool = False
    # Whether torch.export captures it as one graph (kiln.torch.compile's path).
    exportable: bool = True
    # For control-flow models: inputs (from the example inputs, as a tuple)
    # that take another branch or trip count than the example inputs.
    alternate: Callable = None
    note: str = ""


# --- inputs ---


def _text_inputs(vocab, token_types=False, mask=True):
    def make(gen):
        ids = torch.randint(3, vocab, (1, SEQUENCE), generator=gen)
        out = {"input_ids": ids}
        if mask:
            # The last tokens are padding, so the attention mask does something.
            m = torch.ones(1, SEQUENCE, dtype=torch.int64)
            m[:, SEQUENCE - 6 :] = 0
            out["attention_mask"] = m
        if token_types:
            out["token_type_ids"] = (torch.arange(SEQUENCE) >= SEQUENCE // 2).long()[None, :]
        return out

    return make


def _image_inputs(size=IMAGE):
    def make(gen):
        return {"pixel_values": torch.randn(1, 3, size, size, generator=gen)}

    return make


# --- text encoders and decoders (transformers) ---


def _bert_config():
    from transformers import BertConfig

    return BertConfig(
        vocab_size=VOCAB, hidden_size=128, num_hidden_layers=3, num_attention_heads=4, intermediate_size=512
    )


def _bert():
    from transformers import BertModel

    return BertModel(_bert_config()), _text_inputs(VOCAB, token_types=True)


def _bert_sequence_classification():
    from transformers import BertForSequenceClassification

    config = _bert_config()
    config.num_labels = 3
    return BertForSequenceClassification(config), _text_inputs(VOCAB, token_types=True)


def _bert_masked_lm():
    from transformers import BertForMaskedLM

    return BertForMaskedLM(_bert_config()), _text_inputs(VOCAB)


def _distilbert_config():
    from transformers import DistilBertConfig

    return DistilBertConfig(vocab_size=VOCAB, dim=128, hidden_dim=512, n_layers=3, n_heads=4)


def _distilbert():
    from transformers import DistilBertModel

    return DistilBertModel(_distilbert_config()), _text_inputs(VOCAB)


def _distilbert_question_answering():
    from transformers import DistilBertForQuestionAnswering

    return DistilBertForQuestionAnswering(_distilbert_config()), _text_inputs(VOCAB)


def _roberta_config():
    from transformers import RobertaConfig

    return RobertaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=512,
        max_position_embeddings=SEQUENCE + 4,
    )


def _roberta():
    from transformers import RobertaModel

    return RobertaModel(_roberta_config()), _text_inputs(VOCAB)


def _roberta_token_classification():
    from transformers import RobertaForTokenClassification

    config = _roberta_config()
    config.num_labels = 5
    return RobertaForTokenClassification(config), _text_inputs(VOCAB)


def _albert_config():
    from transformers import AlbertConfig

    return AlbertConfig(
        vocab_size=VOCAB,
        embedding_size=64,
        hidden_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=512,
    )


def _albert():
    from transformers import AlbertModel

    return AlbertModel(_albert_config()), _text_inputs(VOCAB, token_types=True)


def _albert_masked_lm():
    from transformers import AlbertForMaskedLM

    return AlbertForMaskedLM(_albert_config()), _text_inputs(VOCAB)


def _gpt2_config():
    from transformers import GPT2Config

    return GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=3, n_head=4, n_positions=64, use_cache=False)


def _gpt2():
    from transformers import GPT2Model

    return GPT2Model(_gpt2_config()), _text_inputs(VOCAB, mask=False)


def _gpt2_lm_head():
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel(_gpt2_config()), _text_inputs(VOCAB, mask=False)


def _t5_encoder():
    from transformers import T5Config, T5EncoderModel

    config = T5Config(vocab_size=VOCAB, d_model=128, d_kv=32, d_ff=512, num_layers=3, num_heads=4, use_cache=False)
    return T5EncoderModel(config), _text_inputs(VOCAB)


def _t5_encoder_gated():
    # T5 v1.1 / Flan-T5 style: gated GELU feed-forward.
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=VOCAB,
        d_model=128,
        d_kv=32,
        d_ff=384,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        use_cache=False,
    )
    return T5EncoderModel(config), _text_inputs(VOCAB)


def _bart_encoder():
    from transformers import BartConfig, BartModel

    config = BartConfig(
        vocab_size=VOCAB,
        d_model=128,
        encoder_layers=3,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=512,
        decoder_ffn_dim=512,
        max_position_embeddings=64,
        use_cache=False,
    )
    return BartModel(config).get_encoder(), _text_inputs(VOCAB)


# --- vision transformers ---


def _vit_config(cls_name="ViTConfig"):
    import transformers

    return getattr(transformers, cls_name)(
        hidden_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=512,
        image_size=IMAGE,
        patch_size=8,
        num_labels=10,
    )


def _vit():
    from transformers import ViTModel

    return ViTModel(_vit_config()), _image_inputs()


def _vit_image_classification():
    from transformers import ViTForImageClassification

    return ViTForImageClassification(_vit_config()), _image_inputs()


def _deit():
    from transformers import DeiTModel

    return DeiTModel(_vit_config("DeiTConfig")), _image_inputs()


def _deit_distilled():
    from transformers import DeiTForImageClassificationWithTeacher

    return DeiTForImageClassificationWithTeacher(_vit_config("DeiTConfig")), _image_inputs()


def _swin_config():
    from transformers import SwinConfig

    return SwinConfig(
        image_size=IMAGE,
        patch_size=4,
        embed_dim=32,
        depths=[2, 2, 2],
        num_heads=[2, 4, 8],
        window_size=4,
        num_labels=10,
    )


def _swin():
    from transformers import SwinModel

    return SwinModel(_swin_config()), _image_inputs()


def _swin_image_classification():
    from transformers import SwinForImageClassification

    return SwinForImageClassification(_swin_config()), _image_inputs()


# --- convolutional networks ---


def _convnext_config():
    from transformers import ConvNextConfig

    return ConvNextConfig(hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 2, 1], num_labels=10)


def _convnext():
    from transformers import ConvNextModel

    return ConvNextModel(_convnext_config()), _image_inputs()


def _convnext_image_classification():
    from transformers import ConvNextForImageClassification

    return ConvNextForImageClassification(_convnext_config()), _image_inputs()


def _resnet_basic():
    # ResNet-18 layout (basic blocks), narrower.
    from transformers import ResNetConfig, ResNetModel

    config = ResNetConfig(
        embedding_size=32, hidden_sizes=[32, 64, 128, 256], depths=[2, 2, 2, 2], layer_type="basic"
    )
    return ResNetModel(config), _image_inputs()


def _resnet50_classification():
    # The published ResNet-50 configuration.
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(
        embedding_size=64,
        hidden_sizes=[256, 512, 1024, 2048],
        depths=[3, 4, 6, 3],
        layer_type="bottleneck",
        num_labels=1000,
    )
    return ResNetForImageClassification(config), _image_inputs()


def _regnet_config():
    from transformers import RegNetConfig

    return RegNetConfig(embedding_size=32, hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 2, 1], groups_width=16,
                        num_labels=10)


def _regnet():
    from transformers import RegNetModel

    return RegNetModel(_regnet_config()), _image_inputs()


def _regnet_image_classification():
    from transformers import RegNetForImageClassification

    return RegNetForImageClassification(_regnet_config()), _image_inputs()


def _mobilenet_v2():
    # The published MobileNetV2 1.0 configuration.
    from transformers import MobileNetV2Config, MobileNetV2Model

    return MobileNetV2Model(MobileNetV2Config(depth_multiplier=1.0, image_size=IMAGE)), _image_inputs()


def _mobilenet_v2_classification():
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    config = MobileNetV2Config(depth_multiplier=0.5, image_size=IMAGE, num_labels=10)
    return MobileNetV2ForImageClassification(config), _image_inputs()


def _efficientnet_config():
    # EfficientNet-B0 coefficients.
    from transformers import EfficientNetConfig

    return EfficientNetConfig(width_coefficient=1.0, depth_coefficient=1.0, image_size=IMAGE, hidden_dim=1280,
                              num_labels=10)


def _standard_convnet_init(module):
    # transformers initialises EfficientNet's convolutions and batch-norm
    # scales from N(0, 0.02), so activations fall below the batch norms' eps
    # (1e-3) within a few layers and calibrated statistics cannot restore them
    # (logits ~1e-30). He-initialised convolutions and unit scales keep them
    # at a trained network's magnitude.
    for m in module.modules():
        if isinstance(m, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, torch.nn.BatchNorm2d):
            torch.nn.init.ones_(m.weight)
            torch.nn.init.zeros_(m.bias)
    return module


def _efficientnet():
    from transformers import EfficientNetModel

    return _standard_convnet_init(EfficientNetModel(_efficientnet_config())), _image_inputs()


def _efficientnet_image_classification():
    from transformers import EfficientNetForImageClassification

    model = EfficientNetForImageClassification(_efficientnet_config())
    return _standard_convnet_init(model), _image_inputs()


# --- custom modules with data-dependent control flow ---


class BranchOnSum(torch.nn.Module):
    """Takes one of two paths depending on the sign of a reduction."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:
            return torch.relu(self.b(h))
        return torch.tanh(self.b(-h))


class HaltingLoop(torch.nn.Module):
    """Repeats a block until the activations' norm falls below a bound; the
    trip count depends on the data."""

    def __init__(self):
        super().__init__()
        self.block = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = x
        steps = 0
        while h.norm() > 1.0 and steps < 8:
            h = 0.5 * torch.tanh(self.block(h)) + 0.25 * h
            steps += 1
        return h, torch.full((1,), float(steps))


class ArgmaxRouting(torch.nn.Module):
    """Routes the batch to one of several experts chosen by a data-dependent
    argmax that is turned into a Python int."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(16, 3)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(16, 8) for _ in range(3))

    def forward(self, x):
        choice = int(self.gate(x).mean(dim=0).argmax())
        return self.experts[choice](x)


class MaskedSelect(torch.nn.Module):
    """Keeps the positive entries (a data-dependent number of them) and
    reduces them: the intermediate has a data-dependent shape."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.proj(x)
        kept = h[h > 0]
        return torch.stack([kept.sum(), kept.numel() * torch.ones(())]), torch.sigmoid(h)


class EarlyExitClassifier(torch.nn.Module):
    """A conv stem and two heads; returns the first head's answer when it is
    confident, else runs a deeper stage (a per-input branch)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())
        self.head1 = torch.nn.Linear(8, 4)
        self.deep = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU())
        self.head2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = self.stem(x)
        p = torch.softmax(self.head1(h.mean(dim=(2, 3))), dim=-1)
        if p.max() > 0.5:
            return p
        return torch.softmax(self.head2(self.deep(h).mean(dim=(2, 3))), dim=-1)


def _negated(args):
    return tuple(-a for a in args)


def _scaled(factor):
    def scale(args):
        return tuple(factor * a for a in args)

    return scale


def _custom(module_class, shape, scale=1.0):
    def build():
        def make(gen):
            return {"x": scale * torch.randn(*shape, generator=gen)}

        return module_class(), make

    return build


MODELS = {
    m.name: m
    for m in [
        ZooModel("bert", "BERT", _bert),
        ZooModel("bert_sequence_classification", "BERT", _bert_sequence_classification),
        ZooModel("bert_masked_lm", "BERT", _bert_masked_lm),
        ZooModel("distilbert", "DistilBERT", _distilbert),
        ZooModel("distilbert_question_answering", "DistilBERT", _distilbert_question_answering),
        ZooModel("roberta", "RoBERTa", _roberta),
        ZooModel("roberta_token_classification", "RoBERTa", _roberta_token_classification),
        ZooModel("albert", "ALBERT", _albert),
        ZooModel("albert_masked_lm", "ALBERT", _albert_masked_lm),
        ZooModel("gpt2", "GPT-2", _gpt2),
        ZooModel("gpt2_lm_head", "GPT-2", _gpt2_lm_head),
        ZooModel("t5_encoder", "T5 encoder", _t5_encoder),
        ZooModel("t5_encoder_gated_gelu", "T5 encoder", _t5_encoder_gated),
        ZooModel("bart_encoder", "BART encoder", _bart_encoder),
        ZooModel("vit", "ViT", _vit),
        ZooModel("vit_image_classification", "ViT", _vit_image_classification),
        ZooModel("deit", "DeiT", _deit),
        ZooModel("deit_distilled", "DeiT", _deit_distilled),
        ZooModel("swin", "Swin", _swin),
        ZooModel("swin_image_classification", "Swin", _swin_image_classification),
        ZooModel("convnext", "ConvNeXt", _convnext),
        ZooModel("convnext_image_classification", "ConvNeXt", _convnext_image_classification),
        ZooModel("resnet_basic", "ResNet", _resnet_basic),
        ZooModel("resnet50_classification", "ResNet", _resnet50_classification, note="published ResNet-50 size"),
        ZooModel("regnet", "RegNet", _regnet),
        ZooModel("regnet_image_classification", "RegNet", _regnet_image_classification),
        ZooModel("mobilenet_v2", "MobileNetV2", _mobilenet_v2, note="published MobileNetV2 1.0 size"),
        ZooModel("mobilenet_v2_classification", "MobileNetV2", _mobilenet_v2_classification),
        ZooModel("efficientnet", "EfficientNet", _efficientnet, note="EfficientNet-B0 coefficients"),
        ZooModel("efficientnet_image_classification", "EfficientNet", _efficientnet_image_classification),
        ZooModel(
            "branch_on_sum", "custom control flow", _custom(BranchOnSum, (4, 16)),
            control_flow=True, exportable=False, alternate=_negated,
        ),
        ZooModel(
            "halting_loop", "custom control flow", _custom(HaltingLoop, (4, 16), 2.0),
            control_flow=True, exportable=False, alternate=_scaled(0.1),
        ),
        ZooModel(
            "argmax_routing", "custom control flow", _custom(ArgmaxRouting, (4, 16)),
            control_flow=True, exportable=False, alternate=_negated,
        ),
        # torch.export captures the boolean mask with an unbacked size.
        ZooModel(
            "masked_select", "custom control flow", _custom(MaskedSelect, (4, 16)),
            control_flow=True, alternate=_negated,
        ),
        ZooModel(
            "early_exit_classifier", "custom control flow", _custom(EarlyExitClassifier, (1, 3, 16, 16)),
            control_flow=True, exportable=False, alternate=_scaled(100.0),
        ),
    ]
}


def _seed(name):
    # A seed per model that does not depend on Python's hash randomisation.
    return sum(ord(c) * 31**i for i, c in enumerate(name)) % (2**31)


def _calibrate_batch_norms(module, make_inputs, seed):
    """Sets every BatchNorm's running statistics to those of a random batch.

    With random weights and the initial statistics (mean 0, variance 1),
    activations shrink or grow layer after layer until a tolerance check
    means nothing; statistics taken from data keep each layer near unit
    scale, as in a trained model.
    """
    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: one batch sets the statistics
    gen = torch.Generator().manual_seed(seed)
    batch = [make_inputs(gen) for _ in range(4)]
    feeds = {k: torch.cat([b[k] for b in batch]) for k in batch[0]}
    module.train()
    with torch.no_grad():
        module(**feeds)


def build(name):
    """The module (eval mode, random weights from a fixed seed) and its
    example inputs as {name: tensor}."""
    entry = MODELS[name]
    torch.manual_seed(_seed(name))
    module, make_inputs = entry.builder()
    _calibrate_batch_norms(module, make_inputs, _seed(name) + 1)
    module.eval()
    config = getattr(module, "config", None)
    if config is not None and hasattr(config, "use_cache"):
        config.use_cache = False
    return module, make_inputs(torch.Generator().manual_seed(_seed(name)))


class PositionalAdapter(torch.nn.Module):
    """Calls `model` with keyword inputs given positionally (in `names`
    order) and returns the tensors of its output as a flat tuple."""

    def __init__(self, model, names):
        super().__init__()
        self.model = model
        self.names = tuple(names)

    def forward(self, *args):
        out = self.model(**dict(zip(self.names, args)))
        return tuple(flatten_outputs(out))


def flatten_outputs(out):
    """The tensors of a model output (tensor, tuple, dict or ModelOutput) in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):  # ModelOutput is an OrderedDict of its non-None fields
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for item in out for t in flatten_outputs(item)]
    return []


def adapt(module, inputs):
    """(module taking positional inputs and returning a flat tuple, the inputs as a tuple)."""
    names = list(inputs)
    return PositionalAdapter(module, names).eval(), tuple(inputs[n] for n in names)
