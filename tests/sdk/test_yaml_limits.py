"""The CLI's YAML (job.yaml, sweep.yaml) refuses alias bombs (issue 44, item 8): a "billion laughs"
file is refused at once with a clear error, instead of loading small and exploding when the spec
is turned into JSON. Ordinary anchors and aliases still work."""
import time

import pytest

from cairn.jobspec import JobSpecError, parse_job
from cairn.sweepspec import parse_sweep
from cairn.yamlsafe import MAX_ALIASES, safe_load

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
command: python train.py
env: {X: *i}
"""

# Few aliases (5 levels of 9: 45), but 9^5 = 59,049 strings per level-5 list, 10 of them.
WIDE = "\n".join([
    "a: &a [x,x,x,x,x,x,x,x,x]",
    *[f"{n}: &{n} [{','.join([f'*{p}'] * 9)}]" for p, n in zip("abcd", "bcde", strict=True)],
    "command: python train.py",
    "args: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]",
]) + "\n"


@pytest.mark.parametrize("text, words", [
    (BILLION_LAUGHS, "once aliases are expanded: refused"),
    ("x: &x 1\ncommand: t\nargs: [" + ", ".join(["*x"] * (MAX_ALIASES + 1)) + "]\n",
     f"more than {MAX_ALIASES} aliases"),
    (WIDE, "values once aliases are expanded"),
    ("a: &a [*a]\ncommand: x\n", "recursive alias"),
])
def test_alias_bombs_are_refused_quickly_with_a_clear_error(text, words):
    started = time.monotonic()
    with pytest.raises(JobSpecError) as error:
        parse_job(text, source="bomb.yaml")
    assert time.monotonic() - started < 2
    assert str(error.value).startswith("bomb.yaml: invalid YAML at line") and words in str(error.value)
    with pytest.raises(JobSpecError, match="refused"):
        parse_sweep(text, source="bomb.yaml")


def test_the_cli_refuses_the_file(run, tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BILLION_LAUGHS)
    started = time.monotonic()
    result = run("submit", str(bomb))
    assert time.monotonic() - started < 5
    assert result.code != 0 and "bomb.yaml: invalid YAML at line" in result.err and "refused" in result.err


def test_ordinary_anchors_still_work():
    spec = parse_job("defaults: &res {gpu: 1, cpu: 4}\ncommand: python t.py\nresources: *res\n"
                     "env: {A: x}\nnode_selector: {<<: *res, zone: a}\n")
    assert spec.body["resources"] == {"gpu": 1, "cpu": 4}
    assert spec.body["node_selector"] == {"gpu": 1, "cpu": 4, "zone": "a"}
    assert safe_load("a: &x [1, 2]\nb: [*x, *x]") == {"a": [1, 2], "b": [[1, 2], [1, 2]]}
