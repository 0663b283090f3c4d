#!/usr/bin/env python3
"""A scripted stand-in for a coding agent in HarnessPro's epoch loop.

hevo runs it like any agent CLI (`python3 harnesspro_agent.py {prompt}`) in the workspace
it prepared. It reads its prompt and its working directory and writes what a real agent
would: a diagnosis in the fixed schema, or a plan plus an edit of harness/.

- DIAGNOSE: one finding per trajectory's model_calls.jsonl (or stdout.txt) of the first
  core task, evidence = the whole file;
- EDIT I1 / I3: the first integer `default` in harness/harness.toml becomes the previous
  / next of its `values`; EDIT I2: a comment line is added to harness.toml.

Every call also records what it could see in $HOME/seen.jsonl: each file under its
working directory with its text, and whether the paths in $HEVO_PROBE (`:`-separated)
could be read.
"""
import json, os, re, sys

prompt = " ".join(sys.argv[1:])
home = os.environ.get("HOME", ".")


def record_seen(role):
    files = {}
    for root, _, names in os.walk("."):
        for n in names:
            p = os.path.join(root, n)
            try:
                with open(p, errors="replace") as f:
                    files[p] = f.read()
            except OSError as e:
                files[p] = f"<unreadable: {e}>"
    probes = {}
    for p in filter(None, os.environ.get("HEVO_PROBE", "").split(":")):
        try:
            if os.path.isdir(p):
                os.listdir(p)
            else:
                open(p, "rb").read(1)
            probes[p] = True
        except OSError:
            probes[p] = False
    with open(os.path.join(home, "seen.jsonl"), "a") as f:
        f.write(json.dumps({"role": role, "cwd": os.getcwd(), "files": files, "probes": probes}) + "\n")


if "HEVO-HARNESSPRO-DIAGNOSE" in prompt:
    record_seen("diagnose")
    metrics = json.load(open("metrics.json"))
    first = metrics[0]["task"] if metrics else None
    findings = []
    for m in metrics:
        if m["task"] != first or not m["files"]:
            continue
        f = next((p for p in m["files"] if p.endswith("model_calls.jsonl")), m["files"][0])
        n = max(1, len(open(f).read().splitlines()))
        findings.append({
            "kind": "scripted_review",
            "finding": f"run {m['trial']} of task {m['task']} used {m['input_tokens']} input tokens",
            "effect_on_pass_rate": f"the run ended {m['status']}",
            "effect_on_cost": f"{m['input_tokens'] + m['output_tokens']} tokens, ${m['cost_usd']}",
            "source": "the prompt's examples",
            "evidence": {"file": f, "lines": [1, n]},
        })
    os.makedirs("out", exist_ok=True)
    json.dump({"findings": findings}, open("out/diagnosis.json", "w"), indent=1)
    print(f"wrote {len(findings)} finding(s)")
    sys.exit(0)

m = re.search(r"HEVO-HARNESSPRO-EDIT (I[123])", prompt)
if not m:
    print("unknown role", file=sys.stderr)
    sys.exit(3)
ins = m.group(1)
record_seen("edit " + ins)
path = "harness/harness.toml"
text = open(path).read()
if ins == "I2":
    plan = "I2: note the balance point, behaviour unchanged\n\nKeep the parent's settings."
    text += "# I2: balanced, behaviour unchanged\n"
else:
    pm = re.search(r"^(\w+) = \{ values = \[([^\]]*)\], default = (-?\d+) \}", text, re.M)
    values = [int(v) for v in pm.group(2).split(",")]
    cur = int(pm.group(3))
    i = values.index(cur)
    j = max(i - 1, 0) if ins == "I1" else min(i + 1, len(values) - 1)
    new = values[j]
    plan = f"{ins}: {pm.group(1)} {cur} -> {new}\n\n" + (
        "Fewer examples cost fewer input tokens." if ins == "I1" else "More examples for a higher pass rate.")
    text = text[: pm.start(3)] + str(new) + text[pm.end(3):]
open(path, "w").write(text)
os.makedirs("plan", exist_ok=True)
open("plan/PLAN.md", "w").write(plan + "\n")
print("planned and edited:", plan.splitlines()[0])
