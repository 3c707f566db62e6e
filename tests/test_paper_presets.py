"""The ShiftViT paper's ImageNet presets: architecture, size and compute against the paper.

Each preset is built once, at 224x224x3 and 1000 classes. Its parameters and MACs are pinned
as exact integers of this implementation, checked against an independent count of the
official PyTorch model (microsoft/SPACH models/shiftvit.py, written out below from its
modules), and held within a stated tolerance of the paper's table.
"""

from __future__ import annotations

import pytest

from toolkit.data import Augmentation
from toolkit.models import build_model, count_macs, get_preset
from toolkit.models.architectures import ShiftViTArch
from toolkit.models.paper_figures import PAPER_FIGURES
from toolkit.models.presets import IMAGENET, PRESET_WORKLOADS, PRESETS
from toolkit.models.recipes import TrainRecipe

# preset -> (parameters, MACs per image) of this implementation at 224x224x3, 1000 classes.
# Parameters round to the paper's millions. Against the official model they are 2 x width
# short: the official patch embedding ends in a GroupNorm (weight and bias per channel), this
# one has no norm there. FLOPs in the paper are MACs (Swin's convention) of which this count
# leaves out normalisation; each comment says how far the paper's figure is and why.
PINNED = {
    # 2.963 G vs 3.0 G (-1.2%): the paper rounds; counting every norm at 5 operations per
    # element (fvcore's convention) would give 2.975 G
    "shift-t-light": (19_608_136, 2_963_159_040),
    # 4.582 G vs 4.5 G (+1.8%): more than the paper, so no omitted work explains it; the
    # paper's figure looks cut, not rounded, from 4.58 G (the norms would make it 4.61 G)
    "shift-t": (28_566_472, 4_581_636_096),
    # 8.743 G vs 8.8 G (-0.6%): the norms, uncounted here, make it 8.79 G
    "shift-s": (50_303_944, 8_743_434_240),
    # 15.537 G vs 15.6 G (-0.4%): the norms, uncounted here, make it 15.60 G
    "shift-b": (89_026_152, 15_537_119_232),
}
MACS_TOLERANCE = 0.02  # relative, against the paper's FLOPs (given to 0.1 G)

# the official registry's arguments (models/registry.py) per preset:
# embed_dim, depths, mlp_ratio, n_div, drop_path_rate
OFFICIAL = {
    "shift-t-light": (96, (2, 2, 6, 2), 4, 12, 0.2),  # shiftvit_light_tiny
    "shift-t": (96, (6, 8, 18, 6), 2, 12, 0.2),  # shiftvit_r2_tiny
    "shift-s": (96, (10, 18, 36, 10), 2, 12, 0.4),  # shiftvit_r2_small
    "shift-b": (128, (10, 18, 36, 10), 2, 16, 0.6),  # shiftvit_r2_base
}


def official_counts(dim: int, depths: tuple[int, ...], mlp_ratio: float, classes: int):
    """(parameters, MACs) of the official ShiftViT at 224x224 from its modules: PatchEmbed
    (4x4 conv with bias + GroupNorm), per block a norm and two 1x1 convs with biases, per
    merge a norm and a 2x2 conv without bias, the final norm and the linear head."""
    side = 224 // 4
    params = 3 * 16 * dim + dim + 2 * dim
    macs = side * side * 3 * 16 * dim
    for stage, depth in enumerate(depths):
        width, tokens = dim * 2**stage, (side // 2**stage) ** 2
        hidden = int(width * mlp_ratio)
        params += depth * (2 * width + 2 * width * hidden + hidden + width)
        macs += depth * tokens * 2 * width * hidden
        if stage < len(depths) - 1:
            params += 2 * width + 4 * width * 2 * width
            macs += tokens // 4 * 4 * width * 2 * width
    last = dim * 2 ** (len(depths) - 1)
    params += 2 * last + last * classes + classes
    macs += last * classes
    return params, macs


@pytest.fixture(scope="module", params=list(PINNED))
def built(request):
    preset = get_preset("shiftvit", request.param)
    return preset, build_model(preset, IMAGENET.input_shape, IMAGENET.num_classes)


def test_counts_are_pinned_and_match_the_official_model_and_the_paper(built):
    preset, net = built
    params, macs = net.count_params(), count_macs(net)
    assert (params, macs) == PINNED[preset.name]
    dim, depths, ratio, _, _ = OFFICIAL[preset.name]
    official_params, official_macs = official_counts(dim, depths, ratio, IMAGENET.num_classes)
    assert params == official_params - 2 * dim  # no norm after the patch embedding
    assert macs == official_macs
    paper = PAPER_FIGURES[preset.model, preset.name]
    assert round(params / 1e6) == paper.params_m
    assert abs(macs / 1e9 - paper.gflops) <= MACS_TOLERANCE * paper.gflops


def test_architecture_is_the_official_registrys(built):
    preset, net = built
    dim, depths, ratio, n_div, drop_path = OFFICIAL[preset.name]
    assert preset.arch == ShiftViTArch(
        image_size=224, patch_size=4, dim=dim, depths=depths, num_div=n_div, shift_pixel=1,
        mlp_ratio=ratio, epsilon=1e-5, drop_path=drop_path, dropout=0.0,
    )  # fmt: skip
    assert net.input_shape == (None, 224, 224, 3)
    assert net.output_shape == (None, 1000)
    # 224 input is the preset's own size: no Resizing inside, patches straight from the image
    assert "resize" not in [layer.name for layer in net.layers]


def test_recipe_is_the_papers_where_the_toolkit_implements_it():
    # AdamW at lr 1e-3 for the global batch 1024 (5e-4 per 512), 20 warm-up epochs from 1e-6
    # of 300, cosine, weight decay 0.05, flip, resize + random crop, random erasing 0.25
    recipe = TrainRecipe(
        batch_size=1024, epochs=300, lr_start=1e-6, lr_max=1e-3, weight_decay=0.05,
        warmup_fraction=20 / 300,
        augmentation=Augmentation(flip=True, crop_resize=(256, 224), erasing=0.25),
    )  # fmt: skip
    for name in PINNED:
        assert get_preset("shiftvit", name).train == recipe
    assert 5e-4 * recipe.batch_size / 512 == recipe.lr_max  # the official linear scaling
    steps_per_epoch = 1_281_167 // recipe.batch_size  # ImageNet-1k's training images
    assert int(recipe.epochs * steps_per_epoch * recipe.warmup_fraction) == 20 * steps_per_epoch


def test_the_imagenet_presets_are_the_papers_and_made_for_imagenet():
    imagenet = {name for (_, name) in PAPER_FIGURES if PRESET_WORKLOADS.get(name) == IMAGENET}
    assert imagenet == set(PINNED) == set(OFFICIAL)
    assert {("shiftvit", name) for name in PINNED} <= set(PAPER_FIGURES)
    assert {n for n, w in PRESET_WORKLOADS.items() if w == IMAGENET} == set(PINNED)
    assert set(PINNED) <= set(PRESETS["shiftvit"])
    assert not set(PINNED) & (set(PRESETS["vit"]) | set(PRESETS["vit-lsa"]))
