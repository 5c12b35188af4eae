"""The stages import one way: the batch never loads the HTTP server (docs/contracts.md, and
`lint-imports`, run by CI, for every import)."""

import subprocess
import sys

import pytest

# The batch path, each module with the stages it imports only inside functions (postprocess,
# verify): a build process or a worker loads these.
BATCH = ["pointcast.build", "pointcast.postprocess", "pointcast.verify", "pointcast.flows.cycle"]


@pytest.mark.parametrize("module", BATCH)
def test_batch_path_leaves_the_server_unloaded(module):
    code = (f"import sys, {module}\n"
            "print(sorted(m for m in ('pointcast.server', 'pointcast.cli', 'uvloop', 'httptools')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"importing {module} loaded {out.stdout.strip()}"
