# nanoGPT (github.com/karpathy/nanoGPT, MIT licence) trains in this tab: its model.py, unmodified,
# lies next to this script (see "Files"), and this is the core of its train.py loop at a small
# size — a character-level GPT on a few sonnets, AdamW from model.configure_optimizers, gradient
# clipping at 1.0, then a sample. Plain PyTorch: the same file runs under PyTorch next to
# nanoGPT's model.py (`python main.py`). The chart plots the printed "iter N: loss X" lines.
import random
import time

import torch
from model import GPT, GPTConfig

# -- settings (plain variables, as in nanoGPT's train.py) --
init_from = "scratch"      # "scratch", or a file of weights saved by torch.save(model.state_dict(), path)
max_iters = 200
log_interval = 10
eval_interval = 50
eval_iters = 4
batch_size = 8
block_size = 32
n_layer, n_head, n_embd = 2, 2, 64
learning_rate = 3e-3
seed = 1337
sample_chars = 120         # characters the trained model writes at the end

text = """Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.
Let me not to the marriage of true minds
Admit impediments. Love is not love
Which alters when it alteration finds,
Or bends with the remover to remove.
O no! it is an ever-fixed mark
That looks on tempests and is never shaken;
It is the star to every wand'ring bark,
Whose worth's unknown, although his height be taken.
Love's not Time's fool, though rosy lips and cheeks
Within his bending sickle's compass come;
Love alters not with his brief hours and weeks,
But bears it out even to the edge of doom.
If this be error and upon me prov'd,
I never writ, nor no man ever lov'd.
"""

device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
torch.manual_seed(seed)
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
data = [stoi[ch] for ch in text]
split = int(0.9 * len(data))
splits = {"train": data[:split], "val": data[split:]}
# batches from Python's own generator: the same ones under PyTorch and numr_web
rngs = {"train": random.Random(seed), "val": random.Random(seed + 1)}


def get_batch(name):
    d, rng = splits[name], rngs[name]
    ix = [rng.randrange(len(d) - block_size) for _ in range(batch_size)]
    x = torch.tensor([d[i:i + block_size] for i in ix], dtype=torch.long)
    y = torch.tensor([d[i + 1:i + 1 + block_size] for i in ix], dtype=torch.long)
    return x.to(device), y.to(device)


@torch.no_grad()
def estimate_val_loss():
    model.eval()
    losses = [model(*get_batch("val"))[1].item() for _ in range(eval_iters)]
    model.train()
    return sum(losses) / len(losses)


config = GPTConfig(block_size=block_size, vocab_size=len(chars), n_layer=n_layer, n_head=n_head,
                   n_embd=n_embd, dropout=0.0, bias=True)
model = GPT(config)
if init_from != "scratch":
    model.load_state_dict(torch.load(init_from, map_location=device))
model.to(device)
optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=learning_rate,
                                       betas=(0.9, 0.95), device_type=device.type)
print(f"training on {device}: {len(data)} characters, vocabulary of {len(chars)}")

t0 = time.time()
for iter_num in range(max_iters):
    if iter_num % eval_interval == 0:
        print(f"step {iter_num}: val loss {estimate_val_loss():.4f}")
    x, y = get_batch("train")
    logits, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if iter_num % log_interval == 0 or iter_num == max_iters - 1:
        t1 = time.time()
        print(f"iter {iter_num}: loss {loss.item():.6f}, time {(t1 - t0) * 1000:.0f}ms")
        t0 = t1
print(f"step {max_iters}: val loss {estimate_val_loss():.4f}")

model.eval()
start = torch.tensor([[stoi["\n"]]], dtype=torch.long, device=device)
sample = model.generate(start, sample_chars, temperature=0.8, top_k=10)[0].tolist()
print("".join(chars[i] for i in sample))
