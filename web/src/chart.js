// Axis ticks at round values (1, 2 or 5 x 10^k) and a small line chart that fills its box.

/** Round tick values covering [0, max]: {step, top, values}. */
export function niceTicks(max, count = 4, whole = false) {
  if (!(max > 0)) max = 1;
  const raw = max / count, p = 10 ** Math.floor(Math.log10(raw)), f = raw / p;
  let step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
  if (whole) step = Math.max(1, Math.round(step));     // steps are counted: 0, 1, 2, … at least
  const top = Math.ceil(max / step - 1e-9) * step;
  const values = [];
  for (let i = 0; i * step <= top + step / 2; i++) values.push(+(i * step).toPrecision(12));
  return { step, top, values };
}

/** Label for a tick value with exactly the decimals its step has (0.25 -> 2, 50 -> 0). */
export function tickLabel(v, step) {
  const s = String(+step.toPrecision(12));
  if (s.includes('e')) return v.toExponential(1);
  return v.toFixed(s.includes('.') ? s.split('.')[1].length : 0);
}

/** Draw the loss (left axis) and test accuracy (right axis, %) against the step; or, given `vals`
 * ([{step, loss}], e.g. validation loss) instead of `accs`, that second loss on the left axis. */
export function drawChart(canvas, { losses, accs = [], vals = null, totalSteps }) {
  const dpr = window.devicePixelRatio || 1;
  const cssW = canvas.clientWidth || 300, cssH = canvas.clientHeight || 220;
  if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
    canvas.width = Math.round(cssW * dpr); canvas.height = Math.round(cssH * dpr);
  }
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  const W = cssW, H = cssH, L = 44, R = 40, T = 22, B = 30;
  g.clearRect(0, 0, W, H);
  g.font = '11px system-ui, sans-serif'; g.lineWidth = 1;
  const steps = Math.max(1, totalSteps, losses.length ? losses[losses.length - 1].step : 0);
  const xt = niceTicks(steps, W < 420 ? 3 : 6, true);
  const lossMax = Math.max(0.1, ...losses.slice(0, 20).map((p) => (isFinite(p.loss) ? p.loss : 0)));
  const yt = niceTicks(lossMax, 4);
  const x = (s) => L + (W - L - R) * (s / xt.top);
  canvas.dataset.ticksX = xt.values.join(',');          // for tests and assistive tooling
  canvas.dataset.ticksY = yt.values.join(',');
  const yL = (v) => T + (H - T - B) * (1 - Math.min(v, yt.top) / yt.top);
  const yA = (v) => T + (H - T - B) * (1 - v);
  g.strokeStyle = '#e3e6ea'; g.fillStyle = '#555'; g.textAlign = 'right';
  for (const v of yt.values) {
    g.beginPath(); g.moveTo(L, yL(v)); g.lineTo(W - R, yL(v)); g.stroke();
    g.fillText(tickLabel(v, yt.step), L - 4, yL(v) + 4);
  }
  g.textAlign = 'left';
  if (!vals) for (const p of [0, 25, 50, 75, 100]) g.fillText(`${p}%`, W - R + 4, yA(p / 100) + 4);
  g.textAlign = 'center';
  for (const s of xt.values) g.fillText(tickLabel(s, xt.step), x(s), H - B + 14);
  g.fillText('step', (L + W - R) / 2, H - 4);
  g.strokeStyle = '#c8cdd3'; g.strokeRect(L, T, W - L - R, H - T - B);
  g.lineWidth = 1.5; g.strokeStyle = '#2557a7'; g.beginPath();
  losses.forEach((p, i) => (i ? g.lineTo(x(p.step), yL(p.loss)) : g.moveTo(x(p.step), yL(p.loss))));
  g.stroke();
  g.strokeStyle = '#2a9d3a'; g.fillStyle = '#2a9d3a';
  if (vals) {
    g.beginPath();
    vals.forEach((p, i) => (i ? g.lineTo(x(p.step), yL(p.loss)) : g.moveTo(x(p.step), yL(p.loss))));
    g.stroke();
    vals.forEach((p) => g.fillRect(x(p.step) - 2, yL(p.loss) - 2, 4, 4));
    g.textAlign = 'left';
    g.fillStyle = '#2557a7'; g.fillText('— training loss', L, 12);
    g.fillStyle = '#2a9d3a'; g.fillText('— validation loss', L + 96, 12);
    return;
  }
  g.beginPath();
  accs.forEach((p, i) => (i ? g.lineTo(x(p.step), yA(p.acc)) : g.moveTo(x(p.step), yA(p.acc))));
  g.stroke();
  accs.forEach((p) => g.fillRect(x(p.step) - 2, yA(p.acc) - 2, 4, 4));
  g.textAlign = 'left';
  g.fillStyle = '#2557a7'; g.fillText('— loss', L, 12);
  g.fillStyle = '#2a9d3a'; g.fillText('— test accuracy', L + 56, 12);
}
