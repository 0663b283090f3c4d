#!/usr/bin/env python3
"""A scripted stand-in for a coding agent under `hevo tests synth`.

Run in a task's workspace (read-only) with the prompt as its last argument, it does what a
real agent is asked to do, from what hevo shows it: it reads task.json and trajectory/, and
writes tests/ - two good tests and several broken ones (a syntax error, a hang, a Python
crash, a wrong exit code, a file with the wrong name) that hevo must drop.

It refuses (exit 1, writing nothing) if anything it can read holds an expected answer (the
test suite plants `EXPECTED-MARKER` in every `expected`) or names another task.
"""
import json
import os
import sys

prompt = sys.argv[-1]
if "README.md" not in prompt:
    sys.exit("the prompt does not point at README.md: " + prompt)

task = json.load(open("task.json"))
for root, _dirs, files in os.walk("."):
    for name in files:
        path = os.path.join(root, name)
        if path.startswith("./tests"):
            continue
        text = open(path, errors="replace").read()
        if "EXPECTED-MARKER" in text:
            sys.exit("an expected answer leaked into " + path)
for value in os.environ.values():
    if "EXPECTED-MARKER" in value:
        sys.exit("an expected answer leaked into the environment")

target = task["input"]["target"]
answer = json.load(open("trajectory/answer.json"))
status = json.load(open("trajectory/status.json"))
if not status["answered"] or answer is None:
    sys.exit("the trajectory shows no answer")
if not os.path.isfile(os.path.join("trajectory/workdir", target)):
    sys.exit("the trajectory lacks the file the harness wrote")
try:
    open("not-tests.txt", "w").write("x")
    sys.exit("the workspace is writable outside tests/")
except OSError:
    pass

tests = {
    # good: the target file exists
    "test_01.sh": f'[ -f "{target}" ] || exit 1\n',
    # good: its content is what the input asks for (exit 0 or, via a failed assert, 1)
    "test_02.py": (
        "import json, sys\n"
        "task = json.loads(sys.stdin.readline())\n"
        "want = task['input']['content']\n"
        f"got = open({target!r}).read().strip()\n"
        "try:\n"
        "    assert got == want, (got, want)\n"
        "except AssertionError:\n"
        "    raise\n"
    ),
    # broken: a bash syntax error
    "test_03.sh": "if [ -f x ]; then\n  echo unclosed\n",
    # broken: hangs
    "test_04.sh": "sleep 600\n",
    # broken: a Python crash (KeyError), not a failed check
    "test_05.py": "import json, sys\njson.loads(sys.stdin.readline())['no such key']\n",
    # broken: a code that is neither pass nor fail
    "test_06.sh": "exit 3\n",
    # ignored: not a test name
    "notes.txt": "ideas for more tests\n",
}
for name, text in tests.items():
    with open(os.path.join("tests", name), "w") as f:
        f.write(text)
# refused: a link (to a file of the workspace; hevo copies tests outside the sandbox)
os.symlink(os.path.abspath("task.json"), os.path.join("tests", "test_07.sh"))
# refused: larger than a test script may be (1 MiB)
with open(os.path.join("tests", "test_09.sh"), "w") as f:
    f.write("#" * (2 << 20) + "\nexit 0\n")
print(f"wrote {len(tests) + 2} files for task {task['id']}")
