"""torch.backends.cudnn: numr_web does not use cuDNN; the flags are kept and change nothing."""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None
