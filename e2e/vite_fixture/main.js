// One training step of a fixed Linear layer, as a user's page would run it.
// ?worker=1: in a Web Worker; ?device=auto|webgpu|cpu; ?base=URL: loadNumr's baseURL.
// window.fixture: {state: 'done' | 'error', ...} for e2e/test_vite_package.py.
import { loadNumr } from 'numr-web';

const STEP = `
import numr_web as nr
from numr_web import nn
x = nr.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
y = nr.tensor([1, 0])
lin = nn.Linear(3, 2)
with nr.no_grad():
    lin.weight.copy_(nr.tensor([[0.1, -0.2, 0.3], [0.0, 0.4, -0.1]]))
    lin.bias.copy_(nr.tensor([0.05, -0.05]))
opt = nn.SGD(lin.parameters(), lr=0.5)
losses = []
for _ in range(2):
    loss = nn.functional.cross_entropy(lin(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(await loss.read())
{"losses": losses, "weight": await lin.weight.read(), "bias": await lin.bias.read(), "device": lin.weight.device}
`;

const q = new URLSearchParams(location.search);
const out = document.getElementById('out');
window.fixture = { state: 'loading' };
try {
  const numr = await loadNumr({
    worker: q.get('worker') === '1', device: q.get('device') || 'auto', baseURL: q.get('base') || undefined,
    onStatus: (s) => (out.textContent = s),
  });
  const r = await numr.runPython(STEP);
  window.fixture = { state: 'done', mode: numr.mode, info: numr.info, ...r };
  out.textContent = `trained a step on ${r.device} (${numr.mode} thread): losses ${r.losses.join(', ')}`;
} catch (err) {
  window.fixture = { state: 'error', name: err.name, message: err.message, url: err.url, option: err.option };
  out.textContent = `${err.name}: ${err.message}`;
}
