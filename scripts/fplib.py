"""Helpers shared by the benchmark scripts: run the fastpath binary, read its JSON lines."""
import json
import os
import subprocess
import sys

FP = os.environ.get("FASTPATH", "target/release/fastpath")


def last_json(text):
    """The last line of `text` that is a JSON object."""
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            pass
    sys.exit(f"bench: no JSON in {text[-500:]!r}")


def fp(args, wait=True):
    """Runs fastpath; returns its last JSON object (or stdout without --json). wait=False: Popen."""
    cmd = [FP] + args
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed: {r.stderr.strip()}")
    return last_json(r.stdout) if "--json" in args else r.stdout


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
