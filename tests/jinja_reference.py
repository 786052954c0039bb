# Renders chat templates with Python Jinja2 set up the way transformers sets
# it up (an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
# loopcontrols, plus its tojson, raise_exception and strftime_now), so that
# tests/chat_template_parity_test.cpp can also compare src/chat/jinja with the
# engine Hugging Face's Python stack really runs. Optional: the test skips this
# comparison when python3 or jinja2 is missing.
#
#   python3 tests/jinja_reference.py CASES_JSON
#
# Same input and output as tests/jinja_reference.mjs:
#   CASES_JSON: [{"template_path": ..., "cases": [{"name": ..., "context": {...}}, ...]}, ...]
#   stdout:     [[{"output": "..."} or {"error": "..."}, ...], ...]
import datetime
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


def render_all(env, group):
    try:
        with open(group["template_path"], encoding="utf-8") as f:
            template = env.from_string(f.read())
    except Exception as e:  # noqa: BLE001 - a syntax error is a result too
        return [{"error": f"{type(e).__name__}: {e}"} for _ in group["cases"]]
    results = []
    for case in group["cases"]:
        try:
            results.append({"output": template.render(**case["context"])})
        except Exception as e:  # noqa: BLE001
            results.append({"error": f"{type(e).__name__}: {e}"})
    return results


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 jinja_reference.py CASES_JSON")
    with open(sys.argv[1], encoding="utf-8") as f:
        groups = json.load(f)
    env = environment()
    sys.stdout.write(json.dumps([render_all(env, g) for g in groups], ensure_ascii=False))


main()
