"""MNIST: N_TRAIN / N_TEST 28x28 uint8 images of blurred strokes with labels 0..9, the same on
every run (numpy's RandomState(0) / (1))."""
import numpy as np

N_TRAIN, N_TEST = 48, 16


class MNIST:
    def __init__(self, root, train=True, download=False, transform=None):
        rng = np.random.RandomState(0 if train else 1)
        n = N_TRAIN if train else N_TEST
        self.targets = rng.randint(0, 10, n)
        imgs = np.zeros((n, 28, 28), np.float32)
        for i, label in enumerate(self.targets):
            r0, c0 = 4 + label, 6 + (label * 3) % 14
            imgs[i, r0:r0 + 12, c0:c0 + 3] = 1.0                 # a label-dependent stroke
            imgs[i] += 0.3 * rng.rand(28, 28)
        self.data = (np.clip(imgs, 0, 1) * 255).astype(np.uint8)
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        img = self.data[i]
        return (self.transform(img) if self.transform else img), int(self.targets[i])
