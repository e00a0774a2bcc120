"""torch.nn.modules.transformer."""
from ....nn import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                    TransformerEncoder, TransformerEncoderLayer)
