"""Helpers shared by the benchmark scripts: run the fastpath binary, read its JSON lines."""
import json
import os
import re
import subprocess
import sys
import threading

FP = os.environ.get("FASTPATH", "target/release/fastpath")


def last_json(text):
    """The last line of `text` that is a JSON object."""
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            pass
    sys.exit(f"bench: no JSON in {text[-500:]!r}")


# A long command's line per phase (`bench ddos: phase 3/15 (...): 2 done in 45 s, about ...`).
PHASE_LINE = re.compile(r"^[a-z][a-z -]*: (phase \d+/\d+ |\d+ phases done in )")


def run_forwarding_phases(cmd, echo=sys.stderr):
    """Runs `cmd` to its end; returns (returncode, stdout, stderr). Its lines per phase
    (PHASE_LINE) go on to `echo` as they come, so a sitting shows where a long step is."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []

    def pump():
        for line in p.stderr:
            err.append(line)
            if PHASE_LINE.match(line):
                echo.write("  " + line)
                echo.flush()

    t = threading.Thread(target=pump)
    t.start()
    out = p.stdout.read()
    p.wait()
    t.join()
    return p.returncode, out, "".join(err)


def fp(args, wait=True):
    """Runs fastpath; returns its last JSON object (or stdout without --json). wait=False: Popen.
    Its progress lines (one per phase of a long command) are passed on to stderr."""
    cmd = [FP] + args
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    code, out, err = run_forwarding_phases(cmd)
    if code != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed: {err.strip()}")
    return last_json(out) if "--json" in args else out


def ready(p):
    """Waits for a Popen'ed fastpath --json to print its {"type":"ready"} line."""
    while True:
        line = p.stdout.readline()
        if not line:
            sys.exit(f"bench: exited early: {p.stderr.read()}")
        try:
            if json.loads(line).get("type") == "ready":
                return
        except ValueError:
            pass


def finish(p):
    """SIGTERM a Popen'ed fastpath --json (a process we started) and return its summary."""
    p.send_signal(15)
    out, err = p.communicate(timeout=30)
    if p.returncode != 0:
        sys.exit(f"bench: receiver failed: {err}")
    return last_json(out)
