"""A CNN with depthwise-separable convolutions (MobileNet v1's block): conv-BN-ReLU, depthwise 3x3, pointwise 1x1, pooled linear head."""
import torch
import torch.nn as nn


def block(cin, cout, stride):
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU(),
        nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.Sequential(block(8, 16, 1), block(16, 32, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def model():
    torch.manual_seed(0)
    return Net()


def inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(2, 3, 16, 16, generator=g),)


LOSS = "cross_entropy"


def target():
    return torch.tensor([1, 4])
