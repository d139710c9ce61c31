"""Render a kustomization without kubectl: the subset of kustomize deploy/ uses.

Supported: ``resources`` (files and directories, recursively), ``configMapGenerator``
(``files``, ``behavior: create|replace``; no hash suffix), ``labels`` (pairs on
metadata only), ``images`` (``newName`` / ``newTag``), ``replicas`` and ``patches``
(strategic-merge patches by file: maps merge, lists of named maps such as
``containers`` merge by ``name``, other lists are replaced). Anything else
raises, so a kustomization that grows beyond this subset fails loudly rather than
rendering wrong. When ``kubectl`` is installed the tests compare both renderings.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]
SUPPORTED = {
    "apiVersion",
    "kind",
    "resources",
    "configMapGenerator",
    "labels",
    "images",
    "replicas",
    "patches",
}


def load_documents(path: Path) -> list[Manifest]:
    """Return the non-empty YAML documents of a file."""
    with path.open(encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def key(manifest: Manifest) -> tuple[str, str, str | None]:
    """Kind, name and namespace: how kustomize identifies an object."""
    meta = manifest["metadata"]
    return manifest["kind"], meta["name"], meta.get("namespace")


def _named(items: Any) -> bool:
    return isinstance(items, list) and all(isinstance(i, dict) and "name" in i for i in items)


def merge(base: Any, patch: Any) -> Any:
    """Strategic merge, simplified: maps merge key by key, lists of named maps (containers,
    volumes, env) merge by ``name`` as kustomize's merge key does, anything else is replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for name, value in patch.items():
            out[name] = merge(base[name], value) if name in base else copy.deepcopy(value)
        return out
    if _named(base) and _named(patch) and base and patch:
        patched = {item["name"]: item for item in patch}
        merged = [
            merge(item, patched.pop(item["name"])) if item["name"] in patched else item
            for item in base
        ]
        return copy.deepcopy(merged) + [copy.deepcopy(item) for item in patched.values()]
    return copy.deepcopy(patch)


def _generated_configmap(directory: Path, spec: dict[str, Any]) -> Manifest:
    unknown = set(spec) - {"name", "namespace", "files", "behavior"}
    if unknown:
        raise ValueError(f"configMapGenerator fields {sorted(unknown)} are not supported")
    data = {}
    for entry in spec.get("files", []):
        name, _, source = str(entry).partition("=")
        path = directory / (source or name)
        data[Path(name).name] = path.read_text(encoding="utf-8")
    metadata = {"name": spec["name"]}
    if "namespace" in spec:
        metadata["namespace"] = spec["namespace"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def _replace_image(manifest: Manifest, images: list[dict[str, str]]) -> None:
    spec = manifest.get("spec", {}).get("template", {}).get("spec", {})
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        name, _, tag = container["image"].partition(":")
        for image in images:
            if image["name"] == name:
                container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag)}"


def render(directory: Path) -> list[Manifest]:
    """Return the objects of the kustomization in ``directory``, in resource order."""
    config = load_documents(directory / "kustomization.yaml")[0]
    unknown = set(config) - SUPPORTED
    if unknown:
        raise ValueError(f"{directory}: kustomization fields {sorted(unknown)} are not supported")
    objects: list[Manifest] = []
    for resource in config.get("resources", []):
        path = (directory / resource).resolve()
        objects += render(path) if path.is_dir() else load_documents(path)
    by_key = {key(obj): index for index, obj in enumerate(objects)}
    for spec in config.get("configMapGenerator", []):
        generated = _generated_configmap(directory, spec)
        if spec.get("behavior", "create") == "replace":
            # Replacing keeps the replaced object's labels and annotations (as kustomize).
            index = by_key[key(generated)]
            for field in ("labels", "annotations"):
                if field in objects[index]["metadata"]:
                    generated["metadata"][field] = objects[index]["metadata"][field]
            objects[index] = generated
        else:
            objects.append(generated)
    by_key = {key(obj): index for index, obj in enumerate(objects)}
    for patch_ref in config.get("patches", []):
        for patch in load_documents(directory / patch_ref["path"]):
            index = by_key[key(patch)]
            objects[index] = merge(objects[index], patch)
    for label_set in config.get("labels", []):
        for obj in objects:
            obj["metadata"].setdefault("labels", {}).update(label_set["pairs"])
    for obj in objects:
        _replace_image(obj, config.get("images", []))
        for replica in config.get("replicas", []):
            if obj["kind"] == "Deployment" and obj["metadata"]["name"] == replica["name"]:
                obj["spec"]["replicas"] = replica["count"]
    return objects
