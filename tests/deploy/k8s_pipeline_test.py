"""Runs, on 127.0.0.1, exactly the processes the disaggregated overlay
describes: each workload's container args and ConfigMap flagfiles as
rendered, with only addresses and paths mapped to local ones (Service and
pod DNS names to local ports, volumes to temporary directories), one process
per Deployment and every StatefulSet replica. Then: ingest and ask through
the orchestrator with the `twice` CLI, every document in the one store
replica, every metric deploy/METRICS.md names on every role, request ids
across roles in the JSON logs, backup and restore of the store, and
graceful termination.
The two Secrets deploy/README.md tells the user to create (the internal
token, the tenant tokens) are written into their volumes as Kubernetes
would mount them; without the internal one a role refuses to start.

Needs the built binaries: TWICE_BINARY_DIR (set by ctest) holds
services/twice-server and services/twice.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_render  # noqa: E402
from k8s_render import ROOT, flag_value, workloads  # noqa: E402

BINARY_DIR = os.environ.get("TWICE_BINARY_DIR", os.path.join(ROOT, "build"))
SERVER = os.path.join(BINARY_DIR, "services", "twice-server")
CLI = os.path.join(BINARY_DIR, "services", "twice")
START_ORDER = ["store", "prefill", "decode", "orchestrator"]
# What `kubectl create secret generic twice-internal --from-file=token=...`
# and `... twice-tenant-tokens --from-file=tokens=...` would mount.
INTERNAL_TOKEN = "k8s-test-internal-0123456789abcdef"
TENANT = "acme"
TENANT_TOKEN = "k8s-test-acme-token-0123456789"
SECRET_FILES = {
    "twice-internal": {"token": INTERNAL_TOKEN + "\n"},
    "twice-tenant-tokens": {"tokens": f"{TENANT_TOKEN} {TENANT}\n"},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric_table():
    """(name, roles) rows of deploy/METRICS.md."""
    rows = []
    with open(os.path.join(ROOT, "deploy", "METRICS.md")) as f:
        for line in f:
            m = re.match(r"\|\s*`(twice_[a-z_]+)`\s*\|[^|]*\|[^|]*\|\s*([^|]+?)\s*\|", line)
            if m:
                rows.append((m.group(1), m.group(2)))
    return rows


class Process:
    def __init__(self, role, name, args, log_path):
        self.role, self.name, self.args = role, name, args
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([SERVER] + args, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.wait(timeout=10)
            with open(log_path) as f:
                raise RuntimeError(f"{name} did not start: {f.read()}")

    def log_lines(self):
        with open(self.log_path) as f:
            return [json.loads(l) for l in f if l.startswith("{")]


class DisaggregatedManifestPipelineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for binary in (SERVER, CLI):
            if not os.access(binary, os.X_OK):
                k8s_render.skip(f"{binary} is not built")
        cls.docs = k8s_render.render("disaggregated")
        cls.tmp = tempfile.mkdtemp(prefix="twice-k8s-")
        cls.processes = []
        try:
            cls.start()
        except BaseException:
            cls.stop_all()
            raise

    @classmethod
    def start(cls):
        config = next(d for d in cls.docs if d["kind"] == "ConfigMap")["data"]
        # One local process per Deployment, every StatefulSet replica.
        plan = []
        for w in workloads(cls.docs):
            container = w["spec"]["template"]["spec"]["containers"][0]
            role = flag_value(container["args"], "role")
            count = w["spec"]["replicas"] if w["kind"] == "StatefulSet" else 1
            for i in range(count):
                name = f"{w['metadata']['name']}-{i}" if w["kind"] == "StatefulSet" else w["metadata"]["name"]
                plan.append({"role": role, "name": name, "workload": w, "container": container,
                             "grpc": free_port(), "metrics": free_port()})
        # DNS names the manifests use -> local addresses.
        services = {d["metadata"]["name"]: d for d in cls.docs if d["kind"] == "Service"}
        addresses = {}
        for p in plan:
            w = p["workload"]
            local = f"127.0.0.1:{p['grpc']}"
            if w["kind"] == "StatefulSet":
                addresses[f"{p['name']}.{w['spec']['serviceName']}:50051"] = local
            for sname, s in services.items():
                sel = s["spec"]["selector"]
                labels = w["spec"]["template"]["metadata"]["labels"]
                if all(labels.get(k) == v for k, v in sel.items()) and w["kind"] == "Deployment":
                    addresses[f"dns:///{sname}:50051"] = local
                    addresses[f"{sname}:50051"] = local
        cls.addresses = addresses
        # The image's default model, made locally the way the image makes it.
        model = os.path.join(cls.tmp, "model")
        subprocess.run([CLI, "init-model", "--arch=based", "--preset=tiny", "--seed=0",
                        f"--out={model}",
                        f"--tokenizer={os.path.join(ROOT, 'models/tokenizers/gpt2/tokenizer.json')}"],
                       check=True, capture_output=True)
        cls.store_names = []
        for role in START_ORDER:
            for p in [p for p in plan if p["role"] == role]:
                root = os.path.join(cls.tmp, p["name"])
                paths = {"/usr/share/twice/models/default": model}
                volumes = {v["name"]: v for v in p["workload"]["spec"]["template"]["spec"]["volumes"]}
                for m in p["container"]["volumeMounts"]:
                    local = os.path.join(root, m["name"])
                    os.makedirs(local, exist_ok=True)
                    paths[m["mountPath"]] = local
                    secret = volumes.get(m["name"], {}).get("secret")
                    if secret is not None:
                        for key, content in SECRET_FILES[secret["secretName"]].items():
                            with open(os.path.join(local, key), "w") as f:
                                f.write(content)
                config_dir = paths[next(m["mountPath"] for m in p["container"]["volumeMounts"]
                                        if m["name"] == "config")]

                def localize(text, paths=paths):
                    # One pass each, longest names first, so a replacement
                    # is never itself replaced.
                    names = sorted(addresses, key=len, reverse=True)
                    text = re.sub("|".join(map(re.escape, names)),
                                  lambda m: addresses[m.group(0)], text)
                    mounts = sorted(paths, key=len, reverse=True)
                    return re.sub(r"(?<![\w/.])(" + "|".join(map(re.escape, mounts)) + r")(?=/|$|\s|,)",
                                  lambda m: paths[m.group(1)], text, flags=re.M)

                for file_name, content in config.items():
                    with open(os.path.join(config_dir, file_name), "w") as f:
                        f.write(localize(content))
                args = []
                for a in p["container"]["args"]:
                    if flag_value([a], "listen") is not None:
                        a = f"--listen=127.0.0.1:{p['grpc']}"
                    elif flag_value([a], "metrics_listen") is not None:
                        a = f"--metrics_listen=127.0.0.1:{p['metrics']}"
                    args.append(localize(a))
                proc = Process(role, p["name"], args, os.path.join(cls.tmp, p["name"] + ".log"))
                proc.grpc, proc.metrics, proc.paths = p["grpc"], p["metrics"], paths
                proc.grace = p["workload"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
                cls.processes.append(proc)
        stores = [p for p in cls.processes if p.role == "store"]
        # The address the clients were given.
        client = next(p for p in cls.processes if p.role == "prefill")
        flags = open(os.path.join(client.paths["/etc/twice"], "store-client.flags")).read()
        cls.store_names = flag_value(flags.split(), "store_address").split(",")
        cls.stores = {f"127.0.0.1:{p.grpc}": p for p in stores}
        cls.orchestrator = next(p for p in cls.processes if p.role == "orchestrator")

    @classmethod
    def stop_all(cls):
        for p in reversed(cls.processes):
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()

    @classmethod
    def tearDownClass(cls):
        cls.stop_all()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def cli(self, *args, server=None, check=True):
        # The public API takes the tenant's token; a store role's admin
        # RPCs take the internal token (an internal peer's).
        token = INTERNAL_TOKEN if server else TENANT_TOKEN
        server = server or f"127.0.0.1:{self.orchestrator.grpc}"
        r = subprocess.run([CLI, *args, f"--server={server}", f"--token={token}", "--json",
                            "--timeout-seconds=120"],
                           capture_output=True, text=True)
        if check:
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout) if r.stdout.strip() else {}

    def scrape(self, process):
        with urllib.request.urlopen(f"http://127.0.0.1:{process.metrics}/metrics", timeout=30) as r:
            return r.read().decode()

    def sample(self, text, name):
        m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M)
        return float(m.group(1)) if m else None

    def test_1_pipeline_placement_metrics_logs(self):
        self.assertEqual(sorted(p.role for p in self.processes),
                         ["decode", "orchestrator", "prefill", "store"])
        self.assertEqual(len(self.store_names), 1)
        names = [f"doc-{i}" for i in range(6)]
        doc_ids = []
        for i, name in enumerate(names):
            path = os.path.join(self.tmp, f"doc{i}.txt")
            with open(path, "w") as f:
                f.write(f"Document {i}. " + "The quick brown fox jumps over the lazy dog. " * (20 + i))
            out = self.cli("ingest", path, f"--doc-id={name}")
            self.assertEqual(out["doc_id"], name)
            self.assertGreater(out["tokens"], 100)
            doc_ids.append(out["doc_id"])
        doc_ids.sort()
        for doc in doc_ids[:3]:
            answer = self.cli("ask", doc, "What jumps?", "--max-tokens=4")
            self.assertIn("answer", answer)
            self.assertGreaterEqual(answer["usage"]["states_reused"], 1)
            self.assertEqual(answer["usage"]["states_recomputed"], 0)
            self.assertGreater(answer["usage"]["tokens_decoded"], 0)
        listed = self.cli("docs")
        ids = sorted(d["doc_id"] if "doc_id" in d else d.get("document_id")
                     for d in (listed["documents"] if isinstance(listed, dict) else listed))
        self.assertEqual(ids, doc_ids)

        # The one store replica holds every document.
        stats = self.cli("store", "stats", server=self.store_names[0])
        self.assertEqual(stats["document_count"], len(doc_ids))
        self.assertGreater(stats["state_count"], 0)

        # Every metric METRICS.md names, on every role that lists it.
        table = metric_table()
        self.assertGreater(len(table), 20)
        for p in self.processes:
            text = self.scrape(p)
            for name, roles in table:
                if roles == "every" or p.role in roles.replace(",", " ").split():
                    self.assertRegex(text, rf"(?m)^# TYPE {name} ", f"{name} missing on {p.name}")
        orch = self.scrape(self.orchestrator)
        self.assertGreaterEqual(self.sample(orch, "twice_ask_ttft_seconds_count"), 3)
        self.assertGreaterEqual(self.sample(orch, "twice_states_reused_total"), 3)
        prefill = next(p for p in self.processes if p.role == "prefill")
        self.assertGreater(self.sample(self.scrape(prefill), "twice_prefill_tokens_total"), 600)
        decode = next(p for p in self.processes if p.role == "decode")
        self.assertGreater(self.sample(self.scrape(decode), "twice_decode_tokens_total"), 0)
        for p in self.stores.values():
            self.assertGreater(self.sample(self.scrape(p), "twice_store_state_bytes"), 0)
        self.assertRegex(orch, r'twice_grpc_requests_total\{code="0",method="/twice.v1.Orchestrator/Ask"\} 3')

        # JSON logs; the orchestrator's request ids reach prefill and store.
        orch_ids = {l["request_id"] for l in self.orchestrator.log_lines() if "request_id" in l}
        self.assertTrue(orch_ids)
        prefill_ids = {l["request_id"] for l in prefill.log_lines()
                       if l.get("event") == "prefill.done" and "request_id" in l}
        self.assertTrue(prefill_ids & orch_ids, (prefill_ids, orch_ids))
        for p in self.processes:
            lines = p.log_lines()
            self.assertTrue(lines, p.name)
            for l in lines:
                self.assertIn("ts", l)
                self.assertIn("event", l)

    def test_2_backup_and_restore(self):
        name = self.store_names[0]
        before = self.cli("store", "stats", server=name)
        self.assertGreater(before["document_count"], 0)
        backup = self.cli("store", "backup", "nightly", server=name)
        self.assertEqual(backup["document_count"], before["document_count"])
        self.assertGreater(backup["bytes"], 0)
        self.assertTrue(os.path.isfile(os.path.join(backup["path"], "CURRENT")))
        # The name is one path component, and is never overwritten.
        bad = subprocess.run([CLI, "store", "backup", "../x", f"--server={name}",
                              f"--token={INTERNAL_TOKEN}", "--json"],
                             capture_output=True, text=True)
        self.assertNotEqual(bad.returncode, 0)
        again = subprocess.run([CLI, "store", "backup", "nightly", f"--server={name}",
                                f"--token={INTERNAL_TOKEN}", "--json"],
                               capture_output=True, text=True)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("ALREADY_EXISTS", again.stdout + again.stderr)
        # Restore offline into a new directory, then serve it.
        restored = os.path.join(self.tmp, "restored")
        out = self.cli("store", "restore", backup["path"], f"--data-dir={restored}")
        self.assertEqual(out["bad"], 0)
        self.assertEqual(out["documents_checked"], before["document_count"])
        refused = subprocess.run([CLI, "store", "restore", backup["path"], f"--data-dir={restored}", "--json"],
                                 capture_output=True, text=True)
        self.assertNotEqual(refused.returncode, 0)
        port = free_port()
        proc = subprocess.Popen([SERVER, "--role=store", f"--listen=127.0.0.1:{port}",
                                 f"--data_dir={restored}"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        try:
            self.assertIn("listening", proc.stdout.readline())
            stats = self.cli("store", "stats", server=f"127.0.0.1:{port}")
            self.assertEqual(stats["document_count"], before["document_count"])
            self.assertEqual(stats["state_count"], before["state_count"])
            verify = self.cli("store", "verify", server=f"127.0.0.1:{port}")
            self.assertEqual(verify.get("bad", []), [])
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)

    def test_3_security_defaults(self):
        # The public API wants a tenant token; a token of the wrong kind
        # gets nowhere.
        for token in ("", INTERNAL_TOKEN):
            r = subprocess.run([CLI, "docs", f"--server=127.0.0.1:{self.orchestrator.grpc}",
                                f"--token={token}", "--json"], capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("UNAUTHENTICATED", r.stdout + r.stderr)
        # A store replica answers no admin call without the internal token.
        store = self.store_names[0]
        r = subprocess.run([CLI, "store", "stats", f"--server={store}", "--json"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("UNAUTHENTICATED", r.stdout + r.stderr)
        # Without its Secret a role does not start, and says which file and
        # Secret it needs: the internal token (every role), the tenant
        # tokens (the public API).
        prefill = next(p for p in self.processes if p.role == "prefill")
        self.assert_refuses_without_secret(prefill, "/etc/twice-internal", "token", "twice-internal")
        self.assert_refuses_without_secret(self.orchestrator, "/etc/twice-tokens", "tokens",
                                           "twice-tenant-tokens")

    def assert_refuses_without_secret(self, process, mount, key, secret):
        """Starts `process`'s command line again (fresh ports) with the
        Secret file mount/key gone, and expects a startup error naming it."""
        path = os.path.join(process.paths[mount], key)
        os.rename(path, path + ".away")
        try:
            r = subprocess.run([SERVER, *process.args, f"--listen=127.0.0.1:{free_port()}",
                                f"--metrics_listen=127.0.0.1:{free_port()}"],
                               capture_output=True, text=True, timeout=60)
        finally:
            os.rename(path + ".away", path)
        self.assertNotEqual(r.returncode, 0, process.name)
        self.assertIn(secret, r.stderr)
        self.assertIn(path, r.stderr)

    def test_4_graceful_termination(self):
        # SIGTERM: every role drains and exits 0 within its pod's
        # terminationGracePeriodSeconds (the store last, as Kubernetes would
        # not guarantee; clients are already idle).
        for p in [p for p in self.processes if p.role != "store"] + list(self.stores.values()):
            started = time.monotonic()
            p.proc.send_signal(signal.SIGTERM)
            self.assertEqual(p.proc.wait(timeout=p.grace), 0, p.name)
            self.assertLess(time.monotonic() - started, p.grace)
            events = [l.get("event") for l in p.log_lines()]
            self.assertIn("server.draining", events, p.name)
            self.assertIn("server.stopped", events, p.name)


if __name__ == "__main__":
    unittest.main()
