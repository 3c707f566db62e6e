"""The SPT/LSA paper's own ViT (aanna0701/SPT_LSA_ViT), from its code: counts and a fixture.

    python studies/spt_lsa_counts.py PAPER_CODE_DIR [--fixture OUT.npz]

Run in a scratch virtual environment with torch, einops and fvcore (never a dependency of the
toolkit): PAPER_CODE_DIR is a checkout of the paper's repository (its `models/` and `utils/`).
Builds the model with the arguments its `models/create_model.py` passes for `--model vit`
(vanilla) and `--model vit --is_SPT --is_LSA` (create_model itself imports Swin, which needs
timm: the ViT branch is written out here), for CIFAR-10 (32x32, patch 4, 10 classes) and
Tiny-ImageNet (64x64, patch 8, 200 classes), and prints one JSON line per model: trainable
parameters, the MACs of its matrix work counted by torch's FlopCounterMode (FLOPs / 2: every
matmul, linear and einsum, the toolkit's convention), and fvcore's count (which adds 5
operations per element of each LayerNorm). tests/test_paper_cifar.py pins them.

It also prints what main.py's sampler draws in an epoch (`sampler_epoch`). `--fixture` also
writes that, and for both variants a small model of the same code (dim 24, depth 2,
3 heads x 8, patch 4 at 32x32, 10 classes) with every parameter perturbed off its
initialisation, two inputs and the logits it gives in eval mode: the test loads the weights
into the toolkit's model and compares the logits.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# (dataset, image size, classes): the paper's create_model picks patch 4 at 32, else 8
WORKLOADS = (("CIFAR10", 32, 10), ("T-IMNET", 64, 200))
VARIANTS = {"vit": (False, False), "vit-lsa": (True, True)}  # toolkit model -> (SPT, LSA)
# the fixture's small model: the paper's ViT class with these arguments
SMALL = {"dim": 24, "depth": 2, "heads": 3, "dim_head": 8, "mlp_dim_ratio": 2}


def build(code: Path, size: int, classes: int, spt: bool, lsa: bool, **small):
    """The paper code's ViT as create_model's `vit` branch builds it (main.py's --sd 0.1)."""
    sys.path.insert(0, str(code))
    from models.vit import ViT

    arch = {"dim": 192, "depth": 9, "heads": 12, "dim_head": 192 // 12, "mlp_dim_ratio": 2}
    return ViT(
        img_size=size, patch_size=4 if size == 32 else 8, num_classes=classes,
        stochastic_depth=0.1, is_SPT=spt, is_LSA=lsa, **{**arch, **small},
    ).eval()  # fmt: skip


def counts(code: Path) -> list[dict]:
    """One row per (variant, workload): parameters, matmul MACs, fvcore's count."""
    import torch
    from fvcore.nn import FlopCountAnalysis
    from torch.utils.flop_counter import FlopCounterMode

    rows = []
    for model_name, (spt, lsa) in VARIANTS.items():
        for dataset, size, classes in WORKLOADS:
            net = build(code, size, classes, spt, lsa)
            x = torch.zeros(1, 3, size, size)
            with torch.no_grad(), FlopCounterMode(display=False) as mode:
                net(x)
            fvcore = FlopCountAnalysis(net, x)
            fvcore.unsupported_ops_warnings(False)
            fvcore.uncalled_modules_warnings(False)
            rows.append(
                {
                    "model": model_name,
                    "dataset": dataset,
                    "image": size,
                    "classes": classes,
                    "params": sum(p.numel() for p in net.parameters() if p.requires_grad),
                    "macs": mode.get_total_flops() // 2,
                    "fvcore": int(fvcore.total()),
                }
            )
    return rows


def sampler_epoch(code: Path, images: int = 50_000, batch: int = 128) -> dict:
    """main.py's training sampler, `RASampler(len(train_dataset), args.batch_size, 1, args.ra,
    shuffle=True, drop_last=True)` at its default --ra 3 on CIFAR-10's 50,000 images: batches
    per epoch, images drawn, and the most times one image comes in a pass of `images` draws."""
    import numpy as np

    sys.path.insert(0, str(code))
    from utils.sampler import RASampler

    sampler = RASampler(images, batch, 1, 3, shuffle=True, drop_last=True)
    drawn = np.concatenate([np.asarray(b) for b in sampler])
    passes = [np.bincount(drawn[i : i + images]).max() for i in range(0, len(drawn), images)]
    return {"batches": len(sampler), "drawn": len(drawn), "most_per_pass": int(max(passes))}


def fixture(code: Path, out: Path) -> None:
    """The small models' parameters (`MODEL/NAME`), inputs `x` (NCHW) and logits (`MODEL/y`),
    float32; `sampler`: sampler_epoch's batches, images drawn and most per pass, int64."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    x = torch.randn(2, 3, 32, 32)
    arrays = {"x": x.numpy()}
    for model_name, (spt, lsa) in VARIANTS.items():
        net = build(code, 32, 10, spt, lsa, **SMALL)
        with torch.no_grad():
            for p in net.parameters():  # off the initialisation: biases, norms, LSA scales
                p.mul_(1 + 0.2 * torch.randn_like(p)).add_(0.05 * torch.randn_like(p))
            arrays[f"{model_name}/y"] = net(x).numpy()
        arrays |= {f"{model_name}/{k}": v.numpy() for k, v in net.state_dict().items()}
    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    arrays["sampler"] = np.array(list(sampler_epoch(code).values()), np.int64)
    np.savez_compressed(out, **arrays)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("code", type=Path, help="checkout of aanna0701/SPT_LSA_ViT")
    parser.add_argument("--fixture", type=Path, help="write the small models' npz here")
    args = parser.parse_args(argv)
    for row in counts(args.code):
        print(json.dumps(row))
    print(json.dumps({"sampler": sampler_epoch(args.code)}))
    if args.fixture:
        fixture(args.code, args.fixture)
        print(f"wrote {args.fixture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
