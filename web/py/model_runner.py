# "Your model" page (web/model.html): runs Python that the user pastes — a PyTorch model and its
# training loop — in the page's Pyodide (the worker), with `import torch` giving numr_web.torch
# (numr_web.install_as_torch()). What the code prints streams to the page; losses reach the chart
# through `report(loss=..., step=...)` (a global the code finds defined) or, for code that does not
# know about the page, from printed lines such as "step 10: loss 2.31" / "iter 3: loss 4.1, ..." /
# "Train Epoch: 1 [...] Loss: 0.52" / "valid loss 5.0" (parsed until the code calls report()).
# Stop: every report(), printed line and backward() checks the page's stop flag and raises
# KeyboardInterrupt there; the page restarts the worker when the code does none of those for a while.
import ast
import inspect
import os
import re
import sys
import time
import traceback
import types

from numr_web.apps.js_values import js_object, py_value, sender

SCRIPT = "main.py"
# a "loss" followed by its value: "loss 2.3", "Loss: 2.3", "loss=2.3", "train_loss 2.3"
_LOSS = re.compile(r"(?i)loss\b\s*[:=]?\s*(?P<v>[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|inf)\b")
# the step the line is about: "step 10", "iter 3", "iteration 3:", "it 5", "batch #4" (a whole
# number: not the 31 of "ms/batch 31.56")
_STEP = re.compile(r"(?i)\b(?:step|iter|iteration|it|batch)\b\s*[:#=]?\s*(?P<n>\d+)(?![\d.])")
# a loss of held-out data: these words between the previous loss (or the line's start) and this one
# ("val loss", "test_loss", "Test set: Average loss")
_HELD_OUT = re.compile(r"(?i)(?<![a-z])(?:val|valid|validation|test|eval|evaluation|dev)(?![a-z])")


def parse_loss_line(line):
    """-> [(kind, step or None, value)] for the losses a printed line reports; kind is "train" or
    "val" (validation / test / eval loss)."""
    out, start = [], 0
    step = _STEP.search(line)
    for m in _LOSS.finditer(line):
        kind = "val" if _HELD_OUT.search(line, start, m.start()) else "train"
        out.append((kind, int(step.group("n")) if step else None, float(m.group("v"))))
        start = m.end()
    return out


def _number(v, name):
    """A float from a number or a one-element tensor (read back: a sync, as loss.item() is)."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"report(): {name} must be a number or a one-element tensor, "
                        f"got {type(v).__name__}")
    return float(v)


class _Run:
    """One run of the user's code: its output, the points of the chart, the stop checks."""

    def __init__(self, emit, should_stop):
        self.emit, self.should_stop = emit, should_stop
        self.reported = False            # report() was called: printed lines are not parsed any more
        self.train = 0                   # training points so far (the step of lines without one)
        self.last_step = 0
        self.points = 0
        self.stopped = False

    def check_stop(self):
        if self.should_stop is not None and self.should_stop():
            self.stopped = True
            raise KeyboardInterrupt("stopped from the page")

    def point(self, kind, step, value, extra=None, source="print"):
        if kind == "train":
            self.train += 1
            step = self.train if step is None else step
            self.last_step = step
        elif step is None:
            step = self.last_step
        self.points += 1
        self.emit({"kind": "point", "series": kind, "step": step, "loss": value,
                   "metrics": extra or {}, "source": source})

    def report(self, loss=None, step=None, val_loss=None, **metrics):
        """report(loss=..., step=None, val_loss=None, **metrics): a point of the page's loss chart.
        loss / val_loss: a number or a one-element tensor; step: the x value (default: the count of
        report(loss=...) calls); other keyword values (numbers) show in the status line. Calling it
        turns off the parsing of printed "loss" lines for the rest of the run."""
        self.check_stop()
        self.reported = True
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            step = int(_number(step, "step"))
        extra = {k: _number(v, k) for k, v in metrics.items()}
        if loss is not None:
            self.point("train", step, _number(loss, "loss"), extra, "report")
        if val_loss is not None:
            self.point("val", step, _number(val_loss, "val_loss"), extra, "report")
        if loss is None and val_loss is None and extra:
            self.emit({"kind": "metrics", "step": step, "metrics": extra})

    def line(self, stream, text):
        self.emit({"kind": "output", "stream": stream, "text": text})
        if stream == "stdout" and not self.reported:
            for kind, step, value in parse_loss_line(text):
                self.point(kind, step, value)


class _Stream:
    """sys.stdout / sys.stderr during a run: whole lines go to the page (and the loss parser)."""

    def __init__(self, run, name):
        self.run, self.name, self.buf = run, name, ""

    def write(self, s):
        self.buf += str(s)
        if "\n" in self.buf:
            *lines, self.buf = self.buf.split("\n")
            self.run.line(self.name, "\n".join(lines) + "\n")
            self.run.check_stop()
        return len(s)

    def flush(self):
        if self.buf:
            self.run.line(self.name, self.buf)
            self.buf = ""

    def isatty(self):
        return False

    @property
    def encoding(self):
        return "utf-8"


def _user_traceback(exc, script):
    """The traceback from the user's script on (the runner's own frames left out), as Python
    prints it; a numr_web error's class is named with its module."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    if tb is None:          # raised before the script ran a line (a SyntaxError): no frames to show
        return "".join(traceback.format_exception_only(type(exc), exc))
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _error_info(exc, script):
    cls = type(exc)
    numr = cls.__module__.startswith("numr_web")
    return {"type": cls.__name__, "module": cls.__module__, "numr": numr,
            "message": str(exc), "traceback": _user_traceback(exc, script)}


def _write_files(workdir, code, files):
    os.makedirs(workdir, exist_ok=True)
    for name, text in dict(files or {}).items():
        path = os.path.join(workdir, _safe_name(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(text))
    script = os.path.join(workdir, SCRIPT)
    with open(script, "w", encoding="utf-8") as f:
        f.write(code)
    return script


def _forget_modules(workdir):
    """Modules imported from the working folder are dropped, so the next run imports them anew."""
    root = os.path.abspath(workdir) + os.sep
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and os.path.abspath(f).startswith(root):
            del sys.modules[name]


def _workdir(c):
    return str(c.get("workdir") or os.path.join(os.path.expanduser("~"), "your_model"))


def _safe_name(name):
    name = str(name)
    parts = name.replace("\\", "/").split("/")
    if not name or os.path.isabs(name) or ".." in parts or "" in parts:
        raise ValueError(f"file names must stay inside the working folder, got {name!r}")
    return name


async def model_put_file(cfg, emit=None, should_stop=None):
    """cfg: {name, data (bytes; a Uint8Array from the page), workdir}: a file for the code to open
    (data, weights), kept in the working folder for later runs. -> {name, path, size}"""
    c = dict(py_value(cfg or {}))
    name = _safe_name(c.get("name"))
    data = bytes(py_value(c.get("data")) or b"")
    workdir = _workdir(c)
    path = os.path.join(workdir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return js_object({"name": name, "path": path, "size": len(data)})


async def model_run(cfg, emit=None, should_stop=None):
    """cfg: {code (the script), files ({name: text} written next to it, e.g. a model.py it
    imports), workdir (default ~/your_model)}. Runs the code as __main__ (top-level `await` works)
    with `import torch` giving numr_web.torch and `report` defined. emit gets {kind: 'output',
    stream, text} per printed line, {kind: 'point', series: 'train' | 'val', step, loss, metrics}
    per loss, {kind: 'metrics', ...}. -> {ok, stopped, seconds, points, error: {type, module, numr,
    message, traceback} | None}"""
    c = dict(py_value(cfg or {}))
    should_stop = should_stop or None          # JS null arrives as a (falsy) JsNull
    send = sender(emit)
    code = str(c.get("code") or "")
    workdir = _workdir(c)
    files = py_value(c.get("files")) or {}
    import numr_web
    numr_web.install_as_torch()
    import torch
    run = _Run(send, should_stop)
    script = _write_files(workdir, code, files)
    main = types.ModuleType("__main__")      # the script's module, as `python main.py` makes it
    main.__file__, main.report = script, run.report
    saved = sys.stdout, sys.stderr, os.getcwd(), list(sys.path), sys.argv, sys.modules.get("__main__")
    backward = torch.Tensor.backward

    def checked_backward(self, *args, **kwargs):
        run.check_stop()
        return backward(self, *args, **kwargs)

    out, err = _Stream(run, "stdout"), _Stream(run, "stderr")
    t0 = time.perf_counter()
    error = None
    try:
        sys.stdout, sys.stderr = out, err
        os.chdir(workdir)
        sys.path.insert(0, workdir)
        sys.argv = [script]
        sys.modules["__main__"] = main
        torch.Tensor.backward = checked_backward
        compiled = compile(code, script, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(compiled, main.__dict__)
        if inspect.iscoroutine(result):
            await result
    except KeyboardInterrupt:
        if not run.stopped:
            error = {"type": "KeyboardInterrupt", "module": "builtins", "numr": False,
                     "message": "", "traceback": _user_traceback(sys.exc_info()[1], script)}
    except BaseException as e:  # noqa: BLE001 (SystemExit too: sys.exit() in a script ends it)
        if isinstance(e, SystemExit) and e.code in (None, 0):
            pass
        else:
            error = _error_info(e, script)
    finally:
        torch.Tensor.backward = backward
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved[0], saved[1]
        os.chdir(saved[2])
        sys.path[:] = saved[3]
        sys.argv = saved[4]
        if saved[5] is not None:
            sys.modules["__main__"] = saved[5]
        _forget_modules(workdir)
    if error is not None:
        send({"kind": "output", "stream": "stderr", "text": error["traceback"]})
    return js_object({"ok": error is None and not run.stopped, "stopped": run.stopped,
                      "seconds": time.perf_counter() - t0, "points": run.points, "error": error})
