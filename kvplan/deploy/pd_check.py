"""`kvplan check` on disaggregated prefill/decode launch lines (docs/disagg.md, "check"): the
P/D settings a serving command carries, and what they change in the pool's memory plan, as
`kvplan plan --disagg` plans a pool (kvplan/engines/pd.py holds the engines' facts):

* vLLM `--kv-transfer-config '{"kv_connector": …, "kv_role": …}'`: kv_producer is a prefill
  instance, kv_consumer a decode one, kv_both either. NixlConnector registers the engine's own
  KV cache and takes no device buffer; other connectors (P2pNcclConnector's 1 GB
  kv_buffer_size, LMCache) are not modelled: a warning.
* SGLang `--disaggregation-mode prefill|decode`: the decode server admits a transferred
  request only while its free KV pool keeps --num-reserved-decode-tokens (512) for every
  request (disaggregation/decode.py DecodePreallocQueue), so it holds fewer requests of
  max_model_len than a plain server; the prefill server turns CUDA graphs off, the decode one
  the radix cache (server_args.py _handle_disaggregation).
* TensorRT-LLM `cache_transceiver_config` in the --extra_llm_api_options YAML: the
  transceiver's buffers, (max_tokens_in_buffer + tokens_per_block) × KV bytes per token per GPU
  × 3 (512 MB each without max_tokens_in_buffer), come out of the memory the KV cache is sized
  from (kvCacheManager.cpp calculateMaxNumBlocks): the pool is re-planned on the device total
  less them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..engines import pd, registry
from ..sources.limits import read_text_limited
from ..specs import Plan, Problem
from ..units import GiB
from .commands import MAX_OPTIONS_BYTES, Found, load_yaml

Role = Literal["prefill", "decode", "either"]
# the P/D flags this module reads (not "kept but not modelled" in check's notes)
READ_FLAGS = frozenset({"--kv-transfer-config", "--disaggregation-mode",
                        "--num-reserved-decode-tokens", "--disaggregation-transfer-backend"})
# the kv_role of a JSON P/D flag (vLLM --kv-transfer-config, kv_transfer/kv_transfer_state.py)
JSON_ROLES: dict[str, Role] = {"kv_producer": "prefill", "kv_consumer": "decode",
                               "kv_both": "either"}


@dataclass(frozen=True)
class PdSettings:
    """The P/D settings of one serving command."""

    role: Role
    connector: str
    read_from: str  # the flag or YAML key
    max_tokens_in_buffer: int | None = None
    reserved_decode_tokens: int = 0  # the decode server's free-KV reserve per request


def _flag(f: Found, name: str) -> str | None:
    for arg in f.unknown_flags:
        if arg.name == name:
            return arg.value
    return None


def read(f: Found, options_file: Path | str | None) -> tuple[PdSettings | None, list[Problem]]:
    """The command's P/D settings (None: an aggregated server) and problems reading them.
    `options_file`: the engine's options file, a path or (written by the deployment file
    itself) its text."""
    sup = pd.support(f.engine or "")
    if sup is None:
        return None, []
    if sup.declared_by == "json-flag":
        raw = _flag(f, sup.flag)
        if raw is None:
            return None, []
        try:
            cfg = json.loads(raw)
        except ValueError:
            return None, [Problem(code="pd-config-unread", severity="warning",
                                  message=f"{sup.flag} is not JSON kvplan can read: "
                                  "the P/D settings are not checked")]
        role = JSON_ROLES.get(str(cfg.get("kv_role", "")), "either") if isinstance(cfg, dict) \
            else "either"
        conn = str(cfg.get("kv_connector", "?")) if isinstance(cfg, dict) else "?"
        return PdSettings(role, conn, sup.flag), []
    if sup.declared_by == "mode-flag":
        mode = _flag(f, sup.flag)
        if mode not in ("prefill", "decode"):
            return None, []
        reserve = _flag(f, "--num-reserved-decode-tokens")
        return PdSettings("prefill" if mode == "prefill" else "decode",
                          _flag(f, "--disaggregation-transfer-backend") or sup.connector,
                          sup.flag,
                          reserved_decode_tokens=int(reserve) if reserve and reserve.isdigit()
                          else sup.decode_reserve_tokens), []
    if options_file is not None:
        return _options_section(sup, options_file)
    return None, []


def _options_section(sup: pd.PdSupport, path: Path | str
                     ) -> tuple[PdSettings | None, list[Problem]]:
    """The transceiver section of the engine's options file (TensorRT-LLM's
    cache_transceiver_config), None when the file has none."""
    doc: Any = load_yaml(path) if isinstance(path, str) else load_yaml(read_text_limited(
        path, MAX_OPTIONS_BYTES, what="options file", root=path.parent), path=str(path))
    ctc = doc.get(sup.flag) if isinstance(doc, dict) else None
    if not isinstance(ctc, dict):
        return None, []
    raw = ctc.get("max_tokens_in_buffer")
    tokens = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else None
    problems = [] if raw is None or tokens is not None else [Problem(
        code="pd-config-unread", severity="warning",
        message=f"cache_transceiver_config.max_tokens_in_buffer {raw!r} is not a positive "
        "whole number: the default 512 MB buffers are assumed")]
    return PdSettings("either", f"cache transceiver (backend {ctc.get('backend', 'DEFAULT')})",
                      sup.flag, max_tokens_in_buffer=tokens), problems


def buffer_bytes(engine: str, s: PdSettings, p: Plan) -> int:
    """The connector's device buffers per GPU outside the KV cache (TensorRT-LLM only)."""
    return pd.buffer_bytes(engine, kv_bytes_per_token=p.kv_cache.bytes_per_token,
                           block_size=int(p.inputs["block_size"].value or 1)
                           if "block_size" in p.inputs else 1,
                           max_tokens_in_buffer=s.max_tokens_in_buffer)


def problems(engine: str, s: PdSettings, p: Plan, buffers: int) -> list[Problem]:
    """What the P/D settings change in the pool's plan, in words (and warnings for what kvplan
    does not model)."""
    where = f"{s.read_from}: {s.role} pool" if s.role != "either" else \
        f"{s.read_from}: prefill or decode pool"
    out = [Problem(code="pd-pool", severity="info",
                   message=f"disaggregated P/D ({where}, {s.connector}), planned as "
                   "`kvplan plan --disagg` plans a pool (docs/disagg.md)")]
    sup = pd.support(engine)
    label = registry.get(engine).label
    if sup is not None and sup.declared_by == "json-flag" and s.connector != sup.connector:
        out.append(Problem(code="feature-not-modelled", severity="warning",
                           message=f"{label} {s.connector}: its device buffers are not modelled "
                           f"({sup.connector} takes {sup.buffer}), so KV capacity may be "
                           "overstated"))
    if buffers:
        out.append(Problem(code="pd-buffers", severity="info",
                           message=f"cache transceiver buffers {buffers / GiB:.2f} GiB per GPU "
                           "(3 buffers; cacheTransBuffer.cpp) come out of the memory the KV "
                           "cache is sized from: planned on the device total less them"))
    if s.role == "decode" and s.reserved_decode_tokens:
        ctx = int(p.inputs["max_model_len"].value or 0) if "max_model_len" in p.inputs else 0
        held = p.kv_cache.tokens // (ctx + s.reserved_decode_tokens) if ctx else 0
        out.append(Problem(
            code="pd-decode-admission", severity="info",
            message=f"{label}'s decode server admits a request only while its free KV keeps "
            f"{s.reserved_decode_tokens} tokens for every request (engines/pd.py: "
            f"{'; '.join(sup.sources if sup else ())}): {held:,} requests of {ctx:,} tokens "
            f"per rank, not {p.kv_cache.tokens // max(ctx, 1):,}"))
    if s.role == "prefill" and sup is not None and sup.prefill_notes:
        out.append(Problem(code="pd-prefill-server", severity="info",
                           message=f"{label}'s prefill server: " + "; ".join(sup.prefill_notes)))
    return out


def device_total_gib(p: Plan, buffers: int) -> float:
    """The device total to re-plan the pool on: what the plan used, less the buffers."""
    return (p.memory.total_bytes - buffers) / GiB
