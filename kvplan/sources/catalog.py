"""The bundled catalogues (model_specs/, gpu_specs/) and lookup with aliases and "did you mean"."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import (
    AmbiguousGpuError,
    InvalidConfigError,
    InvalidInputError,
    Reason,
    UnavailableError,
    UnknownGpuError,
    UnknownModelError,
)
from ..model.config import load_config_file, spec_from_config, spec_from_path
from ..model.weights import parameter_count
from ..specs import GpuSpec, ModelSpec
from .checkpoint import attach_headers, local_checkpoint


def data_dir(name: str) -> Path:
    """model_specs/ or gpu_specs/: inside the installed wheel, or beside the package in a
    source checkout (editable install)."""
    here = Path(__file__).resolve().parent.parent  # kvplan/
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


def _model_key(name: str) -> str:
    """Case, '-', '_' and spaces ignored: 'Llama3.1-8B' and 'llama-3.1-8b' are one key."""
    return re.sub(r"[\s_\-]+", "", name.lower().strip())


@cache
def _model_keys() -> dict[str, CatalogEntry]:
    """Alias rule (README, `kvplan models show`): a model answers to its repo id, to its repo
    name without the owner, and to its aliases, ignoring case, '-' and '_'. A repo name always
    wins over another entry's alias, so `llama-3.1-8b` is meta-llama/Llama-3.1-8B (the base) and
    `llama-3.1-8b-instruct` the Instruct model; an alias without a variant word (instruct, it,
    chat) names the base model, or the tuned one where the catalogue has no base."""
    keys: dict[str, CatalogEntry] = {}
    for e in model_entries():
        for key in (e.id, e.id.split("/", 1)[1]):
            keys.setdefault(_model_key(key), e)
    for e in model_entries():
        for key in e.aliases:
            keys.setdefault(_model_key(key), e)
    return keys


def find_model_entry(ref: str) -> CatalogEntry | None:
    return _model_keys().get(_model_key(ref))


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
    is asked for), then the Hugging Face Hub for anything shaped like `owner/name`. An empty
    (or blank) name is bad input: Path("") is ".", which would read the current directory."""
    if not ref.strip():
        raise InvalidInputError("the model name is empty",
                                hint="name a catalogue model (`kvplan models`), a Hugging Face "
                                "repo id (owner/name), or a model directory or its config.json "
                                "(`.` for the current directory)", code="model-name-empty")
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
        alias = next((a for a in entry.aliases if "/" in a and _model_key(a) == _model_key(ref)),
                     None)
        if alias is None:
            return m
        return m.model_copy(update={"id": alias, "source": f"{m.source}; config of {entry.id}, "
                                    "which this repo shares"})
    if entry is not None and not ref.count("/"):
        ref = entry.id  # a short catalogue alias with --revision: that revision of its repo
    if ref.endswith(".json") or ref.startswith((".", "/", "~")):
        raise InvalidConfigError("no such file or directory", path=ref,
                                 hint="check the path, or name a catalogue model (`kvplan models`)")
    from . import hub  # huggingface_hub itself is imported only when a fetch is needed

    if not hub.looks_like_repo_id(ref):
        raise UnknownModelError(ref, suggest_models(ref))
    try:
        got = hub.load(ref, revision=revision, token=token, offline=offline, refresh=refresh,
                       progress=progress)
    except UnknownModelError as e:  # not on the Hub: name the closest catalogue ids
        e.suggestions = suggest_models(ref)
        if e.suggestions:
            e.hint = "did you mean " + ", ".join(repr(x) for x in e.suggestions) + "?"
        raise
    except UnavailableError as e:
        # A typo'd repo id goes to the Hub like any repo id; when it fails, name the close
        # catalogue ids.
        close = suggest_models(ref, cutoff=0.85)
        if not close or e.reason is Reason.GATED or entry is not None:  # a catalogue id with
            raise  # --revision is no typo: "did you mean" it named itself
        mean = f"did you mean {', '.join(repr(c) for c in close)}?"
        if e.reason is not Reason.OFFLINE_MISS:
            e.hint = f"{mean} " + (e.hint or "")
            raise
        # Offline the Hub cannot say whether the repo exists: only a catalogue id with one
        # word misspelt is bad input (exit 2); any other repo id is a cache miss (exit 3) that
        # names the close catalogue ids on a line of its own (Qwen2.5-Coder-7B-Instruct is a
        # real repo, not a typo of Qwen2.5-7B-Instruct).
        typos = [c for c in close if misspelt(ref, c)]
        if typos:
            raise UnknownModelError(ref, typos, message=f"unknown model {ref!r}: not in the "
                                    "catalogue, and offline the Hub cannot be asked") from None
        e.hint = f"{e.hint}\n{mean}" if e.hint else mean
        raise
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


_WORDS = re.compile(r"[a-z]+|[0-9]+|[^a-z0-9]")


def _edits(a: str, b: str) -> int:
    """Levenshtein distance of two short words."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def misspelt(ref: str, known: str) -> bool:
    """Whether repo id `ref` is catalogue id `known` with one word misspelt: the same owner,
    numbers and separators, and one word of four or more letters at most two edits away
    (Instrcut, Instruc). A changed number or short word (-pt for -it), a word added or
    dropped, or another owner may name another real repo (Qwen/Qwen2.5-Coder-7B-Instruct)."""
    owner, _, name = ref.lower().partition("/")
    known_owner, _, known_name = known.lower().partition("/")
    if owner != known_owner or len(name) > 200:
        return False
    words, known_words = _WORDS.findall(name), _WORDS.findall(known_name)
    if len(words) != len(known_words):
        return False
    diff = [(a, b) for a, b in zip(words, known_words, strict=True) if a != b]
    return (len(diff) == 1 and all(w.isalpha() and len(w) >= 4 for w in diff[0])
            and _edits(*diff[0]) <= 2)


def suggest_models(ref: str, cutoff: float = 0.5) -> list[str]:
    """Catalogue ids closest to a mistyped reference (ids and aliases both count): keys that
    start with or contain it first, then by similarity."""
    keys = _model_keys()
    if len(ref) > 200:  # difflib is quadratic in the length
        return []
    key = _model_key(ref)
    hits = [k for k in keys if key and (k.startswith(key) or key in k)] if len(key) >= 3 else []
    close = difflib.get_close_matches(key, list(keys), n=3, cutoff=cutoff)
    return list(dict.fromkeys(keys[c].id for c in [*hits, *close]))[:5]


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


LOCAL = re.compile(r"local(?::(\d{1,3}))?")


def _tokens(name: str) -> list[str]:
    """'NVIDIA A100 SXM' → ['a100', 'sxm']: the words of a GPU name, as in catalogue ids."""
    name = re.sub(r"^(nvidia|amd|intel)[\s_-]+", "", name.lower().strip())
    return [t for t in re.split(r"[\s_\-./]+", name) if t]


def resolve_gpu(ref: str) -> GpuSpec:
    """By id, alias or the name nvidia-smi prints (case and punctuation ignored); `local` or
    `local:N` reads this machine's GPU N through NVML."""
    m = LOCAL.fullmatch(ref.strip().lower())
    if m:
        return local_gpu(int(m.group(1) or 0))
    key = _norm(ref)
    keys = _gpu_keys()
    if key in keys:
        return keys[key]
    # A family name several variants share (`a100`: 40 GB SXM, 80 GB SXM, 80 GB PCIe) is asked
    # about, not guessed: the variants' memory, so every capacity figure, can differ 2×.
    family = _tokens(ref)
    variants = [g for g in gpu_specs() if family and g.id.split("-")[:len(family)] == family]
    if len(variants) > 1:
        raise AmbiguousGpuError(ref, [(g.id, g.name) for g in variants])
    # Prefix and substring matches first (`v100` → both V100 entries), then similar spellings.
    hits = sorted((k for k in keys if key and (k.startswith(key) or key in k)),
                  key=lambda k: (not k.startswith(key), keys[k].id))
    close = difflib.get_close_matches(key, list(keys), n=3, cutoff=0.5) if len(key) <= 200 else []
    raise UnknownGpuError(ref, list(dict.fromkeys(keys[c].id for c in [*hits, *close]))[:5])


def local_gpu(index: int = 0) -> GpuSpec:
    """This machine's GPU `index` (NVML): its catalogue entry (matched by the nvidia-smi name)
    with the CUDA total NVML implies and what other processes hold now; a GPU the catalogue
    lacks gets a minimal spec (memory only: no bandwidth or FLOPs, so no performance)."""
    from ..specs import LocalUsage
    from .nvml import local_gpus

    gpus = local_gpus()
    if index >= len(gpus):
        raise InvalidInputError(f"--gpu local:{index}: this machine has {len(gpus)} GPU(s)",
                                hint=f"use local:0 … local:{len(gpus) - 1}")
    g = gpus[index]
    usage = LocalUsage(index=g.index, nvml_name=g.name, nvml_total_bytes=g.total_bytes,
                       used_bytes=g.used_bytes, free_bytes=g.free_bytes, processes=g.processes)
    spec = _gpu_keys().get(_norm(g.name))
    update: dict[str, object] = {"local": usage}
    if g.cuda_total_bytes is not None:
        update |= {"cuda_total_bytes": g.cuda_total_bytes, "cuda_total_estimated": False,
                   "cuda_total_source": f"NVML on this machine: total {g.total_bytes} − reserved "
                   f"{g.reserved_bytes} bytes"}
    if spec is not None:
        return spec.model_copy(update=update)
    return GpuSpec(
        id=f"local-{g.index}", vendor="NVIDIA", name=g.name, arch="unknown",
        smi_total_mib=g.total_bytes // 2**20, smi_names=[g.name],
        cuda_total_bytes=g.cuda_total_bytes or g.total_bytes,
        cuda_total_source="NVML total (no reserved figure from this driver)",
        cuda_total_estimated=g.cuda_total_bytes is None,
        notes="not in kvplan's catalogue: memory from NVML only", **{"local": usage})
