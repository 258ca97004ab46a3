"""Test support for the torch_migraphx example scripts: small stand-ins for torchvision's resnet50 (torchvision is not installed
here and pretrained weights cannot be downloaded): same layer kinds."""
import torch

# torch_migraphx's examples move models and inputs to the GPU with .cuda();
# Kiln runs on the host, so without CUDA .cuda() returns its receiver.
if not torch.cuda.is_available():
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self


class Bottleneck(torch.nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(ch, ch, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(ch)
        self.conv2 = torch.nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(ch)
        self.relu = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + x)


class TinyResNet(torch.nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.relu = torch.nn.ReLU(inplace=True)
        self.maxpool = torch.nn.MaxPool2d(3, 2, 1)
        self.layer1 = Bottleneck(16)
        self.avgpool = torch.nn.AdaptiveAvgPool2d((1, 1))
        self.fc = torch.nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet50(weights=None):
    torch.manual_seed(0)
    model = TinyResNet()
    with torch.no_grad():  # non-trivial batch norm statistics
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model
