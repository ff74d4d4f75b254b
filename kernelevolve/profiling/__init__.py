"""Profiles of a candidate: the sandboxed profiling harnesses (runner), what their raw outputs
say (parsers, into the schema), and the roofline line that places a latency against the GPU's
peaks. The harnesses themselves are kernelevolve/harness/runtime/profile_*.py."""
