"""The shared-memory arithmetic of mla_decode's fp8 products loop (mla_decode_heads_fp8.j2),
modelled here byte by byte: the V^T transpose writes every (KV row, dim) byte exactly once to
the slot and row P and the output read it from, and a warp's transpose reads and writes and
P's stores reach shared memory in the fewest wavefronts (the first version's reads were
8-way conflicted: 766 us against 478 after the fix, bench/NOTES.md); the MXFP4 decode's
stores land on the K tile's bytes, conflict-free, and its e4m3 table (mapping/prelude/sm_90a.h)
gives every code the e4m3 bytes of its exact value; the 16-row loop's Q, P and output bytes
each land once, its output stores conflict-free. No GPU needed."""
import itertools
import random

import torch

SLAB, ATOM = 4096, 512                  # a 64-byte column slab of 64 rows; an 8-row atom


def sw64(r: int, b: int, slab: int = SLAB) -> int:
    """Byte b of row r in 64-byte-swizzled atoms (the template's at8)."""
    return (b >> 6) * slab + (r >> 3) * 512 + (r & 7) * 64 + ((((b >> 4) & 3) ^ ((r >> 1) & 3)) << 4) + (b & 15)


def slot_of(k: int) -> int:             # KV row k's slot in P and V^T
    return 16 * ((k % 8) // 2) + 2 * (k // 8) + k % 2


def row_of(n: int) -> int:              # dim n's row in V^T
    return n ^ ((n >> 1) & 1)


def lane_parts(t: int):
    """Transposing thread t (of a warpgroup's 128): its warp, lane, g and c."""
    warp, lane = t >> 5, t & 31
    return warp, lane, lane >> 2, lane & 3


def transpose_read_rows(t: int, u: int, h: int) -> int:
    """The K tile byte address lane t gives to read h of block u (the template's tr_src): row
    lane + 32h, the 16 bytes of dims 16 (4u + warp).."""
    warp, lane, _, _ = lane_parts(t)
    return (lane >> 3) * 512 + (lane & 7) * 64 + ((warp ^ ((lane >> 1) & 3)) << 4) + u * SLAB + h * 2048


def transpose_dst(t: int, e: int) -> int:
    """Thread t's V^T store of dim 2g + e of its block (u = 0; + 4096 u)."""
    warp, _, g, c = lane_parts(t)
    n = (2 * g + e) ^ (g & 1)
    return warp * 1024 + (n >> 3) * 512 + (n & 7) * 64 + ((c ^ ((n >> 1) & 3)) << 4)


def ldmatrix_x4_trans(addrs, mem):
    """ldmatrix.x4.trans on b16: addrs[l] the row lane l gives (row l % 8 of matrix l / 8);
    lane (g, c) gets a register per matrix i: rows 2c (low half) and 2c + 1, column g (2 bytes)."""
    out = []
    for lane in range(32):
        g, c = lane >> 2, lane & 3
        regs = []
        for i in range(4):
            lo, hi = addrs[8 * i + 2 * c] + 2 * g, addrs[8 * i + 2 * c + 1] + 2 * g
            regs.append([mem[lo], mem[lo + 1], mem[hi], mem[hi + 1]])
        out.append(regs)
    return out


def perm(a, b, sel: int):               # prmt on byte lists: output byte i = {b, a}[sel nibble i]
    src = a + b
    return [src[(sel >> 4 * i) & 7] for i in range(4)]


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
    k_tile = {}
    for k in range(64):
        for d in range(576):
            k_tile[sw64(k, d)] = (k, d)                             # where K[k][d] sits
    placed = {}
    for warp in range(4):
        lanes = range(32 * warp, 32 * warp + 32)
        for u in range(8):
            regs = [ldmatrix_x4_trans([transpose_read_rows(t, u, h) for t in lanes], k_tile) for h in range(2)]
            for t in lanes:
                l = t & 31
                r = [regs[h][l][m] for h in range(2) for m in range(4)]
                for e, sel in enumerate((0x6420, 0x7531)):
                    vec = sum((perm(r[2 * q], r[2 * q + 1], sel) for q in range(4)), [])
                    addr = transpose_dst(t, e) + u * 4096
                    for s, (k, d) in enumerate(vec):            # lane c's 16 bytes: slots 16c..
                        assert slot_of(k) == 16 * (l & 3) + s and d == 64 * u + 16 * warp + 2 * (l >> 2) + e
                        want = sw64(row_of(d), slot_of(k))          # V^T[row(d)][slot(k)], 64-byte rows
                        assert addr + s == want, (t, u, e, s)
                        assert want not in placed
                        placed[want] = (k, d)
    assert len(placed) == 64 * 512 and set(placed.values()) == {(k, n) for k in range(64) for n in range(512)}


def test_the_output_undoes_the_dim_permutation():
    # odd lanes c swap their pairs: accumulator column 8j + 2c + i holds dim row_of^-1 of it
    for wg, j, c, i in itertools.product(range(2), range(32), range(4), range(2)):
        col = 256 * wg + 8 * j + 2 * c + i
        dim = 256 * wg + 8 * j + 2 * c + (i ^ (c & 1))
        assert row_of(dim) == col


def test_p_stores_hold_sixteen_consecutive_slots():
    # the scoring lane c's columns 8 j + 2 c + i: slots 16c + 2j + i, one 16-byte store a row
    for c in range(4):
        assert [slot_of(8 * j + 2 * c + i) for j in range(8) for i in range(2)] == list(range(16 * c, 16 * c + 16))


def test_a_warps_transpose_reads_and_stores_and_p_stores_take_the_fewest_wavefronts():
    for warp in range(4):
        lanes = range(32 * warp, 32 * warp + 32)
        for u, h in itertools.product(range(8), range(2)):
            rows = [transpose_read_rows(t, u, h) for t in lanes]
            for i in range(4):               # each matrix: 8 rows x 16 bytes, one wavefront
                assert wavefronts([(a, 16) for a in rows[8 * i: 8 * i + 8]]) == 1
        for e in range(2):                   # 32 lanes x 16 bytes = 4 at best
            assert wavefronts([(transpose_dst(t, e), 16) for t in lanes]) == 4
        for h in range(2):                   # P: row 16 warp + g (+ 8), the 16 bytes of slots 16c..
            assert wavefronts([(sw64(16 * warp + (l >> 2) + 8 * h, 16 * (l & 3)), 16) for l in range(32)]) == 4


def test_the_model_sees_a_conflict():
    # dims in V^T rows as they are (no pair swap): a quarter warp's two rows share a bank half
    def plain(t):
        warp, _, g, c = lane_parts(t)
        n = 2 * g
        return warp * 1024 + (n >> 3) * 512 + (n & 7) * 64 + ((c ^ ((n >> 1) & 3)) << 4)
    assert wavefronts([(plain(t), 16) for t in range(32)]) == 8


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


# --- the 16-row loop (scores="swap": mla_decode_scores_swap.j2, mla_decode_store_swap.j2)

def swap_layout(mma: str) -> dict:
    from portable.kernels.mla_decode import MLADecode
    return MLADecode(kv_format="fp8", mma=mma).for_heads(16, "sm_90a", 1, 8192).layout("sm_90a")


def test_swap_q_fills_its_b_slabs_once():
    # Q's 16 rows of each part as B rows 16 part + r, 64-byte column slabs 16 QP x 64 bytes apart
    # (L.q_slab): every byte of the 9 slabs once, so the matrix unit's k-step kk reads rows
    # 0..16 QP - 1 at (kk / 2) slab + (kk % 2) 32 in the canonical atoms
    for parts, mma in ((1, "fp8"), (2, "fp8x2")):
        slab = swap_layout(mma)["q_slab"]
        assert slab == 16 * parts * 64
        at = [sw64(16 * part + r, b, slab) for part in range(parts) for r in range(16) for b in range(576)]
        assert sorted(at) == list(range(9 * slab))


def test_swap_p_stores_write_sixteen_rows_once():
    # scorer thread (warp, g, c): KV rows 16 warp + g (+8) x query rows 2c, 2c + 1, 2c + 8, 2c + 9,
    # a byte each at P's row q, the KV row's slot: P's rows 0..15, every byte once
    at = [sw64(8 * (x >> 1) + 2 * c + (x & 1), slot_of(16 * warp + g + 8 * h))
          for warp in range(4) for g in range(8) for c in range(4) for h in range(2) for x in range(4)]
    assert sorted(at) == list(range(16 * 64))


def test_swap_o_goes_out_once_a_dim_and_in_one_wavefront():
    # O^T fragment i of O thread (half, warp, g, c): V^T row r = 256 half + 64 (i / 8) + 16 warp
    # + g + 8 ((i / 2) % 2), query row 8 ((i / 4) % 2) + 2c + i % 2; stored as [q][dim] with rows
    # 516 floats apart (L.so_ld): each (q, dim) once, and a warp's store one wavefront
    so_ld = swap_layout("fp8x2")["so_ld"]
    seen = []
    for half, warp in itertools.product(range(2), range(4)):
        for i in range(32):
            accesses = []
            for g, c in itertools.product(range(8), range(4)):
                r = 256 * half + 64 * (i >> 3) + 16 * warp + g + 8 * ((i >> 1) & 1)
                q = 8 * ((i >> 2) & 1) + 2 * c + (i & 1)
                seen.append((q, row_of(r)))
                accesses.append((4 * (q * so_ld + row_of(r)), 4))
            assert wavefronts(accesses) == 1, (half, warp, i)
    assert sorted(seen) == [(q, d) for q in range(16) for d in range(512)]
