"""The bundled catalogues (model_specs/, gpu_specs/) and lookup with aliases and "did you mean"."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .checkpoint import attach_headers, local_checkpoint
from .errors import InvalidConfigError, InvalidInputError, UnknownGpuError, UnknownModelError
from .hf_config import load_config_file, spec_from_config, spec_from_path
from .specs import GpuSpec, ModelSpec
from .weights import parameter_count


def data_dir(name: str) -> Path:
    """model_specs/ or gpu_specs/: inside the installed wheel, or beside the package in a
    source checkout (editable install)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_data" / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise InvalidConfigError(f"bundled data folder {name}/ is missing from this installation",
                             hint="reinstall kvplan")


class CatalogEntry(BaseModel):
    """One bundled model: a verbatim config.json plus where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    config: str = Field(description="path of the verbatim config.json, relative to model_specs/")
    aliases: list[str] = Field(default_factory=list)
    config_source: str
    config_status: str
    params_published: str = Field(description="published size and the reference count, as text")
    params_reference: int | None = Field(None, description="independent exact count (INDEX.md)")
    params_stated: float | None = Field(None, description="model-card size precise to ~3 digits")
    params_reference_text_only: bool = Field(
        False, description="params_reference counts the language model without its vision tower")
    notes: str = ""


def _norm(name: str) -> str:
    """Case- and punctuation-insensitive key: 'NVIDIA H100 80GB HBM3' → 'h10080gbhbm3'."""
    name = name.lower().strip()
    name = re.sub(r"^(nvidia|amd|intel)[\s_-]+", "", name)
    return re.sub(r"[\s_\-./]+", "", name)


# ----------------------------------------------------------------------- models


@cache
def model_entries() -> tuple[CatalogEntry, ...]:
    path = data_dir("model_specs") / "index.json"
    raw = load_config_file(path)
    try:
        return tuple(CatalogEntry.model_validate(e) for e in raw["models"])
    except (KeyError, ValidationError) as e:
        raise InvalidConfigError(f"invalid catalogue index: {e}", path=str(path)) from e


@cache
def _model_keys() -> dict[str, CatalogEntry]:
    keys: dict[str, CatalogEntry] = {}
    for e in model_entries():
        for key in (e.id, e.id.split("/", 1)[1], *e.aliases):
            keys.setdefault(key.lower(), e)
    return keys


def find_model_entry(ref: str) -> CatalogEntry | None:
    return _model_keys().get(ref.lower().strip())


def load_catalog_model(entry: CatalogEntry) -> ModelSpec:
    base = data_dir("model_specs")
    path = base / entry.config
    cfg = load_config_file(path)
    extra_path = path.with_name(path.name.replace(".json", ".hf_quant_config.json"))
    extra = load_config_file(extra_path) if extra_path.exists() else None
    return spec_from_config(cfg, model_id=entry.id, source=f"catalogue ({entry.config_source})",
                            path=f"model_specs/{entry.config}", extra=extra)


def resolve_model(ref: str, *, revision: str | None = None, token: str | None = None,
                  offline: bool | None = None, refresh: bool = False,
                  progress: Callable[[str], None] | None = None) -> ModelSpec:
    """A local path (directory or config.json) first, then the catalogue (unless a revision
    is asked for), then the Hugging Face Hub for anything shaped like `owner/name`."""
    path = _local_path(ref)
    if path is not None:
        if revision is not None:
            raise InvalidInputError(f"--revision applies to Hub repos, but {ref!r} is a local path",
                                    hint="drop --revision, or name the repo id instead")
        m = spec_from_path(path)
        ckpt = local_checkpoint(path) if path.is_dir() else None
        return attach_headers(m, ckpt, parameter_count(m)) if ckpt else m
    entry = find_model_entry(ref)
    if entry is not None and revision is None:
        m = load_catalog_model(entry)
        # A repo-id alias names another repo with the same config (Instruct/Chat siblings,
        # renamed repos): plan under that name, so the serve command points where asked.
        alias = next((a for a in entry.aliases if "/" in a and a.lower() == ref.lower().strip()), None)
        if alias is None:
            return m
        return m.model_copy(update={"id": alias, "source": f"{m.source}; config of {entry.id}, "
                                    "which this repo shares"})
    if ref.endswith(".json") or ref.startswith((".", "/", "~")):
        raise InvalidConfigError("no such file or directory", path=ref,
                                 hint="check the path, or name a catalogue model (`kvplan models`)")
    from . import hub  # huggingface_hub itself is imported only when a fetch is needed

    if not hub.looks_like_repo_id(ref):
        raise UnknownModelError(ref, suggest_models(ref))
    got = hub.load(ref, revision=revision, token=token, offline=offline, refresh=refresh,
                   progress=progress)
    m = spec_from_config(got.config, model_id=ref, source=got.source, path=f"{ref}/config.json",
                         extra=got.quant_config)
    m = m.model_copy(update={"revision": revision})
    return attach_headers(m, got.checkpoint, parameter_count(m)) if got.checkpoint else m


def _local_path(ref: str) -> Path | None:
    """`ref` as an existing local path, else None. `~nosuchuser/x`, a NUL byte or a name too
    long for the file system are simply not local paths (not internal errors)."""
    try:
        path = Path(ref).expanduser()
        return path if path.exists() else None
    except (RuntimeError, OSError, ValueError):
        return None


def suggest_models(ref: str) -> list[str]:
    """Catalogue ids closest to a mistyped reference (ids and aliases both count)."""
    keys = _model_keys()
    if len(ref) > 200:  # difflib is quadratic in the length
        return []
    close = difflib.get_close_matches(ref.lower(), list(keys), n=3, cutoff=0.5)
    return list(dict.fromkeys(keys[c].id for c in close))


# ------------------------------------------------------------------------- GPUs


@cache
def gpu_specs() -> tuple[GpuSpec, ...]:
    out = []
    for path in sorted(data_dir("gpu_specs").glob("*.json")):
        try:
            out.append(GpuSpec.model_validate(load_config_file(path)))
        except ValidationError as e:
            raise InvalidConfigError(f"invalid GPU spec: {e}", path=str(path)) from e
    return tuple(out)


@cache
def _gpu_keys() -> dict[str, GpuSpec]:
    keys: dict[str, GpuSpec] = {}
    for g in gpu_specs():
        for name in (g.id, *g.aliases, *g.smi_names):
            keys.setdefault(_norm(name), g)
    return keys


def resolve_gpu(ref: str) -> GpuSpec:
    """By id, alias or the name nvidia-smi prints (case and punctuation ignored)."""
    key = _norm(ref)
    keys = _gpu_keys()
    if key in keys:
        return keys[key]
    close = difflib.get_close_matches(key, list(keys), n=3, cutoff=0.5) if len(key) <= 200 else []
    raise UnknownGpuError(ref, list(dict.fromkeys(keys[c].id for c in close)))
