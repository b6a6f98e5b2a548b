"""The payloads the views' unit tests read (extension/test/fixtures) agree with the schema the Python side checks.

``record.json`` is a real payload (a training program with fusion regions); ``malformed.json`` lists ways to
break it, each with the field the views must name. The TypeScript check (extension/src/payload.ts) is tested on
the same files, so the two checks cannot drift apart: each case must be rejected here by ``jsonschema`` at (or
above) the field the views name. ``python -m tests.inspect.test_payload_fixtures`` writes record.json again.
"""
import copy
import json
from pathlib import Path

import jsonschema
import pytest

from thunderlab.inspect.serialize import schema, validate

FIXTURES = Path(__file__).parents[2] / "extension" / "test" / "fixtures"
RECORD = FIXTURES / "record.json"
CASES = json.loads((FIXTURES / "malformed.json").read_text())


def make_record() -> dict:
    """A small training program: forward and backward traces, values saved for backward, two fusion regions."""
    import torch

    import thunderlab
    from tests.executors.test_fusion import PIPE  # noqa: F401  (registers the fusing test executor)
    from thunderlab.inspect.serialize import RecordPayload

    def block(x, w):
        a = torch.sin(x) * 2 + 1
        return torch.tanh(a @ w).sum()

    j = thunderlab.jit(block, pipeline="autodiff,claim{executors=testfuse+torch},fuse", verify=True)
    j(torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)).backward()
    return RecordPayload(thunderlab.last_record(j)).to_dict()


def broken(case: dict, good: dict):
    """The payload ``case`` describes: ``whole`` replaces it; ``set``, ``delete`` and ``keep`` edit fields by path."""
    if "whole" in case:
        return case["whole"]
    p = copy.deepcopy(good)

    def at(path):
        o = p
        for k in path[:-1]:
            o = o[k]
        return o, path[-1]

    for path, value in case.get("set", []):
        o, k = at(path)
        o[k] = value
    for path in case.get("delete", []):
        o, k = at(path)
        del o[k]
    for path, keys in case.get("keep", []):
        o, k = at(path)
        o[k] = {x: v for x, v in o[k].items() if x in keys}
    return p


def js_path(parts) -> str:
    """A jsonschema error path written as the views write it: steps[2].traces, regions["a b"]."""
    out = ""
    for k in parts:
        if isinstance(k, int):
            out += f"[{k}]"
        elif k.isidentifier() and k.isascii():
            out += f".{k}" if out else k
        else:
            out += f"[{json.dumps(k)}]"
    return out


def _under(path: str, parent: str) -> bool:
    return not parent or path == parent or path.startswith(parent + ".") or path.startswith(parent + "[")


def test_the_fixture_record_follows_the_schema():
    validate(json.loads(RECORD.read_text()))


@pytest.mark.parametrize("case", CASES, ids=[c["why"] for c in CASES])
def test_each_malformed_case_is_refused_where_the_views_say(case):
    payload = broken(case, json.loads(RECORD.read_text()))
    errors = list(jsonschema.Draft202012Validator(schema()).iter_errors(payload))
    assert errors, f"the schema accepts a payload the views refuse ({case['why']})"
    where = [js_path(e.absolute_path) for e in errors]
    assert any(_under(case["path"], w) for w in where), (case["path"], where)


if __name__ == "__main__":
    RECORD.write_text(json.dumps(make_record(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {RECORD}")
