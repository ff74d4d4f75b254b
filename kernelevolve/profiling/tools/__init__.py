"""The profiling tools, one module each (NAME.py: its ProfilerTool record `TOOL`, its part's schema,
its parser, its lines), registered in TOOLS by name.

Everything else iterates over TOOLS: the runner, the collection of profiles, ProfileSummary (stored
under each tool's name), `kernelevolve profile` and `run --profile`. The order here is the order
`all` runs them and the order their lines are printed.
"""

from __future__ import annotations

from kernelevolve.profiling.tools import ncu, proton, torch
from kernelevolve.profiling.tools.base import ProfileParseError, ProfilerTool

TOOLS: dict[str, ProfilerTool] = {tool.name: tool for tool in (torch.TOOL, ncu.TOOL, proton.TOOL)}

__all__ = ["TOOLS", "ProfileParseError", "ProfilerTool"]
