"""Models from the Hugging Face Hub: config.json and safetensors headers, never the weights.

The only module that imports huggingface_hub, and only inside functions, so planning a
catalogue model never pays for it. What it fetches (config.json, hf_quant_config.json, the
safetensors tensor tables) is kept in kvplan's cache, so a second plan of the same repo and
revision does no network work. Environment read at call time: HF_ENDPOINT, HF_TOKEN,
HF_HUB_OFFLINE, HF_HOME / HF_HUB_CACHE, KVPLAN_CACHE_DIR, KVPLAN_HUB_TIMEOUT (seconds, 10).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ..errors import (
    InvalidConfigError,
    InvalidInputError,
    Reason,
    UnavailableError,
    UnknownModelError,
)
from ..specs import CheckpointTensors
from .limits import (
    MAX_CACHE_BYTES,
    MAX_CONFIG_BYTES,
    MAX_HUB_TIMEOUT_S,
    loads_json,
    model_root,
    read_limited,
)

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
CACHE_FORMAT = 1
DEFAULT_ENDPOINT = "https://huggingface.co"


def looks_like_repo_id(ref: str) -> bool:
    return bool(REPO_ID.fullmatch(ref)) and ".." not in ref


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _shown_endpoint() -> str:
    """HF_ENDPOINT for messages and the cache file: `https://user:pass@host` → `https://***@host`
    (credentials in the URL are never echoed or stored)."""
    from urllib.parse import urlsplit, urlunsplit

    url = _endpoint()
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(HF_ENDPOINT, unparseable)"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


def _timeout_s() -> float:
    raw = os.environ.get("KVPLAN_HUB_TIMEOUT", "10")
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInputError(
            f"KVPLAN_HUB_TIMEOUT={raw[:40]!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= MAX_HUB_TIMEOUT_S):
        raise InvalidInputError(f"KVPLAN_HUB_TIMEOUT={raw[:40]!r} must be a number of seconds in "
                                f"(0, {MAX_HUB_TIMEOUT_S:g}]")
    return value


def _env_dir(text: str, variable: str) -> Path:
    """A folder named by an environment variable, `~` expanded; a `~user` that does not
    exist or a component longer than a file name can be is an error naming the variable."""
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # ~nosuchuser, or no home directory at all
        raise InvalidInputError(f"{variable}: cannot expand '~' in this path (no such user or "
                                "home directory)", hint=f"set {variable} to an absolute path"
                                ) from None
    if any(len(os.fsencode(part)) > 255 for part in path.parts):
        raise InvalidInputError(f"{variable}: a path component is longer than 255 bytes",
                                hint=f"set {variable} to a shorter path")
    return path


def _hf_cache_dir() -> Path:
    """huggingface_hub's cache folder, resolved from the environment now (the library reads
    it once at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return _env_dir(os.environ["HF_HUB_CACHE"], "HF_HUB_CACHE")
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return _env_dir(home, "HF_HOME") / "hub"


def kvplan_cache_dir() -> Path:
    base = os.environ.get("KVPLAN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or "~/.cache", "kvplan")
    return _env_dir(base, "KVPLAN_CACHE_DIR")


def _cache_path(repo_id: str, revision: str) -> Path:
    key = hashlib.sha256(f"{_endpoint()}\n{repo_id}\n{revision}".encode()).hexdigest()[:24]
    return kvplan_cache_dir() / "hub" / f"{repo_id.replace('/', '--')}--{key}.json"


# -------------------------------------------------------------------------- load


class HubModel:
    """What kvplan needs from a repo: its config, an optional ModelOpt hf_quant_config.json,
    the safetensors tensor table (None when the repo has no safetensors) and the commit."""

    def __init__(self, data: dict[str, Any], *, cached: bool) -> None:
        self.repo_id: str = data["repo_id"]
        self.revision: str = data["revision"]
        self.commit: str | None = data.get("commit")
        self.config: dict[str, Any] = data["config"]
        self.quant_config: dict[str, Any] | None = data.get("quant_config")
        self.safetensors_files: int = data.get("safetensors_files", 0)
        tensors = data.get("tensors")
        self.checkpoint = None if tensors is None else CheckpointTensors(
            source=f"{self.safetensors_files} safetensors header(s) from the Hub",
            files=self.safetensors_files,
            tensors={k: (v[0], tuple(v[1])) for k, v in tensors.items()})
        self.cached = cached

    @property
    def source(self) -> str:
        at = f"@{self.commit[:12]}" if self.commit else f"@{self.revision}"
        return f"Hugging Face Hub {self.repo_id}{at}" + (" (kvplan cache)" if self.cached else "")


def load(repo_id: str, *, revision: str | None = None, token: str | None = None,
         offline: bool | None = None, refresh: bool = False,
         progress: Callable[[str], None] | None = None) -> HubModel:
    """Config and safetensors headers of a Hub repo: from kvplan's cache, else the Hub (or,
    offline, huggingface_hub's own cache). Raises kvplan errors with a next step."""
    rev = revision or "main"
    offline = _truthy(os.environ.get("HF_HUB_OFFLINE")) if offline is None else offline
    path = _cache_path(repo_id, rev)
    if path.exists() and not refresh:
        try:
            data = loads_json(read_limited(path, MAX_CACHE_BYTES, what="kvplan cache entry",
                                           root=kvplan_cache_dir(), own=True), where=str(path))
            if isinstance(data, dict) and data.get("format") == CACHE_FORMAT:
                return HubModel(data, cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable cache entry: fetch again
    token = token or os.environ.get("HF_TOKEN") or None
    if offline:
        data = _from_hf_cache(repo_id, rev)
    else:
        if progress:
            progress(f"reading config and safetensors headers of {repo_id} from "
                     f"{_shown_endpoint()}")
        data = _fetch(repo_id, rev, token)
        _write_cache(path, data)
    return HubModel(data, cached=False)


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, separators=(",", ":")))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs the next run a fetch


def _fetch(repo_id: str, rev: str, token: str | None) -> dict[str, Any]:
    import huggingface_hub as hf
    from huggingface_hub import errors as hf_errors
    from huggingface_hub.utils import disable_progress_bars

    from .checkpoint import _tensor_table

    disable_progress_bars()  # kvplan shows its own progress line
    timeout = _timeout_s()
    endpoint = _endpoint()
    api = hf.HfApi(endpoint=endpoint, token=token)
    cache_dir = str(_hf_cache_dir())

    def download(filename: str) -> Path | None:
        try:
            return Path(hf.hf_hub_download(repo_id, filename, revision=rev, token=token,
                                           cache_dir=cache_dir, endpoint=endpoint,
                                           etag_timeout=timeout))
        except hf_errors.EntryNotFoundError:
            return None

    try:
        with _translate_errors(repo_id, rev, token, timeout):
            # One HEAD without retries first: hf_hub_download retries a failed connection with
            # backoff for ~30 s, too long for a planner; this classifies gated / missing repo /
            # missing revision / no network within one timeout.
            try:
                hf.get_hf_file_metadata(hf.hf_hub_url(repo_id, "config.json", revision=rev,
                                                      endpoint=endpoint),
                                        token=token, timeout=timeout)
            except hf_errors.EntryNotFoundError:
                pass  # reported below as "no config.json"
            config_path = download("config.json")
            if config_path is None:
                raise InvalidConfigError(
                    "the repo has no config.json", path=f"{repo_id}@{rev}",
                    hint="kvplan plans transformers-format checkpoints; for GGUF-only or adapter "
                    "repos, plan the base model")
            quant_path = download("hf_quant_config.json")
            commit = _commit_of(config_path)
            try:
                meta = api.get_safetensors_metadata(repo_id, revision=rev, token=token,
                                                    timeout=timeout)
                tensors = {name: [info.dtype, list(info.shape)]
                           for fm in meta.files_metadata.values()
                           for name, info in fm.tensors.items()}
                files = len(meta.files_metadata)
                # the same checks as local headers: tensor count, dtypes, shapes
                _tensor_table({n: {"dtype": d, "shape": sh} for n, (d, sh) in tensors.items()},
                              f"{repo_id}@{rev}")
            except hf_errors.NotASafetensorsRepoError:
                tensors, files = None, 0
            except hf_errors.SafetensorsParsingError as e:
                raise InvalidConfigError(f"corrupt safetensors header: {e}",
                                         path=f"{repo_id}@{rev}",
                                         hint="the checkpoint is broken upstream and vLLM could "
                                         "not load it either; try another --revision") from None
            except (TypeError, AttributeError, RecursionError) as e:
                # huggingface_hub's own parser indexes every entry as {dtype, shape}: an entry
                # that is a string, a number or a list, or a shape that is not a list, fails
                # inside it (found by the fuzz campaign's hostile Hub)
                raise InvalidConfigError(
                    f"corrupt safetensors header (an entry is not a tensor: {type(e).__name__})",
                    path=f"{repo_id}@{rev}", hint="the checkpoint is broken upstream and vLLM "
                    "could not load it either; try another --revision") from None
    except KeyError as e:  # a header entry without dtype/shape
        raise InvalidConfigError(f"corrupt safetensors header (missing {e})",
                                 path=f"{repo_id}@{rev}") from None
    return {
        "format": CACHE_FORMAT, "repo_id": repo_id, "revision": rev, "commit": commit,
        "endpoint": _shown_endpoint(), "fetched_at": int(time.time()),
        "config": _read_json(config_path, f"{repo_id}/config.json"),
        "quant_config": (_read_json(quant_path, f"{repo_id}/hf_quant_config.json")
                         if quant_path else None),
        "tensors": tensors, "safetensors_files": files,
    }


def _commit_of(path: Path) -> str | None:
    """The commit folder of a file in huggingface_hub's cache: …/snapshots/<commit>/file."""
    parts = path.parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else None


def _read_json(path: Path, name: str) -> dict[str, Any]:
    """A JSON file of huggingface_hub's cache: it must resolve inside its repo's folder
    (models--org--name: a snapshot's files link to its blobs/, never elsewhere)."""
    data = loads_json(read_limited(path, MAX_CONFIG_BYTES, what="model config",
                                   root=model_root(path.parent), own=True), where=name)
    if not isinstance(data, dict):
        raise InvalidConfigError("expected a JSON object at the top level", path=name)
    return data


def _from_hf_cache(repo_id: str, rev: str) -> dict[str, Any]:
    """Offline: config.json (and any safetensors shards) already in huggingface_hub's cache."""
    import huggingface_hub as hf
    from huggingface_hub import errors as hf_errors

    from .checkpoint import local_checkpoint

    cache_dir = str(_hf_cache_dir())
    try:
        config_path = Path(hf.hf_hub_download(repo_id, "config.json", revision=rev,
                                              cache_dir=cache_dir, local_files_only=True))
    except (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled, ValueError):
        raise UnavailableError(
            f"{repo_id} (revision {rev}) is not cached and offline mode is on",
            reason=Reason.OFFLINE_MISS,
            hint="run the same command once online (unset HF_HUB_OFFLINE, drop --offline), "
            "or pass a local model directory") from None
    try:
        quant_path: Path | None = Path(hf.hf_hub_download(
            repo_id, "hf_quant_config.json", revision=rev, cache_dir=cache_dir,
            local_files_only=True))
    except (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled, ValueError):
        quant_path = None
    ckpt = local_checkpoint(config_path.parent, own=True)
    return {
        "format": CACHE_FORMAT, "repo_id": repo_id, "revision": rev,
        "commit": _commit_of(config_path), "endpoint": _shown_endpoint(),
        "fetched_at": int(time.time()),
        "config": _read_json(config_path, str(config_path)),
        "quant_config": _read_json(quant_path, str(quant_path)) if quant_path else None,
        "tensors": (None if ckpt is None
                    else {k: [d, list(s)] for k, (d, s) in ckpt.tensors.items()}),
        "safetensors_files": 0 if ckpt is None else ckpt.files,
    }


class _translate_errors:
    """huggingface_hub / network exceptions → kvplan errors with a next step."""

    def __init__(self, repo_id: str, rev: str, token: str | None, timeout: float) -> None:
        self.repo_id, self.rev, self.token, self.timeout = repo_id, rev, token, timeout

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> Literal[False]:
        if exc is None or isinstance(exc, (InvalidConfigError, UnavailableError)):
            return False
        from huggingface_hub import errors as hf_errors

        repo, url = self.repo_id, f"{_shown_endpoint()}/{self.repo_id}"
        if isinstance(exc, hf_errors.GatedRepoError):
            how = ("your token has not been granted access" if self.token else
                   "no token was sent")
            raise UnavailableError(
                f"{repo} is a gated repo and {how}", reason=Reason.GATED,
                hint=f"accept the licence at {url}, then set HF_TOKEN (or pass --token) to a token "
                "of that account") from None
        if isinstance(exc, hf_errors.RevisionNotFoundError):
            raise InvalidInputError(f"revision {self.rev!r} not found in {repo}",
                                    reason=Reason.NOT_FOUND,
                                    hint="check --revision against the branches, tags and "
                                    f"commits at {url}") from None
        if isinstance(exc, hf_errors.RepositoryNotFoundError):
            # the catalogue adds "did you mean" (catalog.py)
            raise UnknownModelError(
                repo, [], message=f"model {repo!r} not found: not in the catalogue, not a local "
                f"path, not on {_shown_endpoint()}",
                hint="check the repo id; for a private repo set HF_TOKEN (or pass --token); "
                "`kvplan models` lists the catalogue") from None
        if isinstance(exc, hf_errors.OfflineModeIsEnabled):
            raise UnavailableError(f"{repo} is not cached and offline mode is on",
                                   reason=Reason.OFFLINE_MISS,
                                   hint="run once online, or pass a local model directory"
                                   ) from None
        if isinstance(exc, hf_errors.LocalEntryNotFoundError) or _is_network_error(exc):
            raise UnavailableError(
                f"could not reach {_shown_endpoint()} for {repo} within {self.timeout:g} s "
                f"({type(exc).__name__})", reason=Reason.NETWORK,
                hint="check the network / proxy / HF_ENDPOINT, raise KVPLAN_HUB_TIMEOUT, or plan "
                "offline from a cache (--offline) or a local directory") from None
        if isinstance(exc, hf_errors.HfHubHTTPError):
            status = getattr(getattr(exc, "response", None), "status_code", "?")
            raise UnavailableError(f"the Hub answered HTTP {status} for {repo}",
                                   reason=Reason.HUB_ERROR,
                                   hint="retry later, or plan from a local directory") from None
        return False


def _is_network_error(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"TimeoutException", "ConnectError", "NetworkError", "TransportError",
                         "ConnectionError", "TimeoutError", "ReadTimeout", "ConnectTimeout"})
