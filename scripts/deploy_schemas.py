"""Write the trimmed JSON schemas tests/deploy/test_emit_schemas.py validates `--emit` files with
(tests/deploy/schemas/, sources and versions in its README.md). Run by hand when a schema is
updated; tests never run it (no network, no extra packages in tests).

    python scripts/deploy_schemas.py k8s WHEEL_DIR
        WHEEL_DIR: the unpacked `kubernetes` Python client wheel (its models are pydantic models
        generated from the Kubernetes OpenAPI document of the release they name). Writes
        k8s-apps-v1-deployment.json, k8s-v1-service.json and k8s-v1-configmap.json from
        V1Deployment, V1Service and V1ConfigMap.
    python scripts/deploy_schemas.py crd CRD_YAML VERSION OUT_NAME [FIELD ...]
        CRD_YAML: a CustomResourceDefinition file; writes the openAPIV3Schema of VERSION, each
        FIELD (a dotted path such as spec.prefill; `*` steps into a map's values) cut down to
        its type alone (`{"type": "object"}`): sections kvplan never writes, mostly copies of
        pod-template parts (size).
    python scripts/deploy_schemas.py skypilot WHEEL_DIR
        WHEEL_DIR: the unpacked `skypilot` wheel. Writes skypilot-task.json: SkyPilot's own
        schemas from sky/utils/schemas.py (get_task_schema, get_resources_schema,
        get_service_schema), the three a task file is validated with (sky/task.py, then
        sky/resources.py for `resources:` and sky/serve/service_spec.py for `service:`), under
        `$defs` and joined with `allOf`. Modules the schema code imports only for names are
        stood in for (below), so the wheel's runtime dependencies need not be installed.
    python scripts/deploy_schemas.py json SCHEMA_JSON OUT_NAME
        SCHEMA_JSON: a published JSON schema (a chart's values.schema.json), trimmed only.

Trimming (the validation is unchanged by it): `description`, `title`, `default` and `example`
are dropped. CRD schemas get `additionalProperties: false` on every object that lists its
properties and neither allows other keys nor preserves unknown fields: an unknown field is what
`kubectl apply --validate=strict` (server-side field validation, Strict) refuses, and the schema
would otherwise accept any misspelt key.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "tests" / "deploy" / "schemas"
_DROP = {"description", "title", "default", "example"}


def trim(node: Any, strict: bool = False) -> Any:
    """`node` without prose keys; with `strict`, objects closed to unknown keys (CRDs)."""
    if isinstance(node, list):
        return [trim(x, strict) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: trim(v, strict) for k, v in node.items() if k not in _DROP}
    for key in ("properties", "$defs"):  # names under these are data, never dropped
        if isinstance(node.get(key), dict):
            out[key] = {k: trim(v, strict) for k, v in node[key].items()}
    if (strict and "properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _write(name: str, schema: dict[str, Any]) -> None:
    path = OUT / name
    path.write_text(json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {path.name} ({path.stat().st_size} bytes)")


def k8s(wheel_dir: str) -> None:
    root = Path(wheel_dir) / "kubernetes"
    # import the generated models without the package's __init__ (it needs auth libraries)
    for name, path in (("kubernetes", root), ("kubernetes.client", root / "client")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    for module_name, cls, out in (("v1_deployment", "V1Deployment", "k8s-apps-v1-deployment.json"),
                                  ("v1_service", "V1Service", "k8s-v1-service.json"),
                                  ("v1_config_map", "V1ConfigMap", "k8s-v1-configmap.json")):
        model = getattr(importlib.import_module(f"kubernetes.client.models.{module_name}"), cls)
        schema = model.model_json_schema(by_alias=True)
        _write(out, {"$schema": "https://json-schema.org/draft/2020-12/schema", **trim(schema)})


def crd(path: str, version: str, out: str, *stubs: str) -> None:
    import yaml

    (doc,) = [d for d in yaml.safe_load_all(Path(path).read_text())
              if d and d.get("kind") == "CustomResourceDefinition"]
    (ver,) = [v for v in doc["spec"]["versions"] if v["name"] == version]
    schema = trim(ver["schema"]["openAPIV3Schema"], strict=True)
    for dotted in stubs:
        *parents, leaf = dotted.split(".")
        node = schema
        for name in parents:  # `*`: the schema of a map's values
            node = node["additionalProperties"] if name == "*" else node["properties"][name]
        kept = node["properties"][leaf].get("type")
        node["properties"][leaf] = {"type": kept} if kept else {}
    _write(out, {"$schema": "http://json-schema.org/draft-07/schema#", **schema})


def _stand_in(name: str, path: Path | None = None, **attrs: Any) -> None:
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]
    for key, value in attrs.items():
        setattr(module, key, value)
    sys.modules[name] = module


def skypilot(wheel_dir: str) -> None:
    import enum
    import logging

    root = Path(wheel_dir) / "sky"
    sys.path.insert(0, wheel_dir)
    version = next(Path(wheel_dir).glob("skypilot-*.dist-info")).name.removesuffix(
        ".dist-info").split("-", 1)[1]
    _stand_in("sky", root, __version__=version)
    for sub in ("utils", "skylet", "server", "serve"):
        _stand_in(f"sky.{sub}", root / sub)

    class AutostopWaitFor(enum.Enum):  # sky/skylet/autostop_lib.py's modes (same wheel)
        JOBS_AND_SSH = "jobs_and_ssh"
        JOBS = "jobs"
        NONE = "none"

        @classmethod
        def supported_modes(cls) -> list[str]:
            return [m.value for m in cls]

    _stand_in("sky.skylet.autostop_lib", AutostopWaitFor=AutostopWaitFor)
    _stand_in("sky.sky_logging", init_logger=logging.getLogger)
    _stand_in("sky.server.daemons", INTERNAL_REQUEST_DAEMONS=[])  # API-server config only
    # sky/serve/spot_placer.py registers one placer, SPOT_HEDGE_PLACER = 'dynamic_fallback'
    _stand_in("sky.serve.spot_placer", SPOT_PLACERS={"dynamic_fallback": None})
    schemas = importlib.import_module("sky.utils.schemas")
    parts = {"task": schemas.get_task_schema(), "resources": schemas.get_resources_schema(),
             "service": schemas.get_service_schema()}
    for part in parts.values():
        part.pop("$schema", None)
    _write("skypilot-task.json", {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": trim(parts), "allOf": [
            {"$ref": "#/$defs/task"},
            {"properties": {"resources": {"$ref": "#/$defs/resources"},
                            "service": {"$ref": "#/$defs/service"}}}]})


def plain(path: str, out: str) -> None:
    _write(out, trim(json.loads(Path(path).read_text())))


if __name__ == "__main__":
    if sys.argv[1:2] == ["k8s"] and len(sys.argv) == 3:
        k8s(sys.argv[2])
    elif sys.argv[1:2] == ["crd"] and len(sys.argv) >= 5:
        crd(*sys.argv[2:])
    elif sys.argv[1:2] == ["skypilot"] and len(sys.argv) == 3:
        skypilot(sys.argv[2])
    elif sys.argv[1:2] == ["json"] and len(sys.argv) == 4:
        plain(*sys.argv[2:4])
    else:
        sys.exit(__doc__)
