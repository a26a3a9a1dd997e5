"""Disaggregated prefill/decode (P/D) as each engine runs it: the KV-transfer connector, the
GPU memory it takes outside the KV cache, when the KV moves (after the whole prefill, or chunk
by chunk while the prefill runs), the settings each pool's engine changes itself, and the launch
syntax of both pools and of the router in front of them. Pure data and text; the planner
(kvplan/planner/disagg.py) reads it through `support()`.

Sources (read for this module; the versions are those kvplan models, engines/<engine>.py):

* vLLM 0.11–0.12 NixlConnector: vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py
  registers the engine's own KV cache tensors with NIXL (register_kv_caches) and the decode
  worker reads the prompt's blocks from the prefill worker once its prefill has finished
  (start_load_kv → read_blocks): no extra device buffer when kv_buffer_device is "cuda" (the
  default, KVTransferConfig in vllm/config/kv_transfer.py), and no overlap with the prefill.
  Launch: docs/features/nixl_connector_usage.md (`--kv-transfer-config
  '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'` on both instances, a proxy in front:
  tests/v1/kv_connector/nixl_integration/toy_proxy_server.py). Side channel port:
  VLLM_NIXL_SIDE_CHANNEL_PORT (vllm/envs.py, default 5600).
* SGLang 0.5.x: python/sglang/srt/server_args.py `_handle_disaggregation` — a prefill server
  disables CUDA graphs ("Cuda graph is disabled for prefill server"), a decode server disables
  the radix cache ("KV cache is forced as chunk cache for decode server"); flags
  --disaggregation-mode, --disaggregation-transfer-backend (default mooncake),
  --disaggregation-bootstrap-port (default 8998). The transfer engine (mooncake, nixl) registers
  the KV pool itself (python/sglang/srt/disaggregation/mooncake/conn.py): no copy buffer.
  python/sglang/srt/disaggregation/prefill.py sends each chunked-prefill chunk's KV as soon as
  the chunk is computed (send_kv_chunk(req, last_chunk=False)), so only the last chunk's KV
  moves after the prefill ends. Router: docs/advanced_features/pd_disaggregation.md
  (`python -m sglang_router.launch_router --pd-disaggregation --prefill URL BOOTSTRAP_PORT
  --decode URL`).
* TensorRT-LLM 1.x: cpp/tensorrt_llm/batch_manager/cacheTransBuffer.cpp — the cache
  transceiver preallocates (min(window, max_tokens_in_buffer) + tokens_per_block) × KV bytes
  per token per layer, summed over the rank's layers, per buffer, else
  TRTLLM_KVCACHE_TRANSFER_BUFFER_SIZE (default "512MB", cpp/tensorrt_llm/common/envUtils.cpp),
  for 1 receive buffer (2 with TRTLLM_REQUEST_KV_CACHE_CONCURRENT) + TRTLLM_KVCACHE_SEND_MAX_
  CONCURRENCY_NUM send buffers (default 2); kvCacheManager.cpp calculateMaxNumBlocks subtracts
  that preAllocBufferSize (extraCostMemory) from the free memory before the KV fraction applies.
  The context server sends the KV after the context phase. Launch:
  docs/source/features/disagg-serving.md and examples/disaggregated/README.md (each worker a
  `trtllm-serve` with `cache_transceiver_config` in its --extra_llm_api_options YAML, the
  context workers with `disable_overlap_scheduler: true`, then `trtllm-serve disaggregated -c
  disagg_config.yaml`).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Literal

Overlap = Literal["after_prefill", "per_chunk"]

# TensorRT-LLM cache transceiver defaults (cpp/tensorrt_llm/common/envUtils.cpp, 1.x)
TRTLLM_DEFAULT_BUFFER_BYTES = 512 * 1024 * 1024  # TRTLLM_KVCACHE_TRANSFER_BUFFER_SIZE "512MB"
TRTLLM_SEND_BUFFERS = 2  # TRTLLM_KVCACHE_SEND_MAX_CONCURRENCY_NUM
TRTLLM_RECV_BUFFERS = 1  # without TRTLLM_REQUEST_KV_CACHE_CONCURRENT
SGLANG_BOOTSTRAP_PORT = 8998  # --disaggregation-bootstrap-port default (server_args.py)
# SGLang's decode server admits a transferred request only while the free KV pool exceeds
# --num-reserved-decode-tokens (default 512, SGLANG_NUM_RESERVED_DECODE_TOKENS) for every request
# running, in transfer or waiting (python/sglang/srt/disaggregation/decode.py
# DecodePreallocQueue._allocatable_tokens): each holds its prompt, what it has generated and
# that reserve.
SGLANG_RESERVED_DECODE_TOKENS = 512


@dataclass(frozen=True)
class PdSupport:
    """How one engine disaggregates prefill and decode."""

    engine: str
    connector: str  # what moves the KV, as the launch line names it
    overlap: Overlap  # after_prefill: the prompt's KV after its prefill; per_chunk: as it goes
    buffer: str  # the device memory the connector takes outside the KV cache, in words
    prefill_notes: tuple[str, ...] = ()  # what the engine changes itself in a prefill server
    decode_notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=())
    vendors: tuple[str, ...] = ("NVIDIA",)  # GPU vendors whose P/D path kvplan read
    # how a launch line carries its P/D settings (deploy/pd_check.py reads them): a JSON flag
    # with a kv_role, a mode flag (prefill|decode), or a section of the engine's options file
    declared_by: Literal["json-flag", "mode-flag", "options-file"] = "json-flag"
    flag: str = ""  # that flag, or the options file's section
    transceiver_buffers: bool = False  # preallocated transfer buffers outside the KV cache
    decode_reserve_tokens: int = 0  # KV tokens the decode server keeps free per request
    # what a prefill and a decode server given as separate commands must agree on beyond the
    # connector and the dtypes (deploy/pd_pair.py), each with the release range it holds for:
    # "block_size" (the same KV block size), "decode_tp_multiple" (the decode TP a multiple of
    # the prefill TP)
    pair_rules: tuple[str, ...] = ()
    pair_sources: tuple[str, ...] = ()


_SUPPORT: dict[str, PdSupport] = {
    "vllm": PdSupport(
        engine="vllm", connector="NixlConnector", overlap="after_prefill",
        buffer="none: NIXL registers the engine's own KV cache (kv_buffer_device cuda)",
        decode_notes=("the decode instance pulls the prompt's KV blocks over NIXL once the "
                      "prefill instance has finished the prompt",),
        sources=("vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py (0.11-0.12)",
                 "docs/features/nixl_connector_usage.md"),
        vendors=("NVIDIA", "AMD"),  # the usage guide covers ROCm builds of NIXL
        declared_by="json-flag", flag="--kv-transfer-config",
        # NixlConnectorWorker._validate_remote_agent_handshake: "Decode TP cannot be smaller
        # than prefill TP" with divide() (a whole multiple) and "Remote P worker with different
        # page/block size is not supported" in the 0.11-0.12 connector; at vllm-project/vllm
        # 002a1057 (main) a prefill TP above the decode's is accepted unless the KV heads are
        # replicated, and a decode block size a multiple of the prefill's: warnings, not errors
        pair_rules=("block_size", "decode_tp_multiple"),
        pair_sources=("vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py "
                      "_validate_remote_agent_handshake (0.11-0.12; relaxed at main 002a1057)",)),
    "sglang": PdSupport(
        engine="sglang", connector="mooncake", overlap="per_chunk",
        buffer="none: the transfer engine registers the KV pool itself",
        prefill_notes=("CUDA graphs off (server_args.py _handle_disaggregation): memory outside "
                       "--mem-fraction-static is freed, the KV pool is unchanged",),
        decode_notes=("the decode server admits a request only while its free KV keeps "
                      "--num-reserved-decode-tokens (512) per request (disaggregation/decode.py "
                      "DecodePreallocQueue)", "radix cache off (chunk cache) on the decode server"),
        sources=("python/sglang/srt/server_args.py _handle_disaggregation (0.5.x)",
                 "python/sglang/srt/disaggregation/prefill.py send_kv_chunk",
                 "docs/advanced_features/pd_disaggregation.md"),
        declared_by="mode-flag", flag="--disaggregation-mode",
        decode_reserve_tokens=SGLANG_RESERVED_DECODE_TOKENS),
    "trtllm": PdSupport(
        engine="trtllm", connector="cache transceiver (backend DEFAULT)", overlap="after_prefill",
        buffer="(max_tokens_in_buffer + tokens_per_block) × KV bytes per token per GPU, × (1 "
        "receive + 2 send) buffers, subtracted from free memory before the KV fraction",
        prefill_notes=("disable_overlap_scheduler: true on context servers "
                       "(examples/disaggregated/README.md)",),
        sources=("cpp/tensorrt_llm/batch_manager/cacheTransBuffer.cpp (1.x)",
                 "cpp/tensorrt_llm/common/envUtils.cpp", "docs/source/features/disagg-serving.md"),
        declared_by="options-file", flag="cache_transceiver_config", transceiver_buffers=True),
}


def support(engine: str) -> PdSupport | None:
    """The engine's P/D support, None when it has none (TGI)."""
    return _SUPPORT.get(engine)


def engines_with_pd() -> tuple[str, ...]:
    return tuple(_SUPPORT)


def buffer_bytes(engine: str, *, kv_bytes_per_token: int, block_size: int,
                 max_tokens_in_buffer: int | None) -> int:
    """Device bytes per GPU the connector preallocates outside the KV cache (TensorRT-LLM's
    preAllocBufferSize; 0 for NIXL/mooncake, which register the KV cache itself)."""
    sup = support(engine)
    if sup is None or not sup.transceiver_buffers:
        return 0
    if max_tokens_in_buffer is None:
        per_buffer = TRTLLM_DEFAULT_BUFFER_BYTES
    else:
        per_buffer = (max_tokens_in_buffer + block_size) * kv_bytes_per_token
    return per_buffer * (TRTLLM_RECV_BUFFERS + TRTLLM_SEND_BUFFERS)


def decode_tokens_per_request(engine: str, input_tokens: int, output_tokens: int) -> int | None:
    """KV tokens one running request takes in the engine's decode-server admission, when the
    engine gates admission itself (SGLang's prealloc queue: prompt + half the output on average
    + the reserve); None: kvplan's usual full request (prompt + output)."""
    sup = support(engine)
    if sup is None or not sup.decode_reserve_tokens:
        return None
    return input_tokens + output_tokens // 2 + sup.decode_reserve_tokens


def transceiver_tokens(input_tokens: int, block_size: int) -> int:
    """max_tokens_in_buffer for TensorRT-LLM: one prompt, rounded up to whole blocks (it must be
    a multiple of tokens_per_block: cacheTransBuffer.cpp TLLM_CHECK)."""
    return -(-input_tokens // block_size) * block_size


# ------------------------------------------------------------------------ launch lines


def _vllm_config() -> str:
    return shlex.quote(json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                                  separators=(",", ":")))


def _yaml_section(lines: list[str], command: str) -> str:
    """Add YAML lines to a TensorRT-LLM launch: into its extra_llm_api_options heredoc when it
    has one, else a new heredoc and the flag that reads it."""
    text = "".join(f"{line}\n" for line in lines)
    marker = "cat > extra_llm_api_options.yaml <<'EOF'\n"
    if marker in command:
        head, rest = command.split(marker, 1)
        body, tail = rest.split("EOF\n", 1)
        return f"{head}{marker}{body}{text}EOF\n{tail}"
    return (f"{marker}{text}EOF\n{command} --extra_llm_api_options extra_llm_api_options.yaml")


def pool_command(engine: str, role: Literal["prefill", "decode"], command: str, *,
                 port: int, max_tokens_in_buffer: int | None = None) -> str:
    """One pool's serve line with the engine's P/D settings appended."""
    if engine == "vllm":
        return f"{command} --port {port} --kv-transfer-config {_vllm_config()}"
    if engine == "sglang":
        extra = (f" --disaggregation-mode {role} --disaggregation-transfer-backend mooncake"
                 f" --port {port}")
        if role == "prefill":
            extra += f" --disaggregation-bootstrap-port {SGLANG_BOOTSTRAP_PORT}"
        return command + extra
    if engine == "trtllm":
        lines = ["cache_transceiver_config:", "  backend: DEFAULT"]
        if max_tokens_in_buffer is not None:
            lines.append(f"  max_tokens_in_buffer: {max_tokens_in_buffer}")
        if role == "prefill":
            lines.append("disable_overlap_scheduler: true")
        out = _yaml_section(lines, command)
        return out.replace("extra_llm_api_options.yaml", f"{role}_extra_llm_api_options.yaml") \
            + f" --port {port}"
    raise ValueError(f"{engine} has no disaggregated prefill/decode")


def router_command(engine: str, *, prefill_port: int, decode_port: int, prefill_replicas: int,
                   decode_replicas: int) -> str:
    """What sits in front of the two pools (one host per replica: `prefill-0`, `decode-0`, …)."""
    p_hosts = [f"prefill-{i}" for i in range(prefill_replicas)]
    d_hosts = [f"decode-{i}" for i in range(decode_replicas)]
    if engine == "vllm":
        return ("python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8000"
                f" --prefiller-hosts {' '.join(p_hosts)} --prefiller-ports "
                + " ".join([str(prefill_port)] * prefill_replicas)
                + f" --decoder-hosts {' '.join(d_hosts)} --decoder-ports "
                + " ".join([str(decode_port)] * decode_replicas))
    if engine == "sglang":
        return ("python -m sglang_router.launch_router --pd-disaggregation"
                + "".join(f" --prefill http://{h}:{prefill_port} {SGLANG_BOOTSTRAP_PORT}"
                          for h in p_hosts)
                + "".join(f" --decode http://{h}:{decode_port}" for h in d_hosts)
                + " --host 0.0.0.0 --port 8000")
    if engine == "trtllm":
        p_urls = "".join(f"\n    - \"{h}:{prefill_port}\"" for h in p_hosts)
        d_urls = "".join(f"\n    - \"{h}:{decode_port}\"" for h in d_hosts)
        yaml_text = (f"hostname: 0.0.0.0\nport: 8000\nbackend: pytorch\ncontext_servers:\n"
                     f"  num_instances: {prefill_replicas}\n  urls:{p_urls}\n"
                     f"generation_servers:\n  num_instances: {decode_replicas}\n  urls:{d_urls}\n")
        return (f"cat > disagg_config.yaml <<'EOF'\n{yaml_text}EOF\n"
                "trtllm-serve disaggregated -c disagg_config.yaml")
    raise ValueError(f"{engine} has no disaggregated prefill/decode")
