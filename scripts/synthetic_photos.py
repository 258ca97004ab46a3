"""Deterministic images that look like photographs to a network's statistics,
for calibrating and evaluating quantized image models without downloading a
data set: a smooth background (two colours blended along a random direction,
plus low-frequency waves whose amplitude falls as 1/frequency, as in natural
images), a handful of solid shapes with soft edges and shading, and a little
sensor noise. Pixel values lie in [0, 1] and are then normalized with the
ImageNet mean and standard deviation, as image processors feed such models.

Calibrating on i.i.d. Gaussian noise instead would set activation ranges that
no real picture produces (every pixel independent, no flat regions, no edges).
"""
import numpy as np

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])


def _background(rng, x, y):
    angle = rng.uniform(0, 2 * np.pi)
    ramp = (np.cos(angle) * (x - 0.5) + np.sin(angle) * (y - 0.5)) + 0.5
    ramp = np.clip(ramp, 0, 1)
    first, second = rng.uniform(0.05, 0.95, (2, 3))
    image = first[:, None, None] * (1 - ramp) + second[:, None, None] * ramp
    for _ in range(6):
        frequency = rng.uniform(0.5, 6.0)  # cycles across the image
        direction = rng.uniform(0, 2 * np.pi)
        phase = rng.uniform(0, 2 * np.pi)
        wave = np.cos(2 * np.pi * frequency * (np.cos(direction) * x + np.sin(direction) * y) + phase)
        # Mostly brightness, a little colour: channels of real photos are strongly correlated.
        tint = 1.0 + rng.uniform(-0.3, 0.3, 3)
        image += (0.12 / frequency) * tint[:, None, None] * wave
    return image


def _paint_shape(rng, image, x, y, pixel):
    cx, cy = rng.uniform(0, 1, 2)
    rx, ry = rng.uniform(0.04, 0.3, 2)
    if rng.random() < 0.5:  # an ellipse
        distance = np.sqrt(((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2) - 1.0
        edge = distance * min(rx, ry)
    else:  # a rectangle
        edge = np.maximum(np.abs(x - cx) - rx, np.abs(y - cy) - ry)
    softness = rng.uniform(0.5, 3.0) * pixel
    coverage = 1.0 / (1.0 + np.exp(np.clip(edge / softness, -50, 50)))
    colour = rng.uniform(0, 1, 3)
    light = rng.uniform(0, 2 * np.pi)  # shading across the shape
    shade = 1.0 + 0.25 * (np.cos(light) * (x - cx) / rx + np.sin(light) * (y - cy) / ry).clip(-1, 1)
    painted = colour[:, None, None] * shade[None]
    image[:] = image * (1 - coverage[None]) + painted * coverage[None]


def synthetic_photos(rng, count, size=224):
    """`count` images as float32 [count, 3, size, size], ImageNet-normalized, drawn from `rng`."""
    y, x = np.meshgrid(np.linspace(0, 1, size), np.linspace(0, 1, size), indexing="ij")
    pixel = 1.0 / size
    out = np.empty((count, 3, size, size), np.float32)
    for i in range(count):
        image = _background(rng, x, y)
        for _ in range(int(rng.integers(3, 9))):
            _paint_shape(rng, image, x, y, pixel)
        image += rng.normal(0.0, 0.02, image.shape)
        out[i] = (np.clip(image, 0, 1) - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]
    return out
