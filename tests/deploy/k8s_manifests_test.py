"""Invariants of the rendered Kubernetes manifests (every overlay), checked
without a cluster: ports consistent with the flags, probes on gRPC health,
pinned images, limits on every container, hardened pods, the store as a
StatefulSet of one replica (disaggregated) or Ceph RADOS with one janitor
and no store role (disaggregated-ceph), only the public API exposed,
tenant tokens on the public API and the internal token on every role that
serves or calls internal RPCs by default.

    /usr/bin/python3 tests/deploy/k8s_manifests_test.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_render  # noqa: E402
from k8s_render import flag_value, workloads  # noqa: E402

OVERLAYS = ("single", "disaggregated", "disaggregated-ceph")
ROLES = {"all", "orchestrator", "prefill", "decode", "store", "janitor"}


class ManifestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = {o: k8s_render.render(o) for o in OVERLAYS}

    def each_container(self):
        for overlay, docs in self.docs.items():
            for w in workloads(docs):
                for c in w["spec"]["template"]["spec"]["containers"]:
                    yield overlay, w, c

    def test_workloads_present(self):
        single = {(w["kind"], w["metadata"]["name"]) for w in workloads(self.docs["single"])}
        self.assertEqual(single, {("Deployment", "twice-all")})
        disagg = {(w["kind"], w["metadata"]["name"]) for w in workloads(self.docs["disaggregated"])}
        self.assertEqual(disagg, {("Deployment", "twice-orchestrator"),
                                  ("Deployment", "twice-prefill"),
                                  ("Deployment", "twice-decode"),
                                  ("StatefulSet", "twice-store")})
        ceph = {(w["kind"], w["metadata"]["name"]) for w in workloads(self.docs["disaggregated-ceph"])}
        self.assertEqual(ceph, {("Deployment", "twice-orchestrator"),
                                ("Deployment", "twice-prefill"),
                                ("Deployment", "twice-decode"),
                                ("Deployment", "twice-janitor")})

    def test_roles_and_ports_match_flags(self):
        for overlay, w, c in self.each_container():
            name = f"{overlay}/{w['metadata']['name']}"
            args = c["args"]
            self.assertIn(flag_value(args, "role"), ROLES, name)
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            listen = flag_value(args, "listen")
            metrics = flag_value(args, "metrics_listen")
            self.assertIsNotNone(listen, name)
            self.assertIsNotNone(metrics, name)
            self.assertTrue(listen.startswith("0.0.0.0:"), name)
            self.assertEqual(int(listen.rsplit(":", 1)[1]), ports["grpc"], name)
            self.assertEqual(int(metrics.rsplit(":", 1)[1]), ports["metrics"], name)
            annotations = w["spec"]["template"]["metadata"].get("annotations", {})
            self.assertEqual(int(annotations["prometheus.io/port"]), ports["metrics"], name)
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                self.assertIn(probe, c, name)
                self.assertIn("grpc", c[probe], f"{name} {probe} must be a gRPC probe")
                self.assertEqual(c[probe]["grpc"]["port"], ports["grpc"], name)

    def test_images_pinned(self):
        for overlay, w, c in self.each_container():
            image = c["image"]
            self.assertIn(":", image.rsplit("/", 1)[-1], f"{image} has no tag")
            self.assertFalse(image.endswith(":latest"), image)

    def test_every_container_limited_and_hardened(self):
        for overlay, w, c in self.each_container():
            name = f"{overlay}/{w['metadata']['name']}"
            res = c["resources"]
            for kind in ("requests", "limits"):
                self.assertIn("cpu", res[kind], name)
                self.assertIn("memory", res[kind], name)
            pod = w["spec"]["template"]["spec"]
            self.assertTrue(pod["securityContext"]["runAsNonRoot"], name)
            self.assertTrue(c["securityContext"]["readOnlyRootFilesystem"], name)
            self.assertFalse(c["securityContext"]["allowPrivilegeEscalation"], name)
            # Graceful termination fits: drain delay + grace < the period.
            flags = self.flags_of(overlay, c)
            budget = int(flags.get("drain_delay_seconds", 0)) + int(flags.get("shutdown_grace_seconds", 10))
            self.assertLess(budget, pod["terminationGracePeriodSeconds"], name)

    def flags_of(self, overlay, container):
        """Flags from the container args and the ConfigMap flagfiles they
        name (followed recursively)."""
        config = next(d for d in self.docs[overlay] if d["kind"] == "ConfigMap"
                      and d["metadata"]["name"].startswith("twice-config"))
        mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "config")
        flags = {}

        def read(lines):
            for line in lines:
                line = line.strip()
                if not line.startswith("--"):
                    continue
                key, _, value = line[2:].partition("=")
                key = key.replace("-", "_")
                if key == "flagfile":
                    self.assertTrue(value.startswith(mount + "/"), value)
                    read(config["data"][value[len(mount) + 1:]].splitlines())
                else:
                    flags[key] = value
        read(container["args"])
        return flags

    def test_config_from_configmap(self):
        for overlay, w, c in self.each_container():
            pod = w["spec"]["template"]["spec"]
            volumes = {v["name"]: v for v in pod["volumes"]}
            self.assertIn("configMap", volumes["config"])
            flags = self.flags_of(overlay, c)
            self.assertEqual(flags.get("log_format"), "json")
            # No configuration or secrets through the environment.
            self.assertNotIn("env", c)
            self.assertNotIn("envFrom", c)

    def test_store_is_statefulset_with_volumes(self):
        docs = self.docs["disaggregated"]
        store = next(w for w in workloads(docs) if w["metadata"]["name"] == "twice-store")
        self.assertEqual(store["kind"], "StatefulSet")
        self.assertTrue(store["spec"]["volumeClaimTemplates"])
        service = next(d for d in docs if d["kind"] == "Service"
                       and d["metadata"]["name"] == store["spec"]["serviceName"])
        self.assertEqual(service["spec"]["clusterIP"], "None")
        # One replica (Twice does not shard), which every client names.
        self.assertEqual(store["spec"]["replicas"], 1)
        for w in workloads(docs):
            c = w["spec"]["template"]["spec"]["containers"][0]
            if flag_value(c["args"], "role") == "store":
                continue
            self.assertEqual(self.flags_of("disaggregated", c)["store_address"],
                             "twice-store-0.twice-store:50051")
        single = workloads(self.docs["single"])[0]
        self.assertEqual(single["spec"]["strategy"]["type"], "Recreate")
        claims = [v for v in single["spec"]["template"]["spec"]["volumes"]
                  if "persistentVolumeClaim" in v]
        self.assertEqual(len(claims), 1)

    def test_ceph_overlay_uses_rados_everywhere(self):
        docs = self.docs["disaggregated-ceph"]
        self.assertFalse([d for d in docs if "store" in d["metadata"]["name"]
                          and d["kind"] != "ConfigMap"])
        ceph_conf = next(d for d in docs if d["kind"] == "ConfigMap"
                         and d["metadata"]["name"].startswith("twice-ceph"))
        self.assertIn("mon_host", ceph_conf["data"]["ceph.conf"])
        for w in workloads(docs):
            c = w["spec"]["template"]["spec"]["containers"][0]
            pod = w["spec"]["template"]["spec"]
            name = w["metadata"]["name"]
            flags = self.flags_of("disaggregated-ceph", c)
            self.assertEqual(flags.get("store"), "rados", name)
            self.assertNotIn("store_address", flags, name)
            self.assertEqual(self.secret_mount(c, pod, "rook-ceph-client-twice"),
                             "/etc/twice-ceph-key", name)
            mounts = {m["mountPath"] for m in c["volumeMounts"]}
            self.assertIn(os.path.dirname(flags["rados_conf"]), mounts, name)
        janitor = next(w for w in workloads(docs) if w["metadata"]["name"] == "twice-janitor")
        self.assertEqual(janitor["spec"]["replicas"], 1)
        # The Rook resources the overlay's README step applies.
        import yaml
        with open(os.path.join(k8s_render.OVERLAYS, "disaggregated-ceph", "rook.yaml")) as f:
            rook = [d for d in yaml.safe_load_all(f) if d]
        pools = {d["metadata"]["name"] for d in rook if d["kind"] == "CephBlockPool"}
        self.assertEqual(pools, {"twice-meta", "twice-states"})
        client = next(d for d in rook if d["kind"] == "CephClient")
        self.assertEqual(client["metadata"]["name"], self.flags_of(
            "disaggregated-ceph", janitor["spec"]["template"]["spec"]["containers"][0])["rados_user"])
        for pool in pools:
            self.assertIn(f"pool={pool}", client["spec"]["caps"]["osd"])

    def test_only_the_api_is_external(self):
        for overlay, docs in self.docs.items():
            external = [d["metadata"]["name"] for d in docs if d["kind"] == "Service"
                        and d["spec"].get("type", "ClusterIP") in ("LoadBalancer", "NodePort")]
            self.assertEqual(external, ["twice"], overlay)
            api = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "twice")
            selected = [w["metadata"]["name"] for w in workloads(docs)
                        if all(w["spec"]["template"]["metadata"]["labels"].get(k) == v
                               for k, v in api["spec"]["selector"].items())]
            self.assertEqual(selected, ["twice-all" if overlay == "single" else "twice-orchestrator"])

    def test_disaggregated_scaling_and_policies(self):
        docs = self.docs["disaggregated"]
        hpas = {d["spec"]["scaleTargetRef"]["name"] for d in docs
                if d["kind"] == "HorizontalPodAutoscaler"}
        self.assertEqual(hpas, {"twice-prefill", "twice-decode"})
        pdbs = {d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
                for d in docs if d["kind"] == "PodDisruptionBudget"}
        self.assertEqual(pdbs, {"api", "prefill", "decode", "store"})
        policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
        # The store accepts gRPC only from Twice pods.
        store_policy = [p for p in policies
                        if p["spec"]["podSelector"].get("matchLabels", {}).get(
                            "app.kubernetes.io/component") == "store"]
        self.assertEqual(len(store_policy), 1)
        sources = store_policy[0]["spec"]["ingress"][0]["from"]
        self.assertEqual(sources, [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "twice"}}}])
        # Only the api component has a rule without a source restriction.
        open_rules = [p["metadata"]["name"] for p in policies
                      for rule in p["spec"].get("ingress", []) if "from" not in rule]
        self.assertEqual(open_rules, ["twice-api-public"])
        deny = next(p for p in policies if p["metadata"]["name"] == "twice-default-deny")
        self.assertNotIn("ingress", deny["spec"])

    def secret_mount(self, container, pod, secret_name):
        """Mount path of the Secret volume `secret_name`, or None."""
        volumes = {v["name"]: v for v in pod["volumes"]}
        for m in container["volumeMounts"]:
            secret = volumes[m["name"]].get("secret")
            if secret is not None and secret["secretName"] == secret_name:
                self.assertTrue(m.get("readOnly"), m)
                return m["mountPath"]
        return None

    def test_internal_credentials_and_tenant_tokens_by_default(self):
        for overlay, w, c in self.each_container():
            name = f"{overlay}/{w['metadata']['name']}"
            pod = w["spec"]["template"]["spec"]
            flags = self.flags_of(overlay, c)
            role = flag_value(c["args"], "role")
            # The public API behind the LoadBalancer requires tenant tokens.
            if role in ("all", "orchestrator"):
                mount = self.secret_mount(c, pod, "twice-tenant-tokens")
                self.assertIsNotNone(mount, name)
                self.assertEqual(flags.get("auth_tokens_file"), mount + "/tokens", name)
            # Every role of the disaggregated overlay serves or calls
            # internal RPCs off loopback: the internal token, from a Secret.
            if overlay.startswith("disaggregated") and role != "janitor":
                mount = self.secret_mount(c, pod, "twice-internal")
                self.assertIsNotNone(mount, name)
                self.assertEqual(flags.get("internal_token_file"), mount + "/token", name)
            else:
                self.assertNotIn("internal_listen", flags, name)
        # deploy/README.md shows how to create both Secrets.
        readme = open(os.path.join(k8s_render.ROOT, "deploy", "README.md")).read()
        self.assertIn("create secret generic twice-internal", readme)
        self.assertIn("create secret generic twice-tenant-tokens", readme)

    def test_dashboard_uses_documented_metrics(self):
        import json
        import re
        root = k8s_render.ROOT
        documented = set(re.findall(r"^\| `(twice_[a-z_]+)`",
                                    open(os.path.join(root, "deploy", "METRICS.md")).read(), re.M))
        dashboard = json.load(open(os.path.join(root, "deploy", "grafana", "twice.json")))
        used = set()
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                for name in re.findall(r"twice_[a-z_]+", target["expr"]):
                    used.add(re.sub(r"_(bucket|sum|count)$", "", name))
        self.assertTrue(used)
        self.assertEqual(used - documented, set())


if __name__ == "__main__":
    unittest.main()
