#!/usr/bin/env python3
"""Reference renderer for modeld's chat-template fidelity test.

Renders chat templates with Debian's python3-jinja2 set up as Hugging Face
transformers' apply_chat_template sets it up: an immutable sandbox,
trim_blocks and lstrip_blocks, the loopcontrols extension, a generation
block that only renders its body, tojson as json.dumps with ensure_ascii
off (indent, separators and sort_keys passed through), raise_exception and
strftime_now (here on a fixed clock, so a test can compare).

stdin: {"now": "2026-01-15T12:00:00", "templates": {name: source},
        "cases": [{"id": str, "template": name, "vars": {...}}]}
stdout: [{"id": str, "text": str} | {"id": str, "error": str, "raised": bool}]
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(jinja2.exceptions.TemplateError):
    pass


class Generation(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def main():
    req = json.load(sys.stdin)
    now = datetime.fromisoformat(req["now"])

    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now

    compiled = {}
    for name, src in req["templates"].items():
        try:
            compiled[name] = env.from_string(src)
        except Exception as e:  # noqa: BLE001 - reported per case
            compiled[name] = e
    out = []
    for case in req["cases"]:
        t = compiled[case["template"]]
        if isinstance(t, Exception):
            out.append({"id": case["id"], "error": "compile: %s" % t, "raised": False})
            continue
        try:
            out.append({"id": case["id"], "text": t.render(**case["vars"])})
        except Raised as e:
            out.append({"id": case["id"], "error": str(e), "raised": True})
        except Exception as e:  # noqa: BLE001 - reported per case
            out.append({"id": case["id"], "error": "%s: %s" % (type(e).__name__, e), "raised": False})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
