"""Profiles of a candidate: the profiling tools, one record each (tools/: each tool's harness module,
parser, part of the summary and lines), the sandboxed runs of their harnesses (runner), the summary
schema, and the roofline line that places a latency against the GPU's peaks. The harnesses themselves
are kernelevolve/harness/runtime/profile_*.py."""
