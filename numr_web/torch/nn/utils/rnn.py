"""torch.nn.utils.rnn: packed sequences are not supported (pad the batch and mask instead)."""
from ....errors import UnsupportedError


def _unsupported(name):
    def fn(*args, **kwargs):
        raise UnsupportedError(f"torch.nn.utils.rnn.{name}: packed sequences are not supported; "
                               "pad the sequences to one length and mask the padded steps")
    fn.__name__ = name
    return fn


pack_padded_sequence = _unsupported("pack_padded_sequence")
pad_packed_sequence = _unsupported("pad_packed_sequence")
pack_sequence = _unsupported("pack_sequence")


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of different first-dim lengths, padded with padding_value."""
    from ....creation import full
    from ....ops.shape_ops import concat, stack
    n = max(s.shape[0] for s in sequences)
    out = []
    for s in sequences:
        pad = full((n - s.shape[0],) + s.shape[1:], padding_value, dtype=s.dtype, device=s.device)
        out.append(concat([s, pad] if padding_side == "right" else [pad, s], 0))
    return stack(out, 0 if batch_first else 1)
