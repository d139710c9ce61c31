"""Where :class:`~api.consumers.kube_writer.KubeWriter` gets its Kubernetes credentials.

Details: docs/consumers.md, "Notes from the code", `api/consumers/kube_credentials.py`."""

from __future__ import annotations

from pathlib import Path

from kubernetes import config as kube_config  # type: ignore[import-untyped]
from kubernetes.client import Configuration  # type: ignore[import-untyped]

from api.settings import PublishSettings
from forecaster.exceptions import ConfigError


def load_configuration(publish: PublishSettings) -> tuple[Configuration, str]:
    """Load the client configuration the publish settings name, and say where it came from.

    Raises:
        ConfigError: nothing to load, or the kubeconfig / context is unusable.
    """
    configuration = Configuration()
    context = publish.kube_context
    if publish.kubeconfig is not None:
        return configuration, _from_kubeconfig(publish.kubeconfig, context, configuration)
    if context is None:
        try:
            kube_config.load_incluster_config(client_configuration=configuration)
        except kube_config.ConfigException:
            pass
        else:
            return configuration, "the in-cluster service account"
    default = Path(kube_config.KUBE_CONFIG_DEFAULT_LOCATION).expanduser()
    if not default.is_file():
        raise ConfigError(
            "no Kubernetes credentials: publish.kubeconfig is unset, this process is not "
            f"running in a pod (no service account), and {default} does not exist; set "
            "FORESIGHT_PUBLISH__KUBECONFIG (and FORESIGHT_PUBLISH__KUBE_CONTEXT) or run in-cluster"
        )
    return configuration, _from_kubeconfig(default, context, configuration)


def _from_kubeconfig(path: Path, context: str | None, configuration: Configuration) -> str:
    if not path.is_file():
        raise ConfigError(f"publish.kubeconfig {path} does not exist; point it at a kubeconfig")
    try:
        kube_config.load_kube_config(
            config_file=str(path),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (kube_config.ConfigException, ValueError, OSError) as exc:
        raise ConfigError(
            f"cannot load kubeconfig {path}"
            + (f" with context {context!r}" if context else "")
            + f": {exc}; check publish.kubeconfig and publish.kube_context"
        ) from exc
    return f"kubeconfig {path}" + (f" (context {context})" if context else "")
