"""Training-step time of a recurrent language model written once for the torch API: numr_web
(through numr_web.torch) against PyTorch on cpu, side by side in one process.

    python bench/rnn.py                                   # LSTM, GRU and RNN, cpu
    python bench/rnn.py --kinds LSTM --devices cpu,webgpu,cuda --steps 10

The model is word_language_model's RNNModel shape: Embedding(vocab, E) -> 2-layer kind(E, H) ->
Linear(H, vocab), seq-first input (T, B), NLL of log_softmax, SGD by p.data.add_ after
clip_grad_norm_ (as pytorch/examples' main.py). A step ends by reading the loss. torch runs on
cpu for every row (it has no webgpu device; the cuda row's torch runs on cuda). The figure is the
median over --steps steps after two warm-up steps.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout


def step_fn(lib, kind, device, vocab, emb, hid, seq, batch):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, emb)
            self.rnn = getattr(nn, kind)(emb, hid, 2)
            self.decoder = nn.Linear(hid, vocab)

        def forward(self, x):
            out, _ = self.rnn(self.encoder(x))
            return F.log_softmax(self.decoder(out).view(-1, vocab), dim=1)

    model = Model().to(device)
    x = lib.randint(0, vocab, (seq, batch), device=device)
    y = lib.randint(0, vocab, (seq * batch,), device=device)

    def step():
        model.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-20)
        return loss.item()
    return step


def median_ms(step, steps, clock=time.perf_counter):
    for _ in range(2):
        step()
    times = []
    for _ in range(steps):
        t = clock()
        step()
        times.append(clock() - t)
    return 1000 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="LSTM,GRU,RNN")
    ap.add_argument("--devices", default="cpu")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--emb", type=int, default=200)
    ap.add_argument("--hid", type=int, default=200)
    ap.add_argument("--seq", type=int, default=35)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--clock", choices=("wall", "process"), default="wall",
                    help="process: the CPU time of all the process's threads (on a machine "
                         "shared with other work, steadier than wall time; cpu rows only)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads, numr's cpu threads and numpy's BLAS threads "
                         "(0: the defaults)")
    a = ap.parse_args()
    clock = time.process_time if a.clock == "process" else time.perf_counter
    import torch
    import numr_web.torch as ntorch
    if a.threads:
        torch.set_num_threads(a.threads)
        from numr_web.backends import cpu_threads
        cpu_threads.configure(threads=a.threads)
        from threadpoolctl import threadpool_limits
        threadpool_limits(a.threads)           # numpy's BLAS too, for the rest of the run
    shape = (a.vocab, a.emb, a.hid, a.seq, a.batch)
    print(f"clock {a.clock}; vocab {a.vocab}, embedding {a.emb}, hidden {a.hid}, 2 layers, sequence {a.seq}, "
          f"batch {a.batch}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'kind':6} {'device':7} {'numr ms':>9} {'torch ms':>9} {'ratio':>6}")
    for kind in a.kinds.split(","):
        for dev in a.devices.split(","):
            ours = median_ms(step_fn(ntorch, kind, dev, *shape), a.steps, clock)
            tdev = "cuda" if dev == "cuda" else "cpu"
            ref = median_ms(step_fn(torch, kind, tdev, *shape), a.steps, clock)
            print(f"{kind:6} {dev:7} {ours:9.1f} {ref:9.1f} {ours / ref:6.2f}")


if __name__ == "__main__":
    main()
