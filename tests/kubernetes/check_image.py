#!/usr/bin/env python3
"""Checks the Kubernetes manifests against the image scripts/build-image.sh built.

What check_manifests.py cannot see without the image: the image each DaemonSet
names is this one (gpudoctor:VERSION, gpudoctor-npd:VERSION for NPD) under the
operator's registry; the program each container runs (its command, else the
image's entrypoint) and the plugin's path exist in the image as executables;
every containerPort is a port the image exposes; the user each container runs
as exists in the image's /etc/passwd; a read-only root file system leaves the
agent a mount for /tmp; the image sets the NVIDIA container toolkit's
variables; and journalctl, the kernel log's fallback, is there.

    check_image.py --image-config FILE --rootfs DIR --version VERSION [--source-dir DIR]

FILE is what `buildah inspect --type image IMAGE` prints (or the image's OCI
config alone), DIR the tree the image was made of.

Exit status: 0 passed, 1 failed, 77 skipped (python3-yaml missing).
"""

import argparse
import json
import os
import posixpath
import sys

try:
    import yaml
except ImportError as error:
    print(f"SKIPPED: {error.name} is missing (apt-get install python3-yaml)")
    sys.exit(77)

NPD_PROGRAM = "/node-problem-detector"  # what build-image.sh --npd adds


class ImageCheck:
    def __init__(self, config, rootfs, version):
        self.config = config
        self.rootfs = rootfs
        self.version = version
        self.failures = 0

    def expect(self, condition, where, message):
        if not condition:
            print(f"FAILED {where}: {message}")
            self.failures += 1
        return condition

    def resolve(self, path, depth=0):
        """PATH inside the image, its links followed inside the image; None when absent."""
        parts = [part for part in path.split("/") if part]
        current = "/"
        for index, part in enumerate(parts):
            candidate = posixpath.join(current, part)
            real = os.path.join(self.rootfs, candidate.lstrip("/"))
            if os.path.islink(real):
                if depth > 16:
                    return None
                target = os.readlink(real)
                target = target if target.startswith("/") else posixpath.join(current, target)
                rest = "/".join(parts[index + 1:])
                return self.resolve(posixpath.normpath(posixpath.join(target, rest)), depth + 1)
            if not os.path.lexists(real):
                return None
            current = candidate
        return os.path.join(self.rootfs, current.lstrip("/"))

    def executable(self, path):
        real = self.resolve(path)
        return real is not None and os.path.isfile(real) and os.access(real, os.X_OK)

    def users(self):
        with open(os.path.join(self.rootfs, "etc/passwd")) as passwd:
            return {int(line.split(":")[2]) for line in passwd if line.count(":") >= 6}

    def check_container(self, where, container, image_name, plugin_paths=()):
        image = container["image"]
        expected = f"{image_name}:{self.version}"
        self.expect(image.rsplit("/", 1)[-1] == expected and "/" in image, where,
                    f"names the image {image}, not REGISTRY/{expected}")
        command = container.get("command") or self.config.get("Entrypoint") or []
        if command and command[0] == NPD_PROGRAM:
            print(f"note   {where}: {NPD_PROGRAM} is added by build-image.sh --npd, not in this image")
        elif self.expect(bool(command), where, "runs no command and the image has no entrypoint"):
            self.expect(self.executable(command[0]), where, f"runs {command[0]}, which the image lacks")
        for path in plugin_paths:
            self.expect(self.executable(path), where, f"the plugin runs {path}, which the image lacks")
        exposed = set(self.config.get("ExposedPorts") or {})
        for port in container.get("ports", []):
            name = f"{port['containerPort']}/{port.get('protocol', 'TCP').lower()}"
            self.expect(name in exposed, where, f"port {name} is not one the image exposes ({sorted(exposed)})")
        security = container.get("securityContext", {})
        user = security.get("runAsUser")
        if user is None:
            user = int(str(self.config.get("User") or "0").split(":")[0])
        self.expect(user in self.users(), where, f"runs as uid {user}, which the image's /etc/passwd lacks")
        if security.get("readOnlyRootFilesystem"):
            mounts = {mount["mountPath"] for mount in container.get("volumeMounts", [])}
            self.expect("/tmp" in mounts, where, "a read-only root file system and no mount for /tmp")

    def check_environment(self):
        environment = dict(entry.split("=", 1) for entry in self.config.get("Env") or [])
        self.expect(environment.get("NVIDIA_VISIBLE_DEVICES") == "all", "image", "NVIDIA_VISIBLE_DEVICES is not all")
        self.expect(environment.get("NVIDIA_DRIVER_CAPABILITIES") == "utility", "image",
                    "NVIDIA_DRIVER_CAPABILITIES is not utility")
        self.expect(self.executable("/usr/bin/journalctl"), "image", "no journalctl, the kernel log's fallback")


def daemonset(path):
    with open(path) as file:
        for document in yaml.safe_load_all(file):
            if document and document.get("kind") == "DaemonSet":
                return document
    raise SystemExit(f"{path}: no DaemonSet")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-config", required=True)
    parser.add_argument("--rootfs", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--source-dir", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    options = parser.parse_args()
    with open(options.image_config) as file:
        config = json.load(file)
    config = config.get("OCIv1", {}).get("config", config)
    check = ImageCheck(config, options.rootfs, options.version)
    deploy = os.path.join(options.source_dir, "deploy", "kubernetes")

    agent = daemonset(os.path.join(deploy, "gpudoctor-agent-daemonset.yaml"))
    for container in agent["spec"]["template"]["spec"]["containers"]:
        check.check_container(f"agent container {container['name']}", container, "gpudoctor")
    with open(os.path.join(deploy, "npd-gpudoctor-plugin.json")) as file:
        plugin_paths = sorted({rule["path"] for rule in json.load(file)["rules"]})
    npd = daemonset(os.path.join(deploy, "npd-gpudoctor-daemonset.yaml"))
    for container in npd["spec"]["template"]["spec"]["containers"]:
        check.check_container(f"npd container {container['name']}", container, "gpudoctor-npd", plugin_paths)
    check.check_environment()
    if check.failures == 0:
        print("passed: the manifests' images, programs, plugin, ports and users are in the image")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
