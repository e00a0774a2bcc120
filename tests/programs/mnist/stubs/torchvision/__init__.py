"""A stand-in for torchvision (not installed in the test environment and not downloadable
here): `datasets.MNIST` gives a small deterministic set of 28x28 digit-like images, and
`transforms` has the two transforms mnist/main.py uses. It builds tensors with whatever
`import torch` gives, so the same file serves PyTorch and numr_web.torch."""
from . import datasets, transforms  # noqa: F401
