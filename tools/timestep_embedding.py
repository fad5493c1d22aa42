#!/usr/bin/env python3
"""timestep_embedding.py: the sinusoidal timestep embedding cases-draft/unet-block-*.case reads
as a constant, as diffusers' UNet2DConditionModel computes it for Stable Diffusion 1.5.

SD 1.5's UNet config: block_out_channels[0] = 320, flip_sin_to_cos = True, freq_shift = 0,
so time_proj is Timesteps(320, True, 0), i.e. diffusers.models.embeddings.
get_timestep_embedding(t, 320, flip_sin_to_cos=True, downscale_freq_shift=0) (float32); the
model casts it to the sample's dtype (`t_emb.to(dtype=sample.dtype)`) before
time_embedding (linear 320 -> 1280, SiLU, linear 1280 -> 1280). A scalar timestep is
expanded over the batch (`timesteps.expand(sample.shape[0])`), so one row serves every
sample: written as [320], without a batch dim.

Writes cases/data/sd-timestep-emb.npy (float32 [320], timestep 500).
Usage: /opt/torch-venv/bin/python tools/timestep_embedding.py [--timestep T]
"""
import argparse
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timestep", type=int, default=500)
    ap.add_argument("--out", default=os.path.join(ROOT, "cases", "data", "sd-timestep-emb.npy"))
    a = ap.parse_args()
    from diffusers.models.embeddings import get_timestep_embedding
    emb = get_timestep_embedding(torch.tensor([a.timestep]), 320, flip_sin_to_cos=True,
                                 downscale_freq_shift=0)
    assert emb.dtype == torch.float32 and emb.shape == (1, 320)
    np.save(a.out, emb[0].numpy())
    print(f"{a.out}: [320] float32, timestep {a.timestep}", file=sys.stderr)


if __name__ == "__main__":
    main()
