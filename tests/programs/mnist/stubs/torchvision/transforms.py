"""ToTensor and Normalize for uint8 HxW numpy images, as torchvision's for PIL images."""
import numpy as np
import torch


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    def __call__(self, img):
        return torch.tensor((np.asarray(img, dtype=np.float32) / 255.0)[None])


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, x):
        return (x - self.mean[0]) / self.std[0]
