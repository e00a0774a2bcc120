# An MLP learns two interleaved spirals: plain PyTorch, run here by numr_web (`import torch` is
# numr_web.torch in this page) on WebGPU. report(loss=..., step=...) draws the chart: a function
# this page defines for the code it runs (printed "step N: loss X" lines are charted too when the
# code never calls it); elsewhere the fallback below prints the values.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    report
except NameError:                 # outside this page (under PyTorch, say): print the values instead
    def report(step, **values):
        print(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in values.items()))

torch.manual_seed(0)
device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
print(f"training on {device}")

# two spirals of 200 points each, class 0 and class 1
n = 200
t = torch.linspace(0.5, 3 * math.pi, n)
arm = torch.stack([t * torch.cos(t), t * torch.sin(t)], dim=1) / (3 * math.pi)
x = torch.cat([arm, -arm]) + 0.02 * torch.randn(2 * n, 2)
y = torch.cat([torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.long)])
x, y = x.to(device), y.to(device)

model = nn.Sequential(
    nn.Linear(2, 64), nn.ReLU(),
    nn.Linear(64, 64), nn.ReLU(),
    nn.Linear(64, 2),
).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

steps = 300
for step in range(1, steps + 1):
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        accuracy = (logits.argmax(dim=1) == y).float().mean()
        report(loss=loss.item(), step=step, accuracy=accuracy.item())

with torch.no_grad():
    accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
print(f"final loss {loss.item():.4f}, training accuracy {accuracy:.1%}")
