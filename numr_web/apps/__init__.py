"""The applications built on the engine: the command line (`cli`, the `numr-web` console script and
`python -m numr_web`), the web app's server (`serve`), the demos (`demo`: the digits MLP and CNN;
`demo_gpt`: the character GPT; `demo_distributed`: the MLP data-parallel; `demo_run`: their
command-line runs), the one training loop they and the browser pages share (`training`) and
the values those pages' scripts (web/py) pass to and from JavaScript (`js_values`).

Nothing in the engine imports this package; import its modules by name
(`from numr_web.apps.training import fit_async`).
"""
