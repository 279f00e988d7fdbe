"""Runs the cells of a `proxima sweep --ray ADDRESS` as Ray tasks.

`proxima sweep` writes this file into the sweep's folder and runs it with the
Python of the environment `tools/ray/setup.sh` makes. Each cell is one task
(one CPU) that runs the `proxima` binary with the cell's arguments on a
worker: the binary is put in the object store once and installed on each
node under its digest, so the workers need nothing but Ray. Inputs the cells
name (trace files) must be at the same paths on every node, as on a shared
file system or a one-machine cluster.

Protocol: reads CELLS (`[{"id", "args"}]`); prints, as each cell finishes,
one line `proxima-cell {"id", "exit_code", "stdout", "stderr"}` (exit_code
null when the process died of a signal) on standard output, flushed. Exits 1
if Ray cannot be reached.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import ray

LINE_PREFIX = "proxima-cell "


def installed_binary(binary: bytes, digest: str) -> str:
    """The binary's path on this node, written once per digest (atomically)."""
    folder = os.path.join(tempfile.gettempdir(), f"proxima-ray-{digest}")
    path = os.path.join(folder, "proxima")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        descriptor, aside = tempfile.mkstemp(dir=folder)
        with os.fdopen(descriptor, "wb") as file:
            file.write(binary)
        os.chmod(aside, 0o755)
        os.replace(aside, path)
    return path


@ray.remote(num_cpus=1)
def run_cell(binary: bytes, digest: str, args: list) -> dict:
    """One cell: the binary with its arguments, to its end."""
    completed = subprocess.run(
        [installed_binary(binary, digest), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
    )
    return {
        "exit_code": completed.returncode if completed.returncode >= 0 else None,
        "stdout": completed.stdout,
        "stderr": completed.stderr,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="the cluster, as ray.init takes it")
    parser.add_argument("--binary", required=True, help="the proxima binary")
    parser.add_argument("--cells", required=True, help="the cells, as JSON")
    arguments = parser.parse_args()
    with open(arguments.binary, "rb") as file:
        binary = file.read()
    digest = hashlib.sha256(binary).hexdigest()[:16]
    with open(arguments.cells, encoding="utf-8") as file:
        cells = json.load(file)
    try:
        ray.init(address=arguments.address, log_to_driver=False, logging_level="ERROR")
    except Exception as error:  # Ray raises several kinds for an unreachable cluster.
        print(f"cannot reach the Ray cluster at {arguments.address}: {error}", file=sys.stderr)
        return 1
    binary_reference = ray.put(binary)
    pending = {run_cell.remote(binary_reference, digest, cell["args"]): cell["id"] for cell in cells}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for reference in done:
            cell_id = pending.pop(reference)
            record = ray.get(reference)
            record["id"] = cell_id
            print(LINE_PREFIX + json.dumps(record), flush=True)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
