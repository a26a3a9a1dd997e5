"""Ready to publish and to drop into CI (issue #23): the Action's interface, the workflow that runs
it on the examples, the pre-commit hook and the package metadata."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_action_inputs_and_install_from_its_checkout():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert {"paths", "gpu", "format", "fail-on"} <= set(action["inputs"])
    assert action["runs"]["using"] == "composite"
    steps = " ".join(str(s.get("run", "")) for s in action["runs"]["steps"])
    assert 'pip install --quiet "$ACTION_PATH"' in steps  # the checked-out action, no index
    assert "$GITHUB_STEP_SUMMARY" in steps and "--format markdown" in steps
    # inputs reach the script as environment variables, never pasted into its text
    assert "${{ inputs." not in steps


def test_workflow_runs_the_action_on_the_examples():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "kvplan-check.yml").read_text())
    steps = [s for job in flow["jobs"].values() for s in job["steps"]]
    uses = [s for s in steps if s.get("uses") == "./"]
    assert len(uses) == 2 and all("examples/deploy" in s["with"]["paths"] for s in uses)
    assert any(s.get("continue-on-error") for s in uses)  # the broken copies are expected to fail


def test_pre_commit_hook_runs_kvplan_check():
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "kvplan-check" and hook["entry"] == "kvplan check"
    assert re.search(hook["files"], "deploy/dynamo.yaml")
    assert re.search(hook["exclude"], ".github/workflows/ci.yml")


def test_version_is_single_sourced_and_metadata_complete():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    init = (ROOT / "kvplan" / "__init__.py").read_text()
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+"$', init, re.M)
    assert project["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()
    assert project["classifiers"] and set(project["urls"]) >= {"Homepage", "Source", "Issues"}
