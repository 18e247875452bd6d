#!/usr/bin/env python3
"""plan_published.py — `meshtrain plan` against published training runs.

    python3 tests/plan_published.py MESHTRAIN [--before OLD_MESHTRAIN]
        [--before-hardware-dir DIR] [--table tests/data/plan_published.tsv]
        [--hardware-dir DIR]
        [--only ID_PREFIX] [--markdown]

Reads the table (its header says what each column and check means, and
where each figure comes from), plans every run once with `--json`, and
compares the planner's answer with the published one. Expected values are
computed here from the papers' own closed forms (Megatron's eq. 3,
Korthikanti's appendix A, the ZeRO paper's model states, Psi counted from
the shapes), never from meshtrain's output.

Prints one line a row (the error, and with --before the older binary's)
and a summary against the issue's targets: step time within 10 % on
average and 20 % at worst, MFU within 3 points, every verdict and ranking
right. Exit status 0 when every target holds, 1 otherwise, 2 on a usage
error.
"""
import json
import os
import subprocess
import sys

# The target is a mean step-time error of 10 %; while known gaps
# remain the suite holds the mean to what it is (the note says how far from
# the target), so that no change makes it worse unnoticed.
MEAN_BOUND = 0.16
# ... and over the rows without a known gap: the target itself (9.5 %
# since full recomputation re-runs the tensor-parallel collectives)
MEAN_TARGETED_BOUND = 0.10

SEQ = 2048      # every run in the table: sequence 2048 ...
VOCAB = 51200   # ... and Megatron-LM's vocabulary


def parse_args(argv):
    opts = {"before": None, "table": None, "hwdir": None, "only": None, "markdown": False,
            "before_hwdir": None}
    pos = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--before", "--table", "--hardware-dir", "--only", "--before-hardware-dir"):
            if i + 1 >= len(argv):
                sys.exit(f"plan_published.py: {a} needs a value")
            key = {"--before": "before", "--table": "table", "--hardware-dir": "hwdir",
                   "--only": "only", "--before-hardware-dir": "before_hwdir"}[a]
            opts[key] = argv[i + 1]
            i += 2
            continue
        if a == "--markdown":
            opts["markdown"] = True
        elif a.startswith("-"):
            print(f"plan_published.py: unknown flag {a}", file=sys.stderr)
            sys.exit(2)
        else:
            pos.append(a)
        i += 1
    if len(pos) != 1:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    here = os.path.dirname(os.path.abspath(__file__))
    opts["bin"] = pos[0]
    opts["table"] = opts["table"] or os.path.join(here, "data", "plan_published.tsv")
    opts["hwdir"] = opts["hwdir"] or os.path.join(here, "..", "hardware")
    return opts


def read_table(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            c = line.rstrip("\n").split("\t")
            if len(c) != 11:
                sys.exit(f"plan_published.py: {path}: {len(c)} columns, want 11: {line[:60]}")
            keys = ["id", "source", "model", "hw", "chips", "mesh", "seqs", "flags", "check",
                    "expected", "tol"]
            rows.append(dict(zip(keys, c)))
    return rows


def shape(model):
    """L, h, a from the row's GPT flags."""
    t = model.split()
    get = lambda k: int(t[t.index(k) + 1])
    return get("--layers"), get("--channels"), get("--heads")


def psi(L, h):
    """GPT-2's parameters (Megatron's GPT): token and position embeddings
    (tied head), L blocks of 12h² + 13h, the final layer norm."""
    return VOCAB * h + SEQ * h + L * (12 * h * h + 13 * h) + 2 * h


def eq3_flops(B, L, h):
    """Narayanan et al. eq. 3: a step's FLOPs with full recomputation."""
    return 96 * B * SEQ * L * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * L * h))


def model_flops(B, L, h):
    """Korthikanti et al. app. A: a step's model FLOPs (no recomputation)."""
    return 72 * B * L * SEQ * h * h * (1 + SEQ / (6 * h) + VOCAB / (12 * h * L))


def zero_states(stage, P, N):
    """The ZeRO paper's model states a device, K = 12, 16-bit W and G."""
    return {0: 16 * P, 1: 4 * P + 12 * P / N, 2: 2 * P + 14 * P / N, 3: 16 * P / N}[stage]


def peak_bf16(hwdir, name):
    with open(os.path.join(hwdir, name + ".json"), encoding="utf-8") as f:
        flops = json.load(f)["chip"]["flops"]
    return flops.get("bf16", flops.get("fp16"))["value"]


def plan(binary, row, hwdir):
    """The planner's JSON for a run row, or (None, why)."""
    cmd = [binary, "plan", "--model", "gpt"] + row["model"].split() + [
        "--vocab", str(VOCAB), "--max-seq", str(SEQ), "--hardware",
        os.path.join(hwdir, row["hw"] + ".json"), "--chips", row["chips"], "--mesh",
        row["mesh"], "--batch-tokens", str(int(row["seqs"]) * SEQ), "--seq", str(SEQ),
        "--top", "1", "--json"] + row["flags"].split()
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:    # a plan none of whose layouts fits exits 1 after its JSON
        return json.loads(p.stdout), ""
    except ValueError:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[0][:90]


def outcome(js):
    """(step seconds, mfu, feasible, model-state bytes) of the run's layout."""
    if js["best"]:
        b, ok = js["best"][0], True
    elif js["infeasible"]:
        b, ok = js["infeasible"][0], False
    else:
        return None, None, False, None
    m = b.get("memory_per_device", {})
    states = m.get("parameters", 0) + m.get("gradients", 0) + m.get("optimizer", 0)
    return (b.get("step_seconds") if ok else None), b.get("mfu"), ok, states


def tols(row):
    """(target, bound): the row's target tolerance and, for a known gap
    (tol "T|K"), the bound it must stay within until the gap is closed;
    a verdict or ranking row's tol is "-" or "-|known"."""
    t = row["tol"].split("|")
    num = lambda x: float(x) if x not in ("-", "known") else None
    return num(t[0]), (num(t[1]) if len(t) > 1 else None), len(t) > 1


def judge(row, runs, hwdir):
    """(value shown, relative or absolute error or None, passed, note) of one row
    from the runs' outcomes {id: (step, mfu, feasible, states) or (None, why)}."""
    chk, exp = row["check"], row["expected"]
    if chk == "faster":
        a, b = exp.split("<")
        ra, rb = runs.get(a), runs.get(b)
        if not ra or not rb or ra[0] is None or rb[0] is None:
            return "-", None, False, "a run failed"
        good = ra[0] < rb[0]
        return f"{ra[0]:.3g} < {rb[0]:.3g}", None, good, "" if good else "ranked the other way"
    src = row["model"][1:] if row["model"].startswith("@") else row["id"]
    r = runs.get(src)
    if r is None or (len(r) == 2 and r[0] is None):
        return "-", None, False, r[1] if r else "no run"
    step, mfu, feasible, states = r
    if chk == "oom":
        return ("refused" if not feasible else "fits"), None, not feasible, \
            "" if not feasible else "accepted a layout that ran out of memory"
    if chk == "fits":
        return ("fits" if feasible else "refused"), None, feasible, ""
    if not feasible and chk != "states":
        return "refused", None, False, "refused a layout that ran"
    if chk in ("tflops", "step"):
        L, h, _ = shape(row["model"])
        B, chips = int(row["seqs"]), int(row["chips"])
        want = eq3_flops(B, L, h) / (float(exp) * 1e12 * chips) if chk == "tflops" else float(exp)
        err = step / want - 1
        return f"{step:.3g} s vs {want:.3g} s", err, abs(err) <= tols(row)[0], ""
    if chk == "mfu":
        base = next(x for x in ROWS if x["id"] == src)
        L, h, _ = shape(base["model"])
        got = model_flops(int(base["seqs"]), L, h) / (
            step * int(base["chips"]) * peak_bf16(hwdir, base["hw"]))
        err = got - float(exp)
        return f"{got:.3f} vs {float(exp):.3f}", err, abs(err) <= tols(row)[0], ""
    if chk == "states":
        L, h, _ = shape(row["model"])
        want = zero_states(int(exp[4:]), psi(L, h), int(row["chips"]))
        err = states / want - 1
        return f"{states / 1e9:.3g} GB vs {want / 1e9:.3g} GB", err, \
            abs(err) <= tols(row)[0], ""
    return "-", None, False, f"unknown check {chk}"


ROWS = []


def run_all(binary, hwdir, only):
    runs = {}
    for row in ROWS:
        if row["model"] in ("-",) or row["model"].startswith("@"):
            continue
        if only and not row["id"].startswith(only):
            continue
        js, why = plan(binary, row, hwdir)
        runs[row["id"]] = outcome(js) if js else (None, why)
    return runs


def main():
    opts = parse_args(sys.argv[1:])
    ROWS.extend(read_table(opts["table"]))
    now = run_all(opts["bin"], opts["hwdir"], opts["only"])
    old = run_all(opts["before"], opts["before_hwdir"] or opts["hwdir"], opts["only"]) \
        if opts["before"] else None
    steps, old_steps, failed, gaps, steps_targeted = [], [], [], [], []
    md = opts["markdown"]
    if md:
        print("| row | source | check | planner | error |" + (" before |" if old else ""))
        print("|---|---|---|---|---|" + ("---|" if old else ""))
    for row in ROWS:
        if opts["only"] and not row["id"].startswith(opts["only"]) and row["check"] != "faster":
            continue
        shown, err, good, note = judge(row, now, opts["hwdir"])
        e = "" if err is None else (f"{100 * err:+.1f} pts" if row["check"] == "mfu"
                                    else f"{100 * err:+.1f}%")
        before = ""
        if old is not None:
            bs, berr, bgood, bnote = judge(row, old, opts["hwdir"])
            before = ("ok" if bgood else "wrong") if berr is None else (
                f"{100 * berr:+.1f}" + (" pts" if row["check"] == "mfu" else "%"))
            if berr is not None and row["check"] in ("tflops", "step"):
                old_steps.append(abs(berr))
            elif bs == "-":
                before = "n/a: " + bnote[:40]
        _, bound, known = tols(row)
        if err is not None and row["check"] in ("tflops", "step"):
            steps.append(abs(err))
            if not known:
                steps_targeted.append(abs(err))
        mark = "ok  " if good else "FAIL"
        if not good and known:
            # a known gap: reported, and held to its bound until it is closed
            held = err is not None and bound is not None and abs(err) <= bound
            held = held or (err is None and bound is None)
            mark = "GAP " if held else "FAIL"
            gaps.append(row["id"])
            if not held:
                failed.append(row["id"])
        elif not good:
            failed.append(row["id"])
        if md:
            print(f"| {row['id']} | {row['source']} | {row['check']} | {shown} | "
                  f"{e or mark.strip()} |" + (f" {before} |" if old else ""))
        else:
            print(f"{mark}  {row['id']:<22} {row['check']:<7} {shown:<28} {e:>10}"
                  + (f"   before {before}" if old else "") + (f"   ({note})" if note else ""))
    avg = sum(steps) / len(steps) if steps else 0
    worst = max(steps) if steps else 0
    print(f"\nstep time: {len(steps)} checks, mean |error| {100 * avg:.1f}% (target 10%), "
          f"worst {100 * worst:.1f}% (target 20%)")
    if steps_targeted:
        print(f"without the known gaps: {len(steps_targeted)} checks, mean |error| "
              f"{100 * sum(steps_targeted) / len(steps_targeted):.1f}%, worst "
              f"{100 * max(steps_targeted):.1f}%")
    if old_steps:
        print(f"before: {len(old_steps)} checks, mean |error| "
              f"{100 * sum(old_steps) / len(old_steps):.1f}%, worst {100 * max(old_steps):.1f}%")
    if avg > MEAN_BOUND:
        failed.append(f"mean step error past {100 * MEAN_BOUND:.0f}%")
    if steps_targeted and sum(steps_targeted) / len(steps_targeted) > MEAN_TARGETED_BOUND:
        failed.append(f"mean step error without the known gaps past "
                      f"{100 * MEAN_TARGETED_BOUND:.0f}%")
    print(f"{len(ROWS) - len(gaps) - len(failed)} of {len(ROWS)} rows within their targets; "
          f"{len(gaps)} known gaps (GAP: past the target, within the bound the table records)"
          + (f": {' '.join(gaps)}" if gaps else ""))
    if failed:
        print("failed: " + " ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
