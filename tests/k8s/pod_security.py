"""Pod Security admission (``restricted`` level, ``latest`` version) as the API server enforces it
on a namespace labelled ``pod-security.kubernetes.io/enforce: restricted``.

The checks and their wording follow ``k8s.io/pod-security-admission/policy`` (the Pod Security
Standards page lists the same rules): a refused pod gets one 403 message

    pods "NAME" is forbidden: violates PodSecurity "restricted:latest": CHECK (DETAIL), CHECK (DETAIL)

with the checks in the admission library's order. Both the baseline checks and the restricted
ones run; where a restricted check replaces a baseline one (capabilities, volume types) only the
restricted one is reported, as there. OpenShift's ``restricted-v2`` SCC asks the same of a pod
(non-root, no privilege escalation, ALL capabilities dropped but NET_BIND_SERVICE, RuntimeDefault
seccomp, no host namespaces, ports or paths), so a pod admitted here is admitted there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ENFORCE_LABEL", "enforced_level", "restricted_violations", "admission_error"]

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
RESTRICTED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret")
VOLUME_TYPES = (*RESTRICTED_VOLUMES, "hostPath", "nfs", "iscsi", "glusterfs", "rbd", "cephfs", "cinder", "fc",
                "flocker", "flexVolume", "azureFile", "azureDisk", "vsphereVolume", "quobyte", "portworxVolume",
                "scaleIO", "storageos", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "photonPersistentDisk")


def enforced_level(namespace: dict[str, Any] | None) -> str | None:
    """The Pod Security level a namespace enforces (its ``enforce`` label), or None."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(ENFORCE_LABEL)


def _names(kind: str, names: list[str]) -> str:
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"{kind}s {quoted}" if len(names) > 1 else f"{kind} {quoted}"


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or []),
            *(spec.get("ephemeralContainers") or [])]


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Every check of the restricted level that ``pod`` fails, worded as the API server words them."""
    spec = pod.get("spec") or {}
    psc = spec.get("securityContext") or {}
    containers = _containers(spec)
    sc = {c["name"]: c.get("securityContext") or {} for c in containers}
    out: list[str] = []

    hosts = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if hosts:
        out.append(f"host namespaces ({', '.join(hosts)})")
    privileged = [n for n, s in sc.items() if s.get("privileged")]
    if privileged:
        out.append(f"privileged ({_names('container', privileged)} must not set securityContext.privileged=true)")
    ports = [f'container "{c["name"]}" uses hostPort {p["hostPort"]}' for c in containers
             for p in c.get("ports") or [] if p.get("hostPort")]
    if ports:
        out.append(f"hostPort ({', '.join(ports)})")
    escalation = [n for n, s in sc.items() if s.get("allowPrivilegeEscalation") is not False]
    if escalation:
        out.append(f"allowPrivilegeEscalation != false ({_names('container', escalation)} must set "
                   "securityContext.allowPrivilegeEscalation=false)")
    caps: list[str] = []
    no_drop = [n for n, s in sc.items() if "ALL" not in ((s.get("capabilities") or {}).get("drop") or [])]
    if no_drop:
        caps.append(f'{_names("container", no_drop)} must set securityContext.capabilities.drop=["ALL"]')
    for name, s in sc.items():
        added = [c for c in (s.get("capabilities") or {}).get("add") or [] if c != "NET_BIND_SERVICE"]
        if added:
            caps.append(f'container "{name}" must not include {", ".join(chr(34) + c + chr(34) for c in added)} '
                        "in securityContext.capabilities.add")
    if caps:
        out.append(f"unrestricted capabilities ({'; '.join(caps)})")
    by_type: dict[str, list[str]] = {}
    for volume in spec.get("volumes") or []:
        kind = next((k for k in VOLUME_TYPES if k in volume), None)
        if kind is not None and kind not in RESTRICTED_VOLUMES:
            by_type.setdefault(kind, []).append(volume["name"])
    if by_type:
        parts = [f'{_names("volume", names)} {"use" if len(names) > 1 else "uses"} restricted volume type "{kind}"'
                 for kind, names in by_type.items()]
        out.append(f"restricted volume types ({', '.join(parts)})")
    pod_nonroot = psc.get("runAsNonRoot")
    root = [n for n, s in sc.items()
            if s.get("runAsNonRoot") is False or (s.get("runAsNonRoot") is None and pod_nonroot is not True)]
    if pod_nonroot is False or root:
        who = "pod" if pod_nonroot is False else f"pod or {_names('container', root)}"
        out.append(f"runAsNonRoot != true ({who} must set securityContext.runAsNonRoot=true)")
    uid0 = ["pod"] if psc.get("runAsUser") == 0 else []
    uid0 += [f'container "{n}"' for n, s in sc.items() if s.get("runAsUser") == 0]
    if uid0:
        out.append(f"runAsUser=0 ({' and '.join(uid0)} must not set runAsUser=0)")
    good = ("RuntimeDefault", "Localhost")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    bad_seccomp = [n for n, s in sc.items()
                   if ((s.get("seccompProfile") or {}).get("type") or pod_seccomp) not in good]
    if bad_seccomp:
        who = f"pod or {_names('container', bad_seccomp)}" if pod_seccomp not in good else \
            _names("container", bad_seccomp)
        out.append(f'seccompProfile ({who} must set securityContext.seccompProfile.type to "RuntimeDefault" '
                   'or "Localhost")')
    return out


def admission_error(pod: dict[str, Any], namespace: dict[str, Any] | None) -> str | None:
    """The API server's refusal of ``pod`` in ``namespace`` (None: admitted). Only ``restricted``
    is enforced here; ``privileged`` (and no label) admits everything."""
    level = enforced_level(namespace)
    if level != "restricted":
        return None
    problems = restricted_violations(pod)
    if not problems:
        return None
    name = (pod.get("metadata") or {}).get("name") or (pod.get("metadata") or {}).get("generateName", "")
    return f'pods "{name}" is forbidden: violates PodSecurity "restricted:latest": {", ".join(problems)}'
