"""Scripted file-task solver for the hevo `shell` example (no model, stdlib only).

Reads {"op": ..., "source"/"target"/...} on stdin, works in the current directory (the
trial's fresh working directory, where the task's files were copied) and prints a JSON
summary as its last stdout line.
"""
import json
import os
import sys


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def solve(t, params):
    op = t.get("op")
    if op == "write":
        write(t["target"], t["content"])
    elif op == "sum":
        nums = [int(x) for x in read(t["source"]).split()]
        write(t["target"], f"{sum(nums)}\n")
    elif op == "count_lines":
        write(t["target"], f"{len(read(t['source']).splitlines())}\n")
    elif op == "count_words":
        write(t["target"], f"{len(read(t['source']).split())}\n")
    elif op == "mkdir":
        for d in t["targets"]:
            os.makedirs(d, exist_ok=True)
    elif op == "upper":
        write(t["target"], read(t["source"]).upper())
    elif op == "sort":
        lines = read(t["source"]).splitlines()
        write(t["target"], "".join(line + "\n" for line in sorted(lines)))
    else:
        if params.get("touch_unknown") and "target" in t:
            write(t["target"], "")
        return "unsupported"
    return "done"


def main():
    task = json.load(sys.stdin)
    params = json.loads(os.environ.get("HEVO_PARAMS", "{}"))
    status = solve(task, params)
    print(json.dumps({"answer": status, "op": task.get("op")}))


if __name__ == "__main__":
    main()
