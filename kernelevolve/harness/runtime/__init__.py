"""The code that runs inside a sandboxed evaluation process (imported by the generated scripts).

Each tool is one module with `main(config)`: `correctness`, `judge`, `benchmark`, `preflight` (and the
profilers). The scripts rendered from harness_templates/ only embed the per-candidate configuration and
call it; each harness parses it into its dataclass of `configs` at once, and leaves a result file whose
fields are `report`'s. Everything a
judge relies on (timers, synchronisation, comparisons, the reference's outputs) is captured or
computed before the candidate is imported: see `tripwire`, `kernel_monitor` and `input_guard`.
"""
