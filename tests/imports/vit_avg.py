"""timm's vit_tiny_patch16_224 without a class token (a mean-pooled head) at a small image (32x32, patch 16), depth 2, no download."""
import timm
import torch


def model():
    torch.manual_seed(0)
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32,
                             num_classes=10, depth=2, class_token=False, global_pool="avg")


def inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(2, 3, 32, 32, generator=g),)


LOSS = "cross_entropy"


def target():
    return torch.tensor([3, 7])
