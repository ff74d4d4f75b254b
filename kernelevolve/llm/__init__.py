"""Model providers for the universal operator: Anthropic and OpenAI(-compatible) through their
SDKs, a file exchange for air-gapped use, retries with back-off, costs, a reply cache, and the
extraction of a kernel from a reply. Operators are chosen in kernelevolve.operators."""

from kernelevolve.llm.base import LLMError, LLMReply, Provider
from kernelevolve.llm.extract import Extraction, extract_kernel

__all__ = ["Extraction", "LLMError", "LLMReply", "Provider", "extract_kernel"]
