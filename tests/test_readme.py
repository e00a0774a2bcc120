"""README's first example runs as printed (a newcomer pastes it first)."""
import re
from pathlib import Path

import numr_web as nr

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_using_it_example_runs(capsys):
    text = README.read_text()
    block = re.search(r"## Using it\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, "README.md (Using it)", "exec"), {})
    assert capsys.readouterr().out.strip() == "(32, 10) MatmulBiasActivationBackward"


def test_readme_lists_every_activation():
    line = re.search(r"Activations: (`[^`]+`)", README.read_text()).group(1).strip("`").split()
    assert line == list(nr.ACT)


def test_readme_autocast_example_runs(capsys):
    text = README.read_text()
    block = re.search(r"## Mixed precision: `nr.autocast` and `GradScaler`\n\n```python\n(.*?)```",
                      text, re.S).group(1)
    exec(compile(block, "README.md (Mixed precision)", "exec"), {})
    want = re.search(r"\n# (numr_web\.float16 .*)\n", block).group(1)
    assert capsys.readouterr().out.strip() == want
