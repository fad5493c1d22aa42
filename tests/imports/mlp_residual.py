"""A hand-written module for `ampscope import`: two residual blocks of
Linear-GELU-LayerNorm-Linear, then a linear head, on [B, T, C] inputs with an MSE target."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.fc1 = nn.Linear(c, hidden)
        self.act = nn.GELU()
        self.ln = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, c)

    def forward(self, x):
        return x + self.fc2(self.ln(self.act(self.fc1(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(8, 16), Block(8, 16)])
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def model():
    torch.manual_seed(0)
    return Net()


def inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(4, 6, 8, generator=g),)


LOSS = "mse"


def target():
    g = torch.Generator().manual_seed(2)
    return torch.randn(4, 6, 5, generator=g)
