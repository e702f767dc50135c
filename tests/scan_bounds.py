"""Run by tests/test_event_scan.py in a process of its own, with NUMBA_BOUNDSCHECK=1: the scanner's source
compiled with bounds checks, over SYNTHETIC mutations of real pieces (flipped bytes, cuts, invalid UTF-8, deep
nesting), each piece handed over as an array that ends exactly where the piece does. The machine code a read loads
runs without them, so any index out of its arrays (a read past the piece's end included) must show here as an
IndexError. Prints how many pieces it ran and how many the scanner read."""

from __future__ import annotations

import gzip
import random
import sys

import numpy as np

from parsers.kineto import pieces as split_decode
from parsers.kineto import scan as event_scan
from parsers.kineto import scanned as scanned_piece
from tests.conftest import REAL_TRACES

scan = event_scan

_SEEDS = [
    "hta_training_cudagraph_a100.json.gz",
    "kineto_resnet50_v100_legacy_categories.json.gz",
    "tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz",
    "tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz",
]
_INSERTS = [
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b'"',
    b"\\",
    b"\\u",
    b"\\ud800",
    b"{",
    b"[" * 70,
    b",",
    b"}",
    b"-",
    b"1e",
]


def _scan(data: bytes) -> int:
    array = np.frombuffer(data, dtype=np.uint8)
    found = scanned_piece._Buffers(len(data))
    found.state[scan.POSITION] = 0
    while True:
        status = event_scan.scan_into(
            array,
            len(data),
            found.state,
            found.ints,
            found.floats,
            found.name_slots,
            found.names,
            found.cat_slots,
            found.cats,
            found.others,
            found.inexact,
            found.counted,
        )
        if status < scan.ROOM_ROWS:
            return status
        found.grow(status)
        if status == scan.ROOM_NAMES:
            event_scan.rehash(array, found.names, found.state[scan.NAMES], found.name_slots)
        elif status == scan.ROOM_CATS:
            event_scan.rehash(array, found.cats, found.state[scan.CATS], found.cat_slots)


def _mutations(piece: bytes, rng: random.Random, count: int):
    for _ in range(count):
        buf = bytearray(piece)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(buf))
            op = rng.randrange(3)
            if op == 0:
                buf[at] = rng.randrange(256)
            elif op == 1:
                buf[at:at] = rng.choice(_INSERTS)
            else:
                del buf[at:]
                if not buf:
                    buf = bytearray(b"{")
        yield bytes(buf)


def main() -> None:
    rng = random.Random(27)
    ran = read = 0
    for name in _SEEDS:
        data = gzip.decompress((REAL_TRACES / name).read_bytes())
        first, _ = split_decode.array_start(data[: split_decode.HEAD_BYTES])
        split_decode.PIECE_BYTES = 20_000
        pieces = [p for p in split_decode.plan(data, first) if p[1] is not None]
        for start, stop in rng.sample(pieces, min(12, len(pieces))):
            piece = data[start:stop]
            cut = split_decode.next_cut(piece, 5000)  # a few dozen whole events: many mutations in the time
            piece = piece[:cut] if cut is not None else piece
            for candidate in [piece, *_mutations(piece, rng, 150)]:
                status = _scan(candidate)
                ran += 1
                read += status == scan.OK
    print(f"ran {ran} read {read}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
