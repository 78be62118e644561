"""The shared-memory arithmetic of mla_decode's fp8 products loop (mla_decode_heads_fp8.j2),
modelled here byte by byte: the V^T transpose writes every (KV row, dim) byte exactly once to
the slot and row P and the output read it from, and a warp's transpose reads and writes and
P's stores reach shared memory in the fewest wavefronts (the first version's reads were
8-way conflicted: 766 us against 478 after the fix, bench/NOTES.md); the MXFP4 decode's
stores land on the K tile's bytes, conflict-free, and its e4m3 table (mapping/prelude/sm_90a.h)
gives every code the e4m3 bytes of its exact value. No GPU needed."""
import itertools
import random

import torch

SLAB, ATOM = 4096, 512                  # a 64-byte column slab of 64 rows; an 8-row atom


def sw64(r: int, b: int, slab: int = SLAB) -> int:
    """Byte b of row r in 64-byte-swizzled atoms (the template's at8)."""
    return (b >> 6) * slab + (r >> 3) * 512 + (r & 7) * 64 + ((((b >> 4) & 3) ^ ((r >> 1) & 3)) << 4) + (b & 15)


def slot_of(k: int) -> int:             # KV row k's slot in P and V^T
    return 8 * (k % 8) + k // 8


def row_of(n: int) -> int:              # dim n's row in V^T
    return n ^ ((n >> 4) & 1)


def transpose_reads(t: int):
    """Transposing lane t's eight 16-byte reads of the K tile: (byte address, KV row, first
    dim). The copying warpgroup's thread t % 128 is lane t in its pass t // 128 (dims 256 further)."""
    kg, dc = t & 7, t >> 3
    base = (dc >> 2) * SLAB + kg * 64 + (((dc & 3) ^ (kg >> 1)) << 4)
    return [(base + m * ATOM, kg + 8 * m, 16 * dc) for m in range(8)]


def transpose_writes(t: int):
    """Thread t's sixteen 8-byte writes of V^T: (byte address, dim, first slot)."""
    kg, dc = t & 7, t >> 3
    at, odd = dc * 1024 + (kg & 1) * 8, (dc & 1) * 64
    dst = (at + odd, at - odd)
    wr = [((kg >> 1) ^ x) << 4 for x in range(4)]
    return [(dst[n & 1] + (n >> 3) * 512 + (n & 7) * 64 + wr[(n >> 1) & 3], 16 * dc + n, 8 * kg) for n in range(16)]


def wavefronts(accesses) -> int:
    """Shared-memory wavefronts for one warp instruction: (address, bytes) a lane; 32 banks of
    4 bytes, a wavefront serves at most one distinct 4-byte word per bank."""
    words = {}
    for addr, size in accesses:
        for w in range(addr // 4, (addr + size + 3) // 4):
            words.setdefault(w % 32, set()).add(w)
    return max(len(v) for v in words.values())


def test_the_swizzle_is_the_canonical_64_byte_one():
    # 16-byte chunk c of row r at c ^ ((r % 8) / 2): within an atom a bijection, rows 64 bytes apart
    for r in range(8):
        assert sorted(sw64(r, 16 * c) - r * 64 for c in range(4)) == [0, 16, 32, 48]
    assert sw64(8, 0) == 512 and sw64(0, 64) == SLAB


def test_transpose_moves_every_byte_once_to_its_permuted_place():
    k_tile = {sw64(k, d): (k, d) for k in range(64) for d in range(512)}     # where K[k][d] sits
    placed = {}
    for t in range(256):
        rows = {m: k_tile_row for m, (_, k_tile_row, _) in enumerate(transpose_reads(t))}
        for addr, k, d0 in transpose_reads(t):
            assert k_tile[addr] == (k, d0)                          # the read finds K[k][d0..d0+15]
        for addr, n, s0 in transpose_writes(t):
            for m in range(8):                                      # byte m of the write: read m's row
                k = rows[m]
                assert slot_of(k) == s0 + m
                want = sw64(row_of(n), slot_of(k))                  # V^T[row(n)][slot(k)], 64-byte rows
                assert addr + m == want, (t, n, m)
                assert want not in placed
                placed[want] = (k, n)
    assert len(placed) == 64 * 512 and set(placed.values()) == {(k, n) for k in range(64) for n in range(512)}


def test_the_output_undoes_the_dim_permutation():
    # the epilogue's pair swap where (j / 2) % 2: accumulator column 8j + 2c + i holds dim row_of^-1
    for wg, j, c, i in itertools.product(range(2), range(32), range(4), range(2)):
        col = 256 * wg + 8 * j + 2 * c + i
        dim = 256 * wg + 8 * j + 2 * c + (i ^ ((j >> 1) & 1))
        assert row_of(dim) == col


def test_p_stores_hold_eight_consecutive_slots():
    # the scoring lane c's columns 8 j + 2 c + i: slots 8 (2c + i) + j, j = 0..7 one 8-byte store
    for c, i in itertools.product(range(4), range(2)):
        slots = [slot_of(8 * j + 2 * c + i) for j in range(8)]
        assert slots == list(range(slots[0], slots[0] + 8)) and slots[0] == 8 * (2 * c + i)


def test_a_warps_transpose_reads_and_writes_take_the_fewest_wavefronts():
    for warp in range(8):
        lanes = range(32 * warp, 32 * warp + 32)
        for m in range(8):                   # 32 lanes x 16 bytes = 4 wavefronts at best
            assert wavefronts([(transpose_reads(t)[m][0], 16) for t in lanes]) == 4
        for n in range(16):                  # 32 lanes x 8 bytes = 2 at best
            assert wavefronts([(transpose_writes(t)[n][0], 8) for t in lanes]) == 2


def test_the_model_sees_the_first_versions_conflict():
    # v1 read KV rows 8 kg .. 8 kg + 7 of one atom: a quarter warp's eight lanes in one bank group
    def v1(t, rr):
        kg, dc = t & 7, t >> 3
        return (dc >> 2) * SLAB + kg * ATOM + rr * 64 + (((dc & 3) ^ (rr >> 1)) << 4)
    assert max(wavefronts([(v1(t, rr), 16) for t in range(32)]) for rr in range(8)) == 8


# ---- MXFP4 decoded to e4m3 (the template's decode() and the prelude's e4m3_tables_store and e4m3_table_for)
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def decode_stores(t: int):
    """Decoding lane t's two 16-byte stores of block j = t % 4 + 4i into the K tile: (address,
    KV row, first dim); lanes t % 4 >= 2 store the block's second half first. The copying
    warpgroup's thread t % 128 is lane t in its row half t // 128 (rows 32 further)."""
    r, k = t >> 2, t & 3
    swap = k >> 1
    out = []
    for i in range(5):
        if k + 4 * i >= 18:
            break
        for e in range(2):
            addr = (k >> 1) * SLAB + i * 8192 + (r >> 3) * 512 + (r & 7) * 64 + (((2 * (k & 1) + (e ^ swap)) ^ ((r >> 1) & 3)) << 4)
            out.append((addr, r, 32 * (k + 4 * i) + 16 * (e ^ swap)))
    return out


def test_the_mxfp4_decode_writes_every_k_byte_once_where_the_k_tile_has_it():
    placed = set()
    for t in range(256):
        for addr, r, d0 in decode_stores(t):
            assert addr == sw64(r, d0)
            placed |= {addr + m for m in range(16)}
    assert placed == {sw64(r, d) for r in range(64) for d in range(576)}


def test_a_warps_mxfp4_decode_stores_take_the_fewest_wavefronts():
    for warp in range(8):
        lanes = [t for t in range(32 * warp, 32 * warp + 32)]
        for n in range(8):                   # store n of the lanes that have it: 16 bytes each
            acc = [(decode_stores(t)[n][0], 16) for t in lanes if n < len(decode_stores(t))]
            assert wavefronts(acc) == (len(acc) * 16 + 127) // 128


def prmt(a: int, b: int, c: int) -> int:
    """PTX prmt.b32 (default mode): output byte i is byte c[4i+2:4i] of {b, a}, or that byte's
    sign replicated where c[4i+3] is set."""
    src = [(a >> 8 * i) & 0xFF for i in range(4)] + [(b >> 8 * i) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        nib = (c >> 4 * i) & 0xF
        byte = src[nib & 7]
        if nib & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << 8 * i
    return out


def e4m3_bytes(values) -> list:
    return torch.tensor(values, dtype=torch.float32).to(torch.float8_e4m3fn).view(torch.uint8).tolist()


def e2m1_e4m3_tables() -> list:
    """The prelude's e4m3_tables_store: shifts -14..6 through the converter (torch's e4m3,
    round to nearest even), then NaN bytes."""
    tables = []
    for thread in range(21):
        b = e4m3_bytes([v * 2.0 ** (thread - 14) for v in E2M1])
        tables.append((sum(v << 8 * i for i, v in enumerate(b[:4])), sum(v << 8 * i for i, v in enumerate(b[4:]))))
    return tables + [(0x7F7F7F7F, 0x7F7F7F7F)]


def e2m1_e4m3_table(code: int, emax: int, tables=e2m1_e4m3_tables()):
    """The prelude's e4m3_table_for: the lookup, shifts clamped to -14..6."""
    return tables[21 if code == 255 else min(max(code - emax + 6, -14), 6) + 14]


def e2m1x8_e4m3(w: int, lo: int, hi: int):
    sel, w4 = w & 0x77777777, (w << 4) & 0xFFFFFFFF
    neg0, neg1 = prmt(w4, w, 0xD9C8), prmt(w4, w, 0xFBEA)
    return prmt(lo, hi, sel & 0xFFFF) | (neg0 & 0x80808080), prmt(lo, hi, sel >> 16) | (neg1 & 0x80808080)


def test_the_e4m3_table_gives_each_code_its_exact_value():
    rng = random.Random(7)
    for emax in (127, 130, 200):
        for code in range(max(0, emax - 24), emax + 1):     # shifts -18..6
            shift = code - emax + 6
            lo, hi = e2m1_e4m3_table(code, emax)
            for _ in range(16):
                w = rng.getrandbits(32)
                o0, o1 = e2m1x8_e4m3(w, lo, hi)
                got = [((o0 | o1 << 32) >> 8 * n) & 0xFF for n in range(8)]
                nib = [(w >> 4 * n) & 0xF for n in range(8)]
                exact = [(-1.0 if v & 8 else 1.0) * E2M1[v & 7] * 2.0 ** shift for v in nib]
                want = e4m3_bytes(exact)        # round to nearest even; equal to `exact` from shift -8
                # (+-0 both read as 0: the code's sign stays on a zero)
                assert [g & 0x7F for g in got] == [v & 0x7F for v in want], (emax, code, hex(w))
                assert all((g ^ ((v & 8) << 4)) & 0x80 == 0 for g, v in zip(got, nib))
                if shift >= -8:
                    back = torch.tensor(got, dtype=torch.uint8).view(torch.float8_e4m3fn).float().tolist()
                    assert back == exact
    lo, hi = e2m1_e4m3_table(255, 127)
    assert e2m1x8_e4m3(0x12345678, lo, hi)[0] & 0x7F7F7F7F == 0x7F7F7F7F   # NaN bytes
