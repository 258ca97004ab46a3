"""DenseNet-121 in plain torch.nn, after Huang et al., "Densely Connected
Convolutional Networks" (CVPR 2017), the ImageNet variant with bottleneck
layers and compression 0.5 (DenseNet-BC): growth rate 32, dense blocks of 6,
12, 24 and 16 layers, bottleneck width 4 x growth, 7x7 stem with 64 channels.

transformers has no DenseNet, and timm needs torchvision (no CPU build of it
for this torch), so the network is written here. It has 7,978,856 parameters,
the published count.
"""
import torch
from torch import nn


def _norm_relu_conv(in_channels, out_channels, kernel):
    # Pre-activation order (BN, ReLU, conv) is what makes concatenated
    # features reusable: each layer normalises its whole input itself.
    return [
        nn.BatchNorm2d(in_channels),
        nn.ReLU(inplace=True),
        nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2, bias=False),
    ]


class DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1 to bn_size * growth channels, then BN-ReLU-Conv3x3 to
    `growth` new feature maps."""

    def __init__(self, in_channels, growth, bn_size):
        super().__init__()
        width = bn_size * growth
        self.body = nn.Sequential(*_norm_relu_conv(in_channels, width, 1), *_norm_relu_conv(width, growth, 3))

    def forward(self, features):
        return self.body(features)


class DenseBlock(nn.Module):
    """`layers` dense layers; each sees the concatenation of the block input
    and every earlier layer's output, and the block returns all of them."""

    def __init__(self, layers, in_channels, growth, bn_size):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(in_channels + i * growth, growth, bn_size) for i in range(layers))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    """Between blocks: BN-ReLU-Conv1x1 halving the channels, 2x2 average pool."""

    def __init__(self, in_channels, out_channels):
        super().__init__(*_norm_relu_conv(in_channels, out_channels, 1), nn.AvgPool2d(2, stride=2))


class DenseNet(nn.Module):
    def __init__(self, growth=32, block_layers=(6, 12, 24, 16), stem_channels=64, bn_size=4, num_classes=1000):
        super().__init__()
        stages = [
            nn.Conv2d(3, stem_channels, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(stem_channels),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        ]
        channels = stem_channels
        for index, layers in enumerate(block_layers):
            stages.append(DenseBlock(layers, channels, growth, bn_size))
            channels += layers * growth
            if index + 1 < len(block_layers):
                stages.append(Transition(channels, channels // 2))
                channels //= 2
        stages += [nn.BatchNorm2d(channels), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*stages)
        self.classifier = nn.Linear(channels, num_classes)
        self._init_weights()

    def _init_weights(self):
        # He-normal convolutions as in the paper's reference code; zero biases.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, pixel_values):
        x = self.features(pixel_values)
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def densenet121(num_classes=1000):
    return DenseNet(growth=32, block_layers=(6, 12, 24, 16), stem_channels=64, bn_size=4, num_classes=num_classes)
