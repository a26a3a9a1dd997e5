"""SGLang's `--enable-mixed-chunk` (docs/sglang-mixed-chunk.md). Pure functions.

Without the flag SGLang schedules prefill first: a prefill batch runs while the running requests
wait, so a closed loop of equal requests moves in lock-step waves (kvplan/perf/step.py,
"separate"). With it, and chunked prefill on (always, in kvplan's plans: --chunked-prefill-size
takes no value that turns it off), a prefill batch is merged with the running decodes into one
step (python/sglang/srt/managers/scheduler.py get_new_batch_prefill → mix_with_running;
`is_mixed_chunk = chunked_prefill_size is not None and enable_mixed_chunk`). The batch takes
prompts while they fit in the step's room less one token per running request
(managers/schedule_policy.py PrefillAdder, mixed_with_decode_tokens = running_bs; SGLang
0.5.6.post2): the prompt that overruns --chunked-prefill-size is chunked, while a batch whose
room is --max-prefill-tokens stops before it unless empty (add_one_req). kvplan plans that as
the mixed style with prompt admission (PerfContext.whole_prompts, split_last_prompt;
perf.step.burst_wait_s drains a burst in whole prompts, perf/simulate.py follows add_one_req) —
the batching benchmarks/perf_fit.py fits SGLang's mixed-chunk calibration rows with
(Engine.launch_batching).

Releases, read from each release's python/sglang/srt/server_args.py (PyPI wheels):
* the flag first appears in 0.2.14 (not in 0.2.13: argparse refuses an unknown flag);
* with --pp-size > 1 check_server_args asserts `not self.enable_mixed_chunk` up to 0.5.10
  ("Pipeline parallelism is not compatible with ... mixed chunked prefill"); 0.5.11 dropped the
  assertion (sgl-project/sglang PR #22920);
* speculative decoding turns it off: 0.5.6.post2 `_handle_speculative_decoding` sets
  enable_mixed_chunk = False for EAGLE, EAGLE3, STANDALONE (NEXTN runs as EAGLE) and NGRAM
  with a warning; 0.5.20 and 0.5.23 keep it for EAGLE, EAGLE3, DFLASH and DSPARK
  (speculative/spec_info.py supports_mixed_chunk; 0.5.16 has no such list), where a mixed step
  decodes the running requests one token each — not modelled: kvplan plans the prefill-first
  batching with speculation and says so.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from ..specs import Deployment, Problem

FIRST_RELEASE = (0, 2, 14)  # server_args.py of 0.2.14 declares --enable-mixed-chunk; 0.2.13 not
PIPELINE_FROM = (0, 5, 11)  # check_server_args refuses it with --pp-size > 1 through 0.5.10


def mixed_batching(budget: int, max_prefill_tokens: int) -> dict[str, Any]:
    """The PerfContext fields of mixed steps that admit whole prompts: a step's prefill tokens
    are capped by --chunked-prefill-size (`budget`) and by --max-prefill-tokens."""
    return {"style": "mixed", "whole_prompts": True,
            "max_num_batched_tokens": min(budget, max_prefill_tokens),
            "split_last_prompt": budget < max_prefill_tokens}


def check_release(version: tuple[int, ...], version_text: str, pipeline_parallel_size: int
                  ) -> None:
    """Refuse what the planned release refuses at start-up: the flag before 0.2.14, and the
    flag with pipeline parallelism before 0.5.11."""
    if version < FIRST_RELEASE:
        raise InvalidInputError(
            f"--enable-mixed-chunk: SGLang {version_text} has no such flag (first in 0.2.14, "
            "python/sglang/srt/server_args.py)",
            hint="plan SGLang 0.2.14 or newer (--engine-version), or drop --enable-mixed-chunk",
            code="flag-not-in-release", knob="enable_mixed_chunk")
    if pipeline_parallel_size > 1 and version < PIPELINE_FROM:
        raise InvalidInputError(
            f"--enable-mixed-chunk with -pp {pipeline_parallel_size}: SGLang {version_text} "
            "refuses to start (server_args.py check_server_args: pipeline parallelism is not "
            "compatible with mixed chunked prefill, up to 0.5.10)",
            hint="plan SGLang 0.5.11 or newer (--engine-version), use -pp 1, or drop "
            "--enable-mixed-chunk", code="out-of-range", knob="enable_mixed_chunk")


def active(enabled: bool, dep: Deployment) -> bool:
    """Whether kvplan plans the mixed batching: the flag given and no speculative decoding
    (which SGLang 0.5.6.post2 turns it off for; see the module docstring)."""
    return enabled and dep.speculative_config is None


def problems(enabled: bool, dep: Deployment) -> list[Problem]:
    """What the plan says about the flag: with speculative decoding it is not planned."""
    if not enabled or dep.speculative_config is None:
        return []
    return [Problem(
        code="mixed-chunk-not-planned", severity="warning",
        message="--enable-mixed-chunk with speculative decoding: the latency figures assume "
        "SGLang's prefill-first batching (0.5.6.post2 turns mixed chunks off for every "
        "speculative algorithm; releases from 0.5.20 at the latest keep them for EAGLE, EAGLE3, "
        "DFLASH and DSPARK, which kvplan does not model)")]
