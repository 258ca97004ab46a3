"""torchvision's DenseNet in small, for the int8 tests that quantize it with ONNX Runtime: stem convolution +
ReLU + max pooling, two dense blocks (batch norm + ReLU over the concatenated features, 1 x 1 then 3 x 3
convolution) with a transition between them (batch norm + ReLU, 1 x 1 convolution, average pooling), the
final batch norm + ReLU, then either a 1 x 1 convolution head or, as DenseNet-121 ends, the global average
pool and a linear classifier."""
import torch


class SmallDenseNet(torch.nn.Module):
    def __init__(self, stem, growth, classes, global_pool, layers=3):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, stem, 3, stride=2, padding=1)
        self.pool = torch.nn.MaxPool2d(3, 2, 1)
        self.global_pool = global_pool
        width = stem
        self.blocks = torch.nn.ModuleList()
        for block in range(2):
            self.blocks.append(torch.nn.ModuleList(torch.nn.Sequential(
                torch.nn.BatchNorm2d(width + i * growth), torch.nn.ReLU(),
                torch.nn.Conv2d(width + i * growth, 4 * growth, 1, bias=False), torch.nn.BatchNorm2d(4 * growth),
                torch.nn.ReLU(), torch.nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)) for i in range(layers)))
            width += layers * growth
            if block == 0:
                self.transition = torch.nn.Sequential(torch.nn.BatchNorm2d(width), torch.nn.ReLU(),
                                                      torch.nn.Conv2d(width, width // 2, 1, bias=False),
                                                      torch.nn.AvgPool2d(2, 2))
                width //= 2
        self.final = torch.nn.BatchNorm2d(width)
        self.head = torch.nn.Linear(width, classes) if global_pool else torch.nn.Conv2d(width, classes, 1)
        for m in self.modules():
            if isinstance(m, torch.nn.BatchNorm2d):  # statistics away from the identity, as trained ones are
                torch.nn.init.uniform_(m.weight, 0.5, 1.5)
                torch.nn.init.uniform_(m.bias, -0.5, 0.5)
                torch.nn.init.uniform_(m.running_mean, -0.2, 0.2)
                torch.nn.init.uniform_(m.running_var, 0.5, 2.0)

    def forward(self, x):
        x = self.pool(torch.relu(self.stem(x)))
        for k, block in enumerate(self.blocks):
            features = [x]
            for layer in block:
                features.append(layer(torch.cat(features, 1)))
            x = torch.cat(features, 1)
            if k == 0:
                x = self.transition(x)
        x = torch.relu(self.final(x))
        return self.head(x.mean((2, 3)) if self.global_pool else x)
