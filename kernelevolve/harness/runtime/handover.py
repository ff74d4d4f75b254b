"""Outputs handed from the candidate's process to the judge's, as raw bytes and nothing else.

The candidate's process (correctness.py, benchmark.py) writes each call's outputs with
`write_outputs`: per tensor, its bytes in chunk files (of an output over FULL_BYTES, the bytes of a
sample of its blocks, and digests of the whole: a 256 MB output costs ~0.2 s to hand over in full on
the H200 host), then a small JSON manifest (dtype, shape, the chunk files). The judge (judge.py, a process that never imports the candidate) reads them with
`read_outputs`, which trusts nothing in the folder: the manifest is validated field by field, each
chunk is opened without following links and must have exactly the size the dtype and shape imply, and
the tensors are built by the judge from the bytes, so they are plain `torch.Tensor`s whatever the
candidate's forward returned. No pickle is involved anywhere.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass

import torch

CHUNK_BYTES = 64 << 20  # each file stays far below the sandbox's per-file cap
MANIFEST_BYTES = 1 << 20
DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.complex64,
        torch.complex128,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
    )
}
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


class HandoverError(Exception):
    """The outputs in the folder are missing, malformed or not what a plain tensor list would give."""


FULL_BYTES = 32 << 20  # an output up to this size is handed over byte for byte
BLOCK = 16384  # elements: the unit of a larger output's sample
SAMPLE_EVERY = 16  # a larger output: one block in this many (and its first and last EDGE_BLOCKS blocks)
EDGE_BLOCKS = 4


@dataclass(frozen=True)
class Sampled:
    """A large output as handed over: its shape and dtype, and the values of the blocks `sample_blocks` chose."""

    shape: tuple
    dtype: torch.dtype
    blocks: list
    values: torch.Tensor  # 1-D: the chosen blocks' elements, in order


def sample_blocks(numel: int, itemsize: int, seed: int) -> list[int] | None:
    """Which BLOCK-element blocks of an output of `numel` elements are handed over byte for byte (None: all
    of it, the output is at most FULL_BYTES). Its first and last blocks (ragged tails, edge tiles) and one
    in SAMPLE_EVERY of the others, drawn from the seed: both sides compute the same list."""
    if numel * itemsize <= FULL_BYTES:
        return None
    count = -(-numel // BLOCK)
    g = torch.Generator().manual_seed(seed % (2**63 - 1))
    middle = torch.randperm(count - 2 * EDGE_BLOCKS, generator=g)[: max(1, count // SAMPLE_EVERY)] + EDGE_BLOCKS
    edges = list(range(EDGE_BLOCKS)) + list(range(count - EDGE_BLOCKS, count))
    return sorted(set(edges) | set(middle.tolist()))


def gather_blocks(flat: torch.Tensor, blocks: list[int]) -> torch.Tensor:
    return torch.cat([flat[b * BLOCK : (b + 1) * BLOCK] for b in blocks])


def plain(outs: list) -> list:
    """Each plain tensor of `outs` as a fresh tensor object on the same memory (torch.Tensor.detach called
    through the class): methods the candidate set on its output's instance (`y.cpu = ...`, `y.contiguous =
    ...`) are not what the handover calls. Anything else is left as it is, for the type check to name."""
    return [torch.Tensor.detach(t) if type(t) is torch.Tensor else t for t in outs]


def write_outputs(folder: str, name: str, outs: list, seed: int = 0) -> None:
    """Write `outs` (a list of tensors) as `name`'s manifest and chunks in `folder` (the candidate's side):
    every byte of an output up to FULL_BYTES; of a larger one, the blocks `sample_blocks` names, and its
    digests (write_digests) for the judge's check of it as a whole. The manifest comes last."""
    os.makedirs(folder, exist_ok=True)
    entries = []
    outs = plain(outs)
    if any(type(t) is torch.Tensor and t.numel() * t.element_size() > FULL_BYTES for t in outs):
        write_digests(folder, name, outs, seed)
    for i, t in enumerate(outs):
        if type(t) is not torch.Tensor:
            raise TypeError(f"output {i} is a {type(t).__name__}, not a plain torch.Tensor")
        flat = t.contiguous().reshape(-1)
        blocks = sample_blocks(flat.numel(), flat.element_size(), seed + i)
        raw = _to_host(flat if blocks is None else gather_blocks(flat, blocks))
        files = []
        for k, start in enumerate(range(0, raw.numel(), CHUNK_BYTES)):
            path = f"{name}.{i}.{k}.bin"
            raw[start : start + CHUNK_BYTES].numpy().tofile(os.path.join(folder, path))
            files.append(path)
        entries.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "files": files})
    tmp = os.path.join(folder, f".{name}.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"tensors": entries}, f)
    os.replace(tmp, os.path.join(folder, f"{name}.json"))


def write_digests(folder: str, name: str, outs: list, seed: int) -> None:
    """Hand over `outs` as their shapes, dtypes and random projections (outside.digests) instead of their
    bytes: for the calls whose outputs are checked as a whole (repeated and timed calls), a few numbers
    instead of gigabytes. Any wrong output, NaN included, moves them far beyond the tolerance."""
    from kernelevolve.harness.runtime.outside import digests

    os.makedirs(folder, exist_ok=True)
    entries = []
    for i, t in enumerate(plain(outs)):
        if type(t) is not torch.Tensor:
            raise TypeError(f"output {i} is a {type(t).__name__}, not a plain torch.Tensor")
        entries.append(
            {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "digests": digests([t], seed + i)}
        )
    tmp = os.path.join(folder, f".{name}.digest.tmp")
    with open(tmp, "w") as f:
        json.dump({"tensors": entries}, f)
    os.replace(tmp, os.path.join(folder, f"{name}.digest.json"))


def read_digests(folder: str, name: str) -> list[dict]:
    """[{dtype, shape, digests}] as handed over for `name`; HandoverError if missing or malformed."""
    text = _read_file(os.path.join(folder, f"{name}.digest.json"), MANIFEST_BYTES, f"{name}: no outputs handed over")
    try:
        entries = json.loads(text).get("tensors")
    except (ValueError, AttributeError):
        entries = None
    if not isinstance(entries, list):
        raise HandoverError(f"{name}: the outputs' digests are not readable")
    for i, e in enumerate(entries):
        ok = isinstance(e, dict) and e.get("dtype") in DTYPES and isinstance(e.get("shape"), list)
        if not ok or not all(type(d) is int and d >= 0 for d in e["shape"]) or not isinstance(e.get("digests"), list):
            raise HandoverError(f"{name}: output {i}'s digest entry is malformed")
    return entries


def handed_over(folder: str, name: str) -> str | None:
    """ "full" (bytes), "digests", or None (nothing handed over as `name`)."""
    if os.path.lexists(os.path.join(folder, f"{name}.json")):
        return "full"
    if os.path.lexists(os.path.join(folder, f"{name}.digest.json")):
        return "digests"
    return None


def read_outputs(folder: str, name: str, device: str, seed: int = 0) -> list:
    """The tensors `name` holds in `folder`, on `device` (the judge's side): plain tensors, or `Sampled` for
    outputs over FULL_BYTES (the blocks the judge itself computes from the seed); HandoverError if anything
    is off."""
    manifest = _read_file(os.path.join(folder, f"{name}.json"), MANIFEST_BYTES, f"{name}: no outputs handed over")
    try:
        data = json.loads(manifest)
    except ValueError:
        raise HandoverError(f"{name}: the outputs' manifest is not JSON") from None
    entries = data.get("tensors") if isinstance(data, dict) else None
    if not isinstance(entries, list) or len(entries) > 4096:
        raise HandoverError(f"{name}: the outputs' manifest lists no tensors")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise HandoverError(f"{name}: output {i} is not described")
        dtype = DTYPES.get(entry.get("dtype")) if isinstance(entry.get("dtype"), str) else None
        shape, files = entry.get("shape"), entry.get("files")
        if dtype is None:
            raise HandoverError(f"{name}: output {i} has no known dtype ({str(entry.get('dtype'))[:40]!r})")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape) or len(shape) > 16:
            raise HandoverError(f"{name}: output {i} has no valid shape")
        if not isinstance(files, list) or not all(isinstance(p, str) and _NAME.match(p) for p in files):
            raise HandoverError(f"{name}: output {i} names files outside its folder")
        numel = math.prod(shape)
        blocks = sample_blocks(numel, dtype.itemsize, seed + i)
        if blocks is not None:
            numel = sum(min(BLOCK, numel - b * BLOCK) for b in blocks)
        nbytes = numel * dtype.itemsize
        starts = list(range(0, nbytes, CHUNK_BYTES))
        if len(files) != len(starts):
            raise HandoverError(f"{name}: output {i}'s bytes do not match its dtype and shape {tuple(shape)}")
        raw = _staging(nbytes, device)
        view = memoryview(raw.numpy())
        for p, start in zip(files, starts):
            _read_into(os.path.join(folder, p), view[start : start + CHUNK_BYTES], f"{name}: output {i} lacks {p}")
        if not nbytes:
            values = torch.empty(shape, dtype=dtype, device=device)
        elif device == "cpu" or not str(device).startswith("cuda"):
            values = raw.clone().view(dtype)
        else:  # from the page-locked staging buffer: several times faster than from pageable memory
            values = raw.to(device).view(dtype)
        out.append(values.reshape(shape) if blocks is None else Sampled(tuple(shape), dtype, blocks, values))
    return out


def warm_up(device: str, dtypes: list) -> None:
    """Pay handing over's one-time costs now, before any candidate code runs (a warm process waits for
    its candidate): the page-locked staging buffer at FULL_BYTES, cuBLAS's handle, and the few kernels
    a handover launches, on a few thousand elements per dtype (microseconds of GPU time: nothing another
    process's timing could notice). On the H200 the first handover otherwise took ~0.8 s more."""
    from kernelevolve.harness.runtime import outside

    if not (str(device).startswith("cuda") and torch.cuda.is_available()):
        return
    _staging(FULL_BYTES + (1 << 20), device)
    torch.cuda.current_blas_handle()
    for dtype in dict.fromkeys(dtypes):
        t = torch.zeros(2 * outside.COLS + 3, dtype=dtype, device=device)
        outside.digests([t], 0)
        _to_host(gather_blocks(t.reshape(-1), [0]).contiguous())
    torch.cuda.synchronize()


_STAGING: dict[str, torch.Tensor] = {}


def _staging(nbytes: int, device) -> torch.Tensor:
    """A host buffer of `nbytes` bytes, reused within the process: page-locked where the tensors go to or
    come from a GPU (a copy from pageable memory ran at ~1 GB/s on the H200 host), plain otherwise."""
    cuda = str(device).startswith("cuda") and torch.cuda.is_available()
    key = "pinned" if cuda else "plain"
    buf = _STAGING.get(key)
    if buf is None or buf.numel() < nbytes:
        size = max(nbytes, 1 << 20)
        buf = torch.empty(size, dtype=torch.uint8, pin_memory=cuda)
        _STAGING[key] = buf
    return buf[:nbytes]


def _to_host(flat: torch.Tensor) -> torch.Tensor:
    """`flat`'s bytes on the host (through the staging buffer when it lives on a GPU)."""
    if not flat.numel():
        return torch.empty(0, dtype=torch.uint8)
    raw = flat.view(torch.uint8)
    if raw.device.type == "cpu":
        return raw
    host = _staging(raw.numel(), raw.device)
    host.copy_(raw)
    return host


def _open_regular(path: str, missing: str) -> tuple[int, int]:
    """(fd, size) of a regular file opened without following a link or blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise HandoverError(missing) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise HandoverError(f"{missing} (not a regular file)")
    return fd, st.st_size


def _read_into(path: str, view: memoryview, missing: str) -> None:
    """Fill `view` from a regular file of exactly its size."""
    fd, size = _open_regular(path, missing)
    try:
        if size != len(view):
            raise HandoverError(f"{missing} ({size} bytes, not {len(view)})")
        done = 0
        while done < len(view):
            got = os.readv(fd, [view[done:]])
            if not got:
                raise HandoverError(f"{missing} (shorter than its size)")
            done += got
    finally:
        os.close(fd)


def _read_file(path: str, limit: int, missing: str) -> bytes:
    """A regular file's bytes, at most `limit` of them."""
    fd, size = _open_regular(path, missing)
    os.close(fd)
    if size > limit:
        raise HandoverError(f"{missing} (over {limit} bytes)")
    buf = bytearray(size)
    _read_into(path, memoryview(buf), missing)
    return bytes(buf)
