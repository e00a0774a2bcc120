"""README.md's JavaScript block ("In your own page") runs as printed. Its `main.js` runs in a page
served beside the app, whose import map resolves "numr-web" to the built library, as the README says
it does without a bundler; its `vite.config.js` is the one of e2e/vite_fixture, the Vite project
e2e/test_vite_package.py builds and serves."""
import re

from e2e_support import ROOT


def _js_files():
    """{'vite.config.js': code, 'main.js': code} of README's browser block."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- readme-test: browser[^\n]*-->\n```js\n(.*?)```", text, re.S).group(1)
    parts = re.split(r"^// ([\w.]+\.js)\n", block, flags=re.M)
    return {name: code for name, code in zip(parts[1::2], parts[2::2])}


def _lines(code):
    return [line.strip() for line in code.splitlines() if line.strip()]


def test_readme_vite_config_is_the_fixtures():
    files = _js_files()
    fixture = (ROOT / "e2e" / "vite_fixture" / "vite.config.js").read_text()
    assert _lines(files["vite.config.js"]) == _lines(fixture)


def test_readme_main_js_runs_in_a_page_with_an_import_map(app):
    code = _js_files()["main.js"]
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<script type="importmap">{{ "imports": {{ "numr-web": "./lib/numr-web.js" }} }}</script>
<script>addEventListener("error", (e) => {{ window.readmeDone = "error: " + e.message; }});</script>
</head><body><script type="module">
{code}
window.readmeDone = "done";
</script></body></html>"""
    url = app.base_url + "readme-main.html"
    app.page.route(url, lambda route: route.fulfill(status=200, content_type="text/html", body=page))
    app.goto("readme-main.html", wait_ready=False)
    app.page.wait_for_function("() => window.readmeDone !== undefined", timeout=300_000)
    assert app.page.evaluate("() => window.readmeDone") == "done"
    app.assert_clean()
