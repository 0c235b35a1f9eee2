"""Shared by the deploy tests: renders a Kustomize overlay with kubectl and
parses the result (python3-yaml). Exit code 77 (skipped) when kubectl or
PyYAML is missing."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OVERLAYS = os.path.join(ROOT, "deploy", "k8s", "overlays")


def skip(reason):
    print("skipped: " + reason)
    sys.exit(77)


def render(overlay):
    try:
        import yaml  # noqa: F401
    except ImportError:
        skip("python3-yaml is not installed (scripts/setup.sh installs it)")
    import yaml
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        skip("kubectl is not installed (scripts/setup.sh installs it)")
    out = subprocess.run([kubectl, "kustomize", os.path.join(OVERLAYS, overlay)],
                         check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def workloads(docs):
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def flag_value(args, name):
    """Value of --name=VALUE (dashes or underscores) in a list of args."""
    for a in args:
        for spelling in (name, name.replace("_", "-")):
            if a.startswith("--" + spelling + "="):
                return a.split("=", 1)[1]
    return None
