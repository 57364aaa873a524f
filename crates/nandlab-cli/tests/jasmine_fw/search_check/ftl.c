/* Test firmware: ftl_minimal whose ftl_open first checks the layer's
 * mem_search_min_max against a plain item-by-item search written here, on
 * pseudo-random tables of 1-, 2- and 4-byte items in SRAM (sizes 1-300,
 * unaligned starts, many ties), for both the smallest and the largest
 * item. On the first disagreement it stores outside the board's memory
 * (address 0x8), which the layer reports as a fault in ftl_open.
 * SEARCH_CHECK_BROKEN makes its own reference take the last index on a
 * tie instead of the first: the check must then fail (search_check_broken). */
#define ftl_open minimal_ftl_open
#include "../../../../../examples/jasmine/ftl_minimal/ftl.c"
#undef ftl_open

#define CHECK_AREA (SRAM_BASE + 0x1000)

static UINT32 g_check_rng = 12345;
static UINT32 check_next(void) {
    g_check_rng ^= g_check_rng << 13;
    g_check_rng ^= g_check_rng >> 17;
    g_check_rng ^= g_check_rng << 5;
    return g_check_rng;
}

static UINT32 check_item(UINT32 addr, UINT32 unit, UINT32 i) {
    UINT32 v = 0;
    for (UINT32 b = 0; b < unit; b++) v |= (UINT32)(*(volatile UINT8 *)(addr + unit * i + b)) << (8 * b);
    return v;
}

static UINT32 reference_search(UINT32 addr, UINT32 unit, UINT32 size, BOOL32 max) {
    UINT32 best = 0;
    for (UINT32 i = 1; i < size; i++) {
        UINT32 v = check_item(addr, unit, i), b = check_item(addr, unit, best);
#ifdef SEARCH_CHECK_BROKEN
        if (max ? v >= b : v <= b) best = i;
#else
        if (max ? v > b : v < b) best = i;
#endif
    }
    return best;
}

void ftl_open(void) {
    static const UINT32 units[3] = {1, 2, 4};
    for (UINT32 round = 0; round < 3000; round++) {
        UINT32 unit = units[round % 3], size = 1 + check_next() % 300, addr = CHECK_AREA + check_next() % 4;
        UINT32 range = round % 2 ? 1 + check_next() % 5 : 0xFFFFFFFF;
        for (UINT32 i = 0; i < size * unit; i += unit) {
            UINT32 v = range == 0xFFFFFFFF ? check_next() : check_next() % range;
            if (check_next() % 8 == 0) v = 0xFFFFFFFF - check_next() % 2; /* the largest values, tied */
            for (UINT32 b = 0; b < unit; b++) *(volatile UINT8 *)(addr + i + b) = (UINT8)(v >> (8 * b));
        }
        for (BOOL32 max = 0; max < 2; max++) {
            UINT32 cmd = max ? MU_CMD_SEARCH_MAX_SRAM : MU_CMD_SEARCH_MIN_SRAM;
            UINT32 got = mem_search_min_max(addr, unit, size, cmd), want = reference_search(addr, unit, size, max);
            if (got != want) {
                *(volatile UINT32 *)0x8 = 0;
            }
        }
    }
    mem_set_sram(CHECK_AREA, 0, 300 * 4 + 4);
    minimal_ftl_open();
}
