/*
 * mem.c — the memory utility functions (mem_set, mem_copy, bitmap find,
 * search) and the DRAM accessors, on the emulated DRAM and SRAM.
 *
 * Each DRAM sector carries a tag (layer.h): TAG_HOST when it holds a host
 * sector, whose identity is the same sector of the shadow buffer in
 * nandlab's device DRAM; TAG_ERASED or TAG_ZERO when the layer knows its
 * bytes are all 0xFF or all 0x00 (it filled them, or read them once and
 * saw no store since); else TAG_BYTES. mem_copy moves identities and tags
 * with the bytes when it copies whole, aligned sectors within DRAM;
 * mem_set_dram of whole sectors to 0xFF or 0x00 makes them TAG_ERASED or
 * TAG_ZERO; every other write through these functions makes the sectors it
 * touches TAG_BYTES. A firmware that writes DRAM through a raw pointer
 * changes bytes without the layer knowing: the tag of such a sector stays
 * what it was (docs/jasmine.md, "What the layer cannot see").
 */
#include <string.h>

#include "layer.h"

int jasmine_in_dram(unsigned long addr, unsigned long bytes) {
    return addr >= DRAM_BASE && addr + bytes <= (unsigned long)DRAM_BASE + DRAM_SIZE && addr + bytes >= addr;
}

int jasmine_in_sram(unsigned long addr, unsigned long bytes) {
    return addr >= SRAM_BASE && addr + bytes <= (unsigned long)SRAM_BASE + SRAM_SIZE && addr + bytes >= addr;
}

uint32_t jasmine_dram_sector(unsigned long addr) { return (uint32_t)((addr - DRAM_BASE) / BYTES_PER_SECTOR); }

void jasmine_shadow_check(uint32_t sector, uint32_t count, const char *what) {
    if ((uint64_t)sector + count > L->shadow_sectors)
        jasmine_fatal(NANDLAB_E_DRAM,
                      "%s at DRAM 0x%08lx holds host data beyond the first %u DRAM sectors, which is all of the "
                      "board's DRAM that fits nandlab's DRAM budget (raise dram_bytes)",
                      what, DRAM_BASE + (unsigned long)sector * BYTES_PER_SECTOR, L->shadow_sectors);
}

/* The DRAM sectors overlapping addr .. addr+bytes now hold firmware bytes. */
void jasmine_shadow_in(uint32_t sector, uint64_t src, uint32_t src_at, uint32_t n, const char *what) {
    const nandlab_flash *f = L->flash;
    while (n > 0) {
        uint32_t in_chunk = sector % SHADOW_CHUNK, count = MIN(n, SHADOW_CHUNK - in_chunk);
        jasmine_check_flash(f->buf_copy(f->ctx, L->shadow[sector / SHADOW_CHUNK], in_chunk, src, src_at, count), what);
        sector += count, src_at += count, n -= count;
    }
}

void jasmine_shadow_out(uint64_t dst, uint32_t dst_at, uint32_t sector, uint32_t n, const char *what) {
    const nandlab_flash *f = L->flash;
    while (n > 0) {
        uint32_t in_chunk = sector % SHADOW_CHUNK, count = MIN(n, SHADOW_CHUNK - in_chunk);
        jasmine_check_flash(f->buf_copy(f->ctx, dst, dst_at, L->shadow[sector / SHADOW_CHUNK], in_chunk, count), what);
        sector += count, dst_at += count, n -= count;
    }
}

/* Pieces that lie within one chunk on both sides; copied front to back
 * when the destination is below the source, else back to front, so an
 * overlap moves as memmove does (within one piece buf_copy does). */
void jasmine_shadow_move(uint32_t ds, uint32_t ss, uint32_t n, const char *what) {
    const nandlab_flash *f = L->flash;
    int forward = ds <= ss;
    uint32_t done = 0;
    while (done < n) {
        uint32_t left = n - done, d, s, count;
        if (forward) {
            d = ds + done, s = ss + done;
            count = MIN(left, MIN(SHADOW_CHUNK - d % SHADOW_CHUNK, SHADOW_CHUNK - s % SHADOW_CHUNK));
        } else {
            uint32_t d_end = ds + left, s_end = ss + left; /* exclusive ends of what is left */
            uint32_t d_room = (d_end - 1) % SHADOW_CHUNK + 1, s_room = (s_end - 1) % SHADOW_CHUNK + 1;
            count = MIN(left, MIN(d_room, s_room));
            d = d_end - count, s = s_end - count;
        }
        jasmine_check_flash(f->buf_copy(f->ctx, L->shadow[d / SHADOW_CHUNK], d % SHADOW_CHUNK,
                                        L->shadow[s / SHADOW_CHUNK], s % SHADOW_CHUNK, count),
                            what);
        done += count;
    }
}

/* Tag of the DRAM sectors overlapping addr .. addr+bytes, which the
 * caller has just filled with `byte`: whole sectors become TAG_ERASED or
 * TAG_ZERO (TAG_BYTES for any other byte); a sector filled only in part
 * keeps TAG_ERASED or TAG_ZERO when it already had that tag and the fill
 * is the same byte, else becomes TAG_BYTES. */
void jasmine_tag_fill(unsigned long addr, unsigned long bytes, unsigned char byte) {
    uint8_t tag = byte == 0xFF ? TAG_ERASED : byte == 0x00 ? TAG_ZERO : TAG_BYTES;
    unsigned long lo = addr < DRAM_BASE ? DRAM_BASE : addr;
    unsigned long hi = addr + bytes;
    if (hi > (unsigned long)DRAM_BASE + DRAM_SIZE) hi = (unsigned long)DRAM_BASE + DRAM_SIZE;
    if (bytes == 0 || lo >= hi) return;
    uint32_t first = jasmine_dram_sector(lo), last = jasmine_dram_sector(hi - 1);
    uint8_t first_was = L->tags[first], last_was = L->tags[last];
    memset(&L->tags[first], tag, last - first + 1);
    if (lo % BYTES_PER_SECTOR && first_was != tag) L->tags[first] = TAG_BYTES;
    if (hi % BYTES_PER_SECTOR && last_was != tag) L->tags[last] = TAG_BYTES;
}

/* Eight bytes at a time: a sector of firmware bytes that is all `v`. */
static int all_bytes(const unsigned char *p, unsigned char v) {
    uint64_t word = 0x0101010101010101ull * v, w;
    for (int i = 0; i < BYTES_PER_SECTOR; i += 8) { /* BYTES_PER_SECTOR is 512 */
        memcpy(&w, p + i, 8);
        if (w != word) return 0;
    }
    return 1;
}

/* Look once; the answer holds until the next store the layer sees. */
uint8_t jasmine_sector_kind_of_bytes(uint32_t sector) {
    const unsigned char *p = (const unsigned char *)(DRAM_BASE + (unsigned long)sector * BYTES_PER_SECTOR);
    uint8_t tag = TAG_BYTES;
    if (p[0] == 0xFF && all_bytes(p, 0xFF)) tag = TAG_ERASED;
    else if (p[0] == 0x00 && all_bytes(p, 0x00)) tag = TAG_ZERO;
    return L->tags[sector] = tag;
}

void jasmine_tag_bytes(unsigned long addr, unsigned long bytes) {
    if (bytes == 0) return;
    unsigned long lo = addr < DRAM_BASE ? DRAM_BASE : addr;
    unsigned long hi = addr + bytes;
    if (hi > (unsigned long)DRAM_BASE + DRAM_SIZE) hi = (unsigned long)DRAM_BASE + DRAM_SIZE;
    if (lo >= hi) return;
    uint32_t first = jasmine_dram_sector(lo), last = jasmine_dram_sector(hi - 1);
    memset(&L->tags[first], TAG_BYTES, last - first + 1);
}

static void check_range(unsigned long addr, unsigned long bytes, const char *what) {
    if (!jasmine_in_dram(addr, bytes) && !jasmine_in_sram(addr, bytes)) {
        /* Firmware globals (the board's SRAM variables) live in the
         * library here; those are fine too. Anything else is a bug. */
        if (addr < (1UL << 32))
            jasmine_fatal(JASMINE_E_LAYER,
                          "%s of %lu bytes at 0x%08lx: outside the board's DRAM and SRAM", what, bytes, addr);
    }
}

static void fill32(unsigned long addr, UINT32 val, UINT32 bytes) {
    unsigned char *p = (unsigned char *)addr;
    if (val == 0 || val == 0xFFFFFFFF) {
        memset(p, (int)(val & 0xFF), bytes);
        return;
    }
    UINT32 i = 0;
    for (; i + 4 <= bytes; i += 4) memcpy(p + i, &val, 4);
    for (UINT32 k = 0; i < bytes; i++, k++) p[i] = ((const unsigned char *)&val)[k];
}

void _mem_set_sram(unsigned long addr, UINT32 const val, UINT32 bytes) {
    jasmine_progress();
    check_range(addr, bytes, "mem_set_sram");
    fill32(addr, val, bytes);
    jasmine_tag_bytes(addr, bytes);
}

/* Fill the SATA read buffers' whole sectors addr .. addr+bytes with `byte`
 * (0xFF or 0x00), storing only into sectors whose tag does not already
 * say they hold it: a read of never-written sectors fills a read buffer
 * with 0xFF, and most read buffers held 0xFF the last time too. Only the
 * read buffers: their bytes go to the host through the tags anyway, and
 * no firmware keeps its own data there. */
static int fill_read_buffer(unsigned long addr, unsigned long bytes, unsigned char byte) {
    unsigned long lo = RD_BUF_ADDR, hi = RD_BUF_ADDR + (unsigned long)NUM_RD_BUFFERS * BYTES_PER_PAGE;
    if (addr < lo || addr + bytes > hi || addr % BYTES_PER_SECTOR || bytes % BYTES_PER_SECTOR) return 0;
    uint8_t *tags = L->tags, tag = byte == 0xFF ? TAG_ERASED : TAG_ZERO;
    uint32_t first = jasmine_dram_sector(addr), end = first + (uint32_t)(bytes / BYTES_PER_SECTOR);
    for (uint32_t s = first; s < end;) {
        if (tags[s] == tag) {
            s++;
            continue;
        }
        uint32_t run = 1;
        while (s + run < end && tags[s + run] != tag) run++;
        memset((void *)(DRAM_BASE + (unsigned long)s * BYTES_PER_SECTOR), byte, (size_t)run * BYTES_PER_SECTOR);
        memset(&tags[s], tag, run);
        s += run;
    }
    return 1;
}

void _mem_set_dram(unsigned long addr, UINT32 const val, UINT32 bytes) {
    jasmine_progress();
    check_range(addr, bytes, "mem_set_dram");
    if (val == 0 || val == 0xFFFFFFFF) {
        if (fill_read_buffer(addr, bytes, (unsigned char)val)) return;
        fill32(addr, val, bytes);
        jasmine_tag_fill(addr, bytes, (unsigned char)val);
    } else {
        fill32(addr, val, bytes);
        jasmine_tag_bytes(addr, bytes);
    }
}

void _mem_copy(void *const dst, const void *const src, UINT32 const bytes) {
    jasmine_progress();
    unsigned long d = (unsigned long)dst, s = (unsigned long)src;
    check_range(d, bytes, "mem_copy destination");
    check_range(s, bytes, "mem_copy source");
    memmove(dst, src, bytes);
    if (!jasmine_in_dram(d, bytes) || bytes == 0) return;
    int aligned = jasmine_in_dram(s, bytes) && d % BYTES_PER_SECTOR == 0 && s % BYTES_PER_SECTOR == 0;
    if (!aligned) {
        jasmine_tag_bytes(d, bytes);
        return;
    }
    uint32_t ds = jasmine_dram_sector(d), ss = jasmine_dram_sector(s);
    uint32_t whole = bytes / BYTES_PER_SECTOR;
    /* Identities move with the bytes: the span from the first to the last
     * host sector in one shadow move (memmove semantics, so an
     * overlapping copy is right; the shadow of the other sectors in the
     * span is never looked at). The tags then move as the bytes did. */
    const uint8_t *host = whole ? memchr(&L->tags[ss], TAG_HOST, whole) : NULL;
    if (host) {
        uint32_t a = (uint32_t)(host - &L->tags[ss]), b = whole;
        while (L->tags[ss + b - 1] != TAG_HOST) b--;
        jasmine_shadow_check(ds + a, b - a, "mem_copy of host sectors");
        jasmine_shadow_move(ds + a, ss + a, b - a, "mem_copy of host sectors");
    }
    memmove(&L->tags[ds], &L->tags[ss], whole);
    if (bytes % BYTES_PER_SECTOR) jasmine_tag_bytes(d + (unsigned long)whole * BYTES_PER_SECTOR, bytes % BYTES_PER_SECTOR);
}

static UINT32 bmp_find(const void *bitmap, UINT32 bytes, UINT32 val, const char *what) {
    jasmine_progress();
    check_range((unsigned long)bitmap, bytes, what);
    const unsigned char *p = bitmap;
    for (UINT32 i = 0; i < bytes; i++) {
        unsigned char b = val ? p[i] : (unsigned char)~p[i];
        if (b)
            for (int bit = 0; bit < 8; bit++)
                if (b & (1u << bit)) return i * 8 + (UINT32)bit;
    }
    return bytes * 8;
}

UINT32 _mem_bmp_find_sram(const void *const bitmap, UINT32 const bytes, UINT32 const val) {
    return bmp_find(bitmap, bytes, val, "mem_bmp_find_sram");
}

UINT32 _mem_bmp_find_dram(const void *const bitmap, UINT32 const bytes, UINT32 const val) {
    return bmp_find(bitmap, bytes, val, "mem_bmp_find_dram");
}

static UINT32 item(const unsigned char *p, UINT32 unit, UINT32 i) {
    if (unit == 1) return p[i];
    if (unit == 2) {
        UINT16 v;
        memcpy(&v, p + 2 * i, 2);
        return v;
    }
    UINT32 v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}

static void check_unit(UINT32 unit, const char *what) {
    if (unit != 1 && unit != 2 && unit != 4)
        jasmine_fatal(JASMINE_E_LAYER, "%s with items of %u bytes (the engine takes 1, 2 or 4)", what, unit);
}

/* Index of the smallest (MU_CMD_SEARCH_MIN_*) or largest item, the first
 * one on a tie. Greedy GC calls it for its victim on every collection,
 * over a bank's whole valid-count table (UINT16 items), so it is a hot
 * path: two passes, the extreme's value, then its first index, each over
 * typed items; for UINT16 with SSE2 eight items at a time (SSE2 has only a
 * signed 16-bit min/max, so the items are biased by 0x8000, which turns
 * unsigned order into signed order). */
#define LESS(a, b) ((a) < (b))
#define GREATER(a, b) ((a) > (b))
#define DEFINE_SEARCH(name, T, better)                                                                \
    static UINT32 name(const unsigned char *p, UINT32 size) {                                          \
        T best, v;                                                                                     \
        memcpy(&best, p, sizeof(T));                                                                   \
        for (UINT32 i = 1; i < size; i++) {                                                            \
            memcpy(&v, p + i * sizeof(T), sizeof(T));                                                  \
            best = better(v, best) ? v : best;                                                         \
        }                                                                                              \
        for (UINT32 i = 0;; i++) {                                                                     \
            memcpy(&v, p + i * sizeof(T), sizeof(T));                                                  \
            if (v == best) return i;                                                                   \
        }                                                                                              \
    }
DEFINE_SEARCH(search_min_8, UINT8, LESS)
DEFINE_SEARCH(search_max_8, UINT8, GREATER)
DEFINE_SEARCH(search_min_32, UINT32, LESS)
DEFINE_SEARCH(search_max_32, UINT32, GREATER)
#if defined(__SSE2__)
#include <emmintrin.h>
static inline __m128i extreme_16(__m128i a, __m128i b, int max) {
    return max ? _mm_max_epi16(a, b) : _mm_min_epi16(a, b);
}
static UINT32 search_16(const unsigned char *p, UINT32 size, int max) {
    const __m128i bias = _mm_set1_epi16((short)0x8000);
    UINT16 first, v;
    memcpy(&first, p, 2);
    __m128i m = _mm_set1_epi16((short)(first ^ 0x8000));
    UINT32 i = 0;
    for (; size - i >= 8; i += 8)
        m = extreme_16(m, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + 2 * i)), bias), max);
    m = extreme_16(m, _mm_srli_si128(m, 8), max);
    m = extreme_16(m, _mm_srli_si128(m, 4), max);
    m = extreme_16(m, _mm_srli_si128(m, 2), max);
    UINT16 best = (UINT16)(_mm_cvtsi128_si32(m) ^ 0x8000);
    for (; i < size; i++) {
        memcpy(&v, p + 2 * i, 2);
        best = (max ? v > best : v < best) ? v : best;
    }
    const __m128i want = _mm_set1_epi16((short)best);
    for (i = 0; size - i >= 8; i += 8) {
        int hits = _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(p + 2 * i)), want));
        if (hits) return i + (UINT32)__builtin_ctz((unsigned)hits) / 2;
    }
    for (;; i++) {
        memcpy(&v, p + 2 * i, 2);
        if (v == best) return i;
    }
}
#else
DEFINE_SEARCH(search_min_16, UINT16, LESS)
DEFINE_SEARCH(search_max_16, UINT16, GREATER)
static UINT32 search_16(const unsigned char *p, UINT32 size, int max) {
    return max ? search_max_16(p, size) : search_min_16(p, size);
}
#endif

UINT32 _mem_search_min_max(const void *const addr, UINT32 const unit, UINT32 const size, UINT32 const cmd) {
    jasmine_progress();
    check_unit(unit, "mem_search_min_max");
    check_range((unsigned long)addr, (unsigned long)unit * size, "mem_search_min_max");
    if (size == 0) return 0;
    int max = cmd == MU_CMD_SEARCH_MAX_DRAM || cmd == MU_CMD_SEARCH_MAX_SRAM;
    const unsigned char *p = addr;
    if (unit == 1) return max ? search_max_8(p, size) : search_min_8(p, size);
    if (unit == 2) return search_16(p, size, max);
    return max ? search_max_32(p, size) : search_min_32(p, size);
}

/* Index of the first item equal to val, or `size` if there is none. */
UINT32 _mem_search_equ(const void *const addr, UINT32 const unit, UINT32 const size, UINT32 const cmd,
                       UINT32 const val) {
    (void)cmd;
    jasmine_progress();
    check_unit(unit, "mem_search_equ");
    check_range((unsigned long)addr, (unsigned long)unit * size, "mem_search_equ");
    UINT32 want = unit == 4 ? val : val & ((1u << (8 * unit)) - 1);
    for (UINT32 i = 0; i < size; i++)
        if (item(addr, unit, i) == want) return i;
    return size;
}

UINT32 _mem_cmp_sram(const void *const addr1, const void *const addr2, const UINT32 bytes) {
    return (UINT32)memcmp(addr1, addr2, bytes);
}

UINT32 _mem_cmp_dram(const void *const addr1, const void *const addr2, const UINT32 bytes) {
    return (UINT32)memcmp(addr1, addr2, bytes);
}

/* The DRAM accessors: plain loads and stores (a fault outside the mapped
 * DRAM is reported by board.c); a store makes its sector firmware bytes. */
UINT8 _read_dram_8(unsigned long const addr) { return *(volatile UINT8 *)addr; }
UINT16 _read_dram_16(unsigned long const addr) { return *(volatile UINT16 *)addr; }
UINT32 _read_dram_32(unsigned long const addr) { return *(volatile UINT32 *)addr; }

static inline void tag_one(unsigned long addr) {
    if (addr >= DRAM_BASE && addr < (unsigned long)DRAM_BASE + DRAM_SIZE) L->tags[jasmine_dram_sector(addr)] = TAG_BYTES;
}

void _write_dram_8(unsigned long const addr, UINT8 const val) {
    *(volatile UINT8 *)addr = val;
    tag_one(addr);
}
void _write_dram_16(unsigned long const addr, UINT16 const val) {
    *(volatile UINT16 *)addr = val;
    tag_one(addr);
}
void _write_dram_32(unsigned long const addr, UINT32 const val) {
    *(volatile UINT32 *)addr = val;
    tag_one(addr);
}
void _set_bit_dram(unsigned long const base_addr, UINT32 const bit_offset) {
    unsigned long a = base_addr + bit_offset / 8;
    *(volatile UINT8 *)a |= (UINT8)(1u << (bit_offset % 8));
    tag_one(a);
}
void _clr_bit_dram(unsigned long const base_addr, UINT32 const bit_offset) {
    unsigned long a = base_addr + bit_offset / 8;
    *(volatile UINT8 *)a &= (UINT8) ~(1u << (bit_offset % 8));
    tag_one(a);
}
BOOL32 _tst_bit_dram(unsigned long const base_addr, UINT32 const bit_offset) {
    return (*(volatile UINT8 *)(base_addr + bit_offset / 8) >> (bit_offset % 8)) & 1;
}
