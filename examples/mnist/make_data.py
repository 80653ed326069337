"""Generate a small synthetic MNIST-shaped data set (no downloads, deterministic).

Each class has a fixed template made of a few random strokes; a sample is its class
template plus a fainter template of a random class, shifted by up to 2 pixels, scaled in
brightness and covered in noise, so a small CNN learns it in an epoch or two while a
constant guess stays at 10%.

    python examples/mnist/make_data.py data/mnist            # 4,096 train + 1,024 test
    python examples/mnist/make_data.py data/mnist --train 512 --test 128

Writes <out>/train/data.pt and <out>/test/data.pt, each {"images": uint8 [N,1,28,28],
"labels": int64 [N]}: point the "training" and "test" channels at those folders.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

SIZE = 28
CLASSES = 10


def _templates(gen: torch.Generator) -> torch.Tensor:
    """Ten 28x28 templates in [0, 1], each 3 thick random line segments."""
    out = torch.zeros(CLASSES, SIZE, SIZE)
    steps = torch.linspace(0, 1, 40)
    for c in range(CLASSES):
        for _ in range(3):
            x0, y0, x1, y1 = (torch.rand(4, generator=gen) * 16 + 6).tolist()
            xs = (x0 + (x1 - x0) * steps).round().long()
            ys = (y0 + (y1 - y0) * steps).round().long()
            for dx in (-1, 0, 1):
                for dy in (-1, 0, 1):
                    out[c, (ys + dy).clamp(0, SIZE - 1), (xs + dx).clamp(0, SIZE - 1)] = 1.0
    return out


def make_split(n: int, templates: torch.Tensor, gen: torch.Generator) -> dict[str, torch.Tensor]:
    labels = torch.randint(0, CLASSES, (n,), generator=gen)
    # A sample: its class template plus a faint stroke of another class, shifted, dimmed, noisy.
    distractors = templates[torch.randint(0, CLASSES, (n,), generator=gen)]
    images = (templates[labels] + 0.35 * distractors).clamp(0, 1)
    shifts = torch.randint(-2, 3, (n, 2), generator=gen)
    for i in range(n):
        images[i] = torch.roll(images[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(0, 1))
    brightness = 0.5 + 0.5 * torch.rand(n, 1, 1, generator=gen)
    noise = 0.5 * torch.rand(n, SIZE, SIZE, generator=gen)
    pixels = (images * brightness + noise).clamp(0, 1)
    return {"images": (pixels * 255).to(torch.uint8).unsqueeze(1), "labels": labels}


def generate(out: Path, n_train: int = 4096, n_test: int = 1024, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    templates = _templates(gen)
    for split, n in (("train", n_train), ("test", n_test)):
        (out / split).mkdir(parents=True, exist_ok=True)
        torch.save(make_split(n, templates, gen), out / split / "data.pt")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="output folder (gets train/ and test/)")
    parser.add_argument("--train", type=int, default=4096, help="training images")
    parser.add_argument("--test", type=int, default=1024, help="test images")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    generate(args.out, args.train, args.test, args.seed)
    print(f"wrote {args.train} training and {args.test} test images to {args.out}/{{train,test}}/data.pt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
