"""Whether a pool's ``node_group_id`` has the form its cloud provider reports (docs/jobs.md)."""

from __future__ import annotations

import re
from typing import Final, Literal

CloudProvider = Literal["aws", "gce", "clusterapi"]
"""The cloud providers whose node group id form is checked."""

_GCE_URL: Final = re.compile(
    r"https?://[^/\s]+(/[^/\s]+)*/projects/[^/\s]+/zones/[^/\s]+/instanceGroups/[^/\s]+"
)
_CLUSTERAPI: Final = re.compile(
    r"(MachineDeployment|MachineSet|MachinePool)/[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    r"/[a-z0-9]([-.a-z0-9]*[a-z0-9])?"
)
_AWS_MAX: Final = 255
_GCE_EXAMPLE: Final = (
    "https://www.googleapis.com/compute/v1/projects/<project>/zones/<zone>/instanceGroups/<name>"
)


def node_group_problem(node_group_id: str, provider: CloudProvider | None) -> str | None:
    """Return why ``node_group_id`` is not in the form ``provider`` reports, or None.

    Without a provider only unmistakable cases are reported (a bare GKE group name).
    """
    if provider == "gce" or (provider is None and node_group_id.startswith("gke-")):
        if _GCE_URL.fullmatch(node_group_id):
            return None
        return (
            f"{node_group_id!r} is not the instance group URL cluster-autoscaler's GCE "
            f"provider reports ({_GCE_EXAMPLE}); with a bare name the pool matches only "
            "the catch-all and ties with every other group"
        )
    if provider == "clusterapi" and not _CLUSTERAPI.fullmatch(node_group_id):
        return (
            f"{node_group_id!r} is not the <Kind>/<namespace>/<name> cluster-autoscaler's "
            "clusterapi provider reports (e.g. MachineDeployment/gpu-workers/h100-md-0)"
        )
    if provider == "aws":
        if len(node_group_id) > _AWS_MAX:
            return f"{node_group_id[:40]!r}... is longer than an Auto Scaling group name (255)"
        if "://" in node_group_id or node_group_id.count("/") >= 2:
            return (
                f"{node_group_id!r} looks like a URL or a path, not an Auto Scaling group "
                "name (the AWS provider reports the group's name as is)"
            )
    return None
