#!/usr/bin/env bash
# `make test-scale`, Kubernetes part: deploy/k8s/*.yaml validated (strictly: no unknown field)
# against the API schema of the oldest Kubernetes we support (1.29: backoffLimitPerIndex is
# beta there, on by default) and of the newest the validator knows; then the manifest's own
# consistency: the convert Job is Indexed, its completions, parallelism and --shard-count agree,
# and the gather reads the folder the shards write.
#
#   K8S_PY=path/to/venv/bin/python bash tests/scale/k8s.sh   (a venv with kubernetes-validate)
set -euo pipefail
py="${K8S_PY:?set K8S_PY to a python with kubernetes-validate}"
here="$(cd "$(dirname "$0")" && pwd)"
manifests=("$here"/../../deploy/k8s/*.yaml)
for version in 1.29.0 "$("$py" -c 'import kubernetes_validate.utils as u; print(u.latest_version())')"; do
  "$py" -m kubernetes_validate --strict --quiet -k "$version" "${manifests[@]}"
  echo "k8s.sh: ${#manifests[@]} manifest(s) valid against Kubernetes $version (strict)"
done
"$py" - "${manifests[@]}" <<'PY'
import sys
import yaml

for path in sys.argv[1:]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    jobs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
    convert = jobs["graph-ascend-convert"]["spec"]
    assert convert["completionMode"] == "Indexed", "the convert Job must be Indexed"
    args = convert["template"]["spec"]["containers"][0]["args"]
    count = int(args[args.index("--shard-count") + 1])
    assert "--shard" in args
    assert convert["completions"] == count, (convert["completions"], count)
    assert convert["parallelism"] <= count
    parts = args[args.index("-o") + 1]
    gather = jobs["graph-ascend-gather"]["spec"]["template"]["spec"]
    assert gather["containers"][0]["args"][0] == parts, "the gather must read the shards' folder"
    wait = " ".join(gather["initContainers"][0]["command"])
    assert "job/graph-ascend-convert" in wait and "condition=Complete" in wait
    print(f"k8s.sh: {path}: {count} shards into {parts}, gather after the Job completes")
PY
