#!/usr/bin/env python3
"""Checks every manifest in deploy/kubernetes/ without a cluster.

Each YAML document is validated against the JSON schema of its kind in
tests/kubernetes/schemas/ (compact schemas of the fields the manifests use, with
additionalProperties false, so a misspelt field fails), and the NPD plugin
config against a schema of node-problem-detector's custom plugin config. Then
the references between them are checked: the ConfigMap holds the plugin file
under its own name and NPD is told to load that file from where the ConfigMap is
mounted; the plugin runs `gpudoctor npd`; the scrape annotations name the
container's port; the probes, Service, volumes and environment line up; the
taint rule reads the condition the plugin sets and the agent tolerates the taint.

    check_manifests.py [--source-dir DIR] [--gpudoctor BIN]

With --gpudoctor, the options the manifests pass to `gpudoctor agent` and
`gpudoctor npd` are also looked up in that binary's --help.

Exit status: 0 passed, 1 failed, 77 skipped (python3-yaml or python3-jsonschema
missing).
"""

import argparse
import glob
import json
import os
import posixpath
import re
import subprocess
import sys

SKIP = 77
try:
    import yaml
    import jsonschema
except ImportError as error:
    print(f"SKIPPED: {error.name} is missing (apt-get install python3-yaml python3-jsonschema)")
    sys.exit(SKIP)

GPUDOCTOR_PATH = "/usr/local/bin/gpudoctor"
CONDITION = "GPUProblem"


class Checker:
    def __init__(self, source_dir):
        self.source_dir = source_dir
        self.manifests = os.path.join(source_dir, "deploy", "kubernetes")
        self.schemas = os.path.join(source_dir, "tests", "kubernetes", "schemas")
        self.failures = []
        self.objects = []  # (file name, document)
        self.json_files = {}  # file name -> (text, parsed)

    def fail(self, where, message):
        self.failures.append(f"{where}: {message}")

    def expect(self, condition, where, message):
        if not condition:
            self.fail(where, message)
        return condition

    # ---- loading and schemas

    def validator(self, schema_name):
        path = os.path.join(self.schemas, schema_name)
        with open(path) as f:
            schema = json.load(f)
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)

    def validate(self, where, validator, instance):
        for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
            path = "/".join(str(p) for p in error.absolute_path) or "(top)"
            self.fail(where, f"{path}: {error.message}")

    def load(self):
        names = sorted(os.listdir(self.manifests))
        if not names:
            self.fail(self.manifests, "no manifests")
        for name in names:
            path = os.path.join(self.manifests, name)
            with open(path) as f:
                text = f.read()
            if name.endswith((".yaml", ".yml")):
                try:
                    documents = [d for d in yaml.safe_load_all(text) if d is not None]
                except yaml.YAMLError as error:
                    self.fail(name, f"not YAML: {error}")
                    continue
                if not documents:
                    self.fail(name, "no document")
                for index, document in enumerate(documents):
                    where = f"{name}[{index}]"
                    if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
                        self.fail(where, "not a Kubernetes object (no kind)")
                        continue
                    schema = document["kind"].lower() + ".json"
                    if not os.path.exists(os.path.join(self.schemas, schema)):
                        self.fail(where, f"no schema for kind {document['kind']} (tests/kubernetes/schemas/{schema})")
                        continue
                    self.validate(f"{where} {document['kind']}", self.validator(schema), document)
                    self.objects.append((name, document))
            elif name.endswith(".json"):
                try:
                    parsed = json.loads(text)
                except ValueError as error:
                    self.fail(name, f"not JSON: {error}")
                    continue
                self.json_files[name] = (text, parsed)
                if parsed.get("plugin") == "custom":
                    self.validate(name, self.validator("npd-custom-plugin-monitor.json"), parsed)
                else:
                    self.fail(name, "a JSON file that is not an NPD custom plugin config: add a schema for it")
            else:
                self.fail(name, "neither YAML nor JSON: the deploy test checks every file here")

    def find(self, kind, name=None):
        return [(f, d) for f, d in self.objects
                if d.get("kind") == kind and (name is None or d.get("metadata", {}).get("name") == name)]

    # ---- cross-references

    def check_pod_spec(self, where, daemonset):
        spec = daemonset["spec"]
        template = spec["template"]
        labels = template["metadata"].get("labels", {})
        selector = spec["selector"].get("matchLabels", {})
        self.expect(selector and all(labels.get(k) == v for k, v in selector.items()), where,
                    f"the selector {selector} does not match the pod labels {labels}")
        pod = template["spec"]
        account = pod.get("serviceAccountName")
        if account:
            namespace = daemonset["metadata"].get("namespace")
            self.expect(any(d["metadata"].get("namespace") == namespace for _, d in self.find("ServiceAccount", account)),
                        where, f"serviceAccountName {account} is not a ServiceAccount in the manifests")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounted = set()
        for container in pod["containers"]:
            cwhere = f"{where} container {container['name']}"
            for mount in container.get("volumeMounts", []):
                mounted.add(mount["name"])
                volume = volumes.get(mount["name"])
                if not self.expect(volume, cwhere, f"mounts {mount['name']}, which is no volume"):
                    continue
                if "hostPath" in volume and mount["name"] not in ("history", "run-journal", "tmp"):
                    self.expect(mount.get("readOnly"), cwhere,
                                f"host path {volume['hostPath']['path']} is mounted writable")
            env = {e["name"]: e for e in container.get("env", [])}
            for value in container.get("args", []) + container.get("command", []):
                for var in re.findall(r"\$\((\w+)\)", value):
                    self.expect(var in env, cwhere, f"$({var}) in its arguments is not in its env")
            sc = container.get("securityContext", {})
            self.expect(sc.get("privileged") is False, cwhere, "must say privileged: false")
            self.expect(sc.get("allowPrivilegeEscalation") is False, cwhere, "must say allowPrivilegeEscalation: false")
            caps = sc.get("capabilities", {})
            self.expect("ALL" in caps.get("drop", []), cwhere, "must drop ALL capabilities")
            self.expect(caps.get("add", []) == ["SYSLOG"], cwhere,
                        f"adds {caps.get('add')}: SYSLOG alone (reading /dev/kmsg) is needed")
            self.expect(not pod.get("hostPID") and not pod.get("hostNetwork"), where, "hostPID/hostNetwork must be off")
            for name, e in env.items():
                if name == "GPUDOCTOR_NVML_LIB":
                    self.check_under_mount(cwhere, e.get("value", ""), container, volumes, "GPUDOCTOR_NVML_LIB")
        for name in volumes:
            self.expect(name in mounted, where, f"volume {name} is mounted by no container")
        return pod, volumes

    def mount_for(self, path, container):
        best = None
        for mount in container.get("volumeMounts", []):
            root = mount["mountPath"].rstrip("/") or "/"
            if path == root or path.startswith(root + "/"):
                if best is None or len(root) > len(best["mountPath"]):
                    best = mount
        return best

    def check_under_mount(self, where, path, container, volumes, what, writable=False):
        mount = self.mount_for(path, container)
        if not self.expect(mount, where, f"{what} {path} is under no volume mount"):
            return None
        if writable:
            self.expect(not mount.get("readOnly"), where, f"{what} {path} is on a read-only mount")
        return mount

    def check_agent(self):
        where = "gpudoctor-agent-daemonset.yaml"
        daemonsets = self.find("DaemonSet", "gpudoctor-agent")
        if not self.expect(len(daemonsets) == 1, where, "one DaemonSet gpudoctor-agent"):
            return
        daemonset = daemonsets[0][1]
        self.expect("namespace" not in daemonset["metadata"], where, "the agent's DaemonSet sets no namespace (-n)")
        pod, volumes = self.check_pod_spec(where, daemonset)
        container = pod["containers"][0]
        args = container.get("args", [])
        self.expect(args[:1] == ["agent"], where, f"runs {args[:1]}, not `gpudoctor agent`")
        options = option_values(args)
        listen = options.get("--listen", "")
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        self.expect(listen == f"0.0.0.0:{ports.get('metrics')}", where,
                    f"--listen {listen} is not 0.0.0.0 on the metrics port {ports.get('metrics')}")
        annotations = daemonset["spec"]["template"]["metadata"].get("annotations", {})
        self.expect(annotations.get("prometheus.io/scrape") == "true", where, "prometheus.io/scrape is not \"true\"")
        self.expect(annotations.get("prometheus.io/port") == str(ports.get("metrics")), where,
                    f"prometheus.io/port {annotations.get('prometheus.io/port')} is not the container's "
                    f"metrics port {ports.get('metrics')}")
        self.expect(annotations.get("prometheus.io/path") == "/metrics", where, "prometheus.io/path is not /metrics")
        for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
            probe = container.get(kind)
            if not self.expect(probe, where, f"no {kind}"):
                continue
            get = probe.get("httpGet", {})
            self.expect(get.get("path") == "/healthz", where, f"{kind} is not on /healthz")
            self.expect(get.get("port") in ("metrics", ports.get("metrics")), where, f"{kind} is not on the metrics port")
        liveness = container.get("livenessProbe", {})
        self.expect(liveness.get("timeoutSeconds", 1) >= 5 and
                    liveness.get("periodSeconds", 10) * liveness.get("failureThreshold", 3) >= 60, where,
                    "the liveness probe must be generous: a timeout of 5 s or more, a minute or more of failures")
        db = options.get("--db", "")
        self.check_under_mount(where, db, container, volumes, "--db", writable=True)
        mount = self.mount_for(db, container)
        if mount:
            self.expect("hostPath" in volumes[mount["name"]], where, "--db is not on a host path: history is lost on restart")
        nvml = options.get("--nvml-lib", "")
        self.expect(nvml.endswith("/libnvidia-ml.so.1"), where, f"--nvml-lib {nvml} is not libnvidia-ml.so.1")
        self.check_under_mount(where, nvml, container, volumes, "--nvml-lib")
        self.expect(options.get("--hostname") == "$(NODE_NAME)", where,
                    "--hostname must be $(NODE_NAME): a pod's own hostname is its pod name")
        env = {e["name"]: e for e in container.get("env", [])}
        self.expect(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
                    where, "NODE_NAME must come from spec.nodeName")
        kmsg = self.mount_for("/dev/kmsg", container)
        self.expect(kmsg and volumes[kmsg["name"]].get("hostPath", {}).get("path") == "/dev/kmsg", where,
                    "/dev/kmsg is not the host's")
        resources = container.get("resources", {})
        self.expect(resources.get("requests") and resources.get("limits", {}).get("memory"), where,
                    "needs resource requests and a memory limit")
        self.expect(pod.get("nodeSelector", {}).get("nvidia.com/gpu.present") == "true", where,
                    "must run on GPU nodes only (nodeSelector nvidia.com/gpu.present)")
        # The Service selects the agent's pods and targets its port.
        for _, service in self.find("Service", "gpudoctor-agent"):
            labels = daemonset["spec"]["template"]["metadata"]["labels"]
            selector = service["spec"]["selector"]
            self.expect(all(labels.get(k) == v for k, v in selector.items()), where,
                        f"the Service's selector {selector} does not select the agent's pods")
            for port in service["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                self.expect(target in ports or target in ports.values(), where,
                            f"the Service targets port {target}, which the container does not have")
            self.expect(not any(k.startswith("prometheus.io/") for k in service["metadata"].get("annotations", {})),
                        where, "the Service must not carry scrape annotations too (the pods would be scraped twice)")
        # The agent keeps running on a node tainted for a GPU problem.
        for _, rule in self.find("NodeReadinessRule"):
            key = rule["spec"]["taint"]["key"]
            self.expect(any(t.get("key") == key or (t.get("operator") == "Exists" and "key" not in t)
                            for t in pod.get("tolerations", [])),
                        where, f"does not tolerate the taint {key} of the NodeReadinessRule")
        return args

    def check_npd(self):
        plugin_name = "npd-gpudoctor-plugin.json"
        where = plugin_name
        if not self.expect(plugin_name in self.json_files, where, "missing"):
            return []
        text, plugin = self.json_files[plugin_name]
        config = plugin.get("pluginConfig", {})
        global_timeout = seconds(config.get("timeout", "5s"))
        conditions = {c["type"] for c in plugin.get("conditions", [])}
        self.expect(CONDITION in conditions, where, f"no default condition {CONDITION}")
        severities = []
        argvs = []
        for index, rule in enumerate(plugin.get("rules", [])):
            rwhere = f"{where} rule {index}"
            self.expect(rule["path"] == GPUDOCTOR_PATH, rwhere, f"runs {rule['path']}, not {GPUDOCTOR_PATH}")
            args = rule.get("args", [])
            argvs.append(args)
            self.expect(args[:1] == ["npd"], rwhere, f"runs `gpudoctor {' '.join(args[:1])}`, not `gpudoctor npd`")
            options = option_values(args)
            severities.append((rule["type"], options.get("--severity", "critical")))
            if rule["type"] == "permanent":
                self.expect(rule.get("condition") in conditions, rwhere,
                            f"condition {rule.get('condition')} has no default in conditions")
            if "timeout" in rule:
                self.expect(seconds(rule["timeout"]) <= global_timeout, rwhere,
                            "its timeout exceeds pluginConfig.timeout: NPD refuses the config")
            # gpudoctor npd's probe deadline is 10 s; NPD's 5 s default would cut a hung driver's report.
            self.expect(seconds(rule.get("timeout", config.get("timeout", "5s"))) > 10, rwhere,
                        "its timeout must exceed gpudoctor's 10 s probe deadline")
            limit = config.get("max_output_length", 80)
            self.expect(int(options.get("--max-output-length", 80)) <= limit, rwhere,
                        f"gpudoctor npd may print more than max_output_length ({limit}) bytes: "
                        "pass --max-output-length")
        self.expect(("permanent", "critical") in severities, where,
                    "no permanent rule for critical findings (the GPUProblem condition)")
        self.expect(("temporary", "warning") in severities, where, "no temporary rule for warnings")

        # The ConfigMap holds this file, byte for byte, under its own name.
        cwhere = "npd-gpudoctor-configmap.yaml"
        holders = [(f, d) for f, d in self.find("ConfigMap") if plugin_name in d.get("data", {})]
        if not self.expect(len(holders) == 1, cwhere, f"one ConfigMap must hold {plugin_name} under that key"):
            return argvs
        configmap = holders[0][1]
        self.expect(configmap["data"][plugin_name] == text, cwhere,
                    f"its {plugin_name} differs from deploy/kubernetes/{plugin_name}")

        # NPD is told to load that file from where the ConfigMap is mounted.
        dwhere = "npd-gpudoctor-daemonset.yaml"
        daemonsets = [(f, d) for f, d in self.find("DaemonSet") if f == dwhere]
        if not self.expect(len(daemonsets) == 1, dwhere, "one DaemonSet"):
            return argvs
        daemonset = daemonsets[0][1]
        self.expect(daemonset["metadata"].get("namespace") == configmap["metadata"].get("namespace"), dwhere,
                    "is not in the ConfigMap's namespace")
        pod, volumes = self.check_pod_spec(dwhere, daemonset)
        container = pod["containers"][0]
        argv = container.get("command", []) + container.get("args", [])
        loaded = [p for a in argv if a.startswith("--config.custom-plugin-monitor=")
                  for p in a.split("=", 1)[1].split(",")]
        self.expect(loaded, dwhere, "NPD is not given --config.custom-plugin-monitor=")
        found = False
        for path in loaded:
            mount = self.mount_for(path, container)
            if not self.expect(mount, dwhere, f"NPD loads {path}, which is under no mount"):
                continue
            volume = volumes[mount["name"]]
            cm = volume.get("configMap")
            if not self.expect(cm and cm["name"] == configmap["metadata"]["name"], dwhere,
                               f"{path} is not on the ConfigMap {configmap['metadata']['name']}"):
                continue
            relative = posixpath.relpath(path, mount["mountPath"])
            items = cm.get("items")
            key = next((i["key"] for i in items if i["path"] == relative), None) if items else relative
            self.expect(key == plugin_name, dwhere,
                        f"NPD loads {path}, which is ConfigMap key {key}, not {plugin_name}")
            found = found or key == plugin_name
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        self.expect(env.get("GPUDOCTOR_NVML_LIB", "").endswith("/libnvidia-ml.so.1"), dwhere,
                    "GPUDOCTOR_NVML_LIB must name the host's libnvidia-ml.so.1 for the plugin")
        self.expect(pod.get("nodeSelector", {}).get("nvidia.com/gpu.present") == "true", dwhere,
                    "must run on GPU nodes only: gpudoctor reports a node without a driver as critical")

        # The taint rule reads the condition the plugin sets.
        for twhere, rule in self.find("NodeReadinessRule"):
            wanted = [c for c in rule["spec"]["conditions"] if c["type"] == CONDITION]
            self.expect(wanted and wanted[0]["requiredStatus"] == "False", twhere,
                        f"must require {CONDITION} False (the node is fit while gpudoctor finds nothing critical)")
            self.expect(rule["spec"]["taint"]["effect"] == "NoSchedule", twhere, "the taint must be NoSchedule")
        return argvs

    def check_cli(self, gpudoctor, agent_args, npd_argvs):
        """The options the manifests pass exist in the binary's --help."""
        def known(subcommand):
            out = subprocess.run([gpudoctor, subcommand, "--help"], capture_output=True, text=True, timeout=60)
            return set(re.findall(r"(--[a-z][a-z0-9-]*)", out.stdout + out.stderr)), out.stdout
        for where, argv in [("gpudoctor-agent-daemonset.yaml", agent_args)] + \
                           [("npd-gpudoctor-plugin.json", a) for a in npd_argvs]:
            if not argv:
                continue
            options, text = known(argv[0])
            if not self.expect(re.search(rf"Usage: \S*gpudoctor {argv[0]}\b", text), where,
                               f"gpudoctor has no {argv[0]} command"):
                continue
            for arg in argv[1:]:
                if arg.startswith("--"):
                    self.expect(arg.split("=", 1)[0] in options, where,
                                f"`gpudoctor {argv[0]}` has no option {arg.split('=', 1)[0]}")

    def run(self, gpudoctor):
        self.load()
        agent_args = self.check_agent() or []
        npd_argvs = self.check_npd()
        if gpudoctor:
            self.check_cli(gpudoctor, agent_args, npd_argvs)
        return self.failures


def option_values(args):
    """{"--name": value} for "--name value" and "--name=value" (flags map to "")."""
    values = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            if "=" in arg:
                name, value = arg.split("=", 1)
                values[name] = value
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                values[arg] = args[i + 1]
                i += 1
            else:
                values[arg] = ""
        i += 1
    return values


def seconds(duration):
    """Seconds in a Go duration string ("1m30s"); the schema has checked its form."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(ns|us|µs|ms|s|m|h)", duration))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    parser.add_argument("--gpudoctor", help="also check the options against this binary's --help")
    args = parser.parse_args()
    failures = Checker(os.path.abspath(args.source_dir)).run(args.gpudoctor)
    if failures:
        print(f"FAILED: {len(failures)} problem(s) in deploy/kubernetes/:", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    print("deploy/kubernetes/: every manifest parses, matches its schema, and the references agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
