/*
 * ftl_minimal — a minimal page-mapped FTL for the Jasmine OpenSSD API,
 * written for nandlab (MIT/Apache). It exists to test nandlab's Jasmine
 * layer (compat/jasmine) with firmware whose behaviour is known.
 *
 * - Logical page lpn lives in bank lpn % NUM_BANKS; the bank's map slice
 *   (DRAM, MAP_ADDR) gives its row (vblock * PAGES_PER_BLK + page), 0 for
 *   never written (row 0 is in vblock 0, the installer's block).
 * - Each bank writes one active block page after page. A partial-page
 *   write reads the page's other sectors from flash into the write buffer
 *   first (read-modify-write), or zeroes them on the page's first write.
 *   Reads go to the host through the read buffers; never-written sectors
 *   read as zeros.
 * - Blocks 1 and 2 of each bank hold checkpoints of the bank's map slice
 *   (map pages, then a header page with a sequence number), alternately.
 *   ftl_flush checkpoints every bank; garbage collection (greedy: the
 *   full block with fewest valid pages) checkpoints its bank before it
 *   erases the victim, so a checkpoint never points into an erased block.
 * - ftl_open mounts from the newest complete checkpoint of each bank, or
 *   formats when there is none; the reverse map, valid counts and free
 *   blocks are rebuilt from the map. A block is erased when it is opened.
 * - A data block whose erase fails is retired: ftl_open unmasks the bad
 *   block interrupts (INTR_MASK) and enables IRQs; the board then calls
 *   ftl_isr after the failing erase, which records the bank's block
 *   (BSP_CMD, BSP_ROW_H) and clears the flags; the code that erased looks
 *   at the record and never writes that block. Not handled: a failing
 *   checkpoint block, failing programs, and remembering retired blocks
 *   across a power cycle (no bad-block list is kept on flash).
 * Crash promise: what was written before the last ftl_flush survives.
 */
#include "jasmine.h"

#define CKPT_BLK0 1
#define CKPT_BLK1 2
#define FIRST_DATA_BLK 3
#define CKPT_MAGIC 0x4A4D4E4C /* "LNMJ" */

#define BLK_FREE 0
#define BLK_DATA 1
#define BLK_ACTIVE 2
#define BLK_BAD 3

UINT32 g_ftl_read_buf_id;
UINT32 g_ftl_write_buf_id;

static UINT16 g_vcount[NUM_BANKS][VBLKS_PER_BANK];
static UINT8 g_state[NUM_BANKS][VBLKS_PER_BANK];
static UINT32 g_free[NUM_BANKS];
static UINT32 g_active[NUM_BANKS];
static UINT32 g_next_page[NUM_BANKS];
static UINT32 g_ckpt_seq[NUM_BANKS];
static UINT32 g_ckpt_blk[NUM_BANKS]; /* block holding the newest checkpoint */
static UINT32 g_erase_failed[NUM_BANKS]; /* set by ftl_isr: vblock + 1 of a failed erase, or 0 */

#define MAP_ENTRY(BANK, LPN) (MAP_ADDR + (BANK) * MAP_BYTES_PER_BANK + ((LPN) / NUM_BANKS) * sizeof(UINT32))
#define P2L_ENTRY(BANK, ROW) (P2L_ADDR + (BANK) * P2L_BYTES_PER_BANK + (ROW) * sizeof(UINT32))

static UINT32 get_row(UINT32 lpn) { return read_dram_32(MAP_ENTRY(lpn % NUM_BANKS, lpn)); }

static void checkpoint(UINT32 bank) {
    UINT32 blk = g_ckpt_blk[bank] == CKPT_BLK0 ? CKPT_BLK1 : CKPT_BLK0;
    nand_block_erase(bank, blk);
    for (UINT32 p = 0; p < MAP_PAGES_PER_BANK; p++)
        nand_page_program(bank, blk, p, MAP_ADDR + bank * MAP_BYTES_PER_BANK + p * BYTES_PER_PAGE);
    mem_set_dram(FTL_BUF(bank), 0, BYTES_PER_SECTOR);
    write_dram_32(FTL_BUF(bank), CKPT_MAGIC);
    write_dram_32(FTL_BUF(bank) + 4, ++g_ckpt_seq[bank]);
    nand_page_ptprogram(bank, blk, MAP_PAGES_PER_BANK, 0, 1, FTL_BUF(bank));
    g_ckpt_blk[bank] = blk;
}

/* Erase a block; FALSE when the erase failed (ftl_isr said so). */
static BOOL32 erase_block(UINT32 bank, UINT32 blk) {
    g_erase_failed[bank] = 0;
    nand_block_erase(bank, blk);
    return g_erase_failed[bank] != blk + 1;
}

/* Erase the first free block and make it the bank's active block; a block
 * whose erase fails is retired and the next one tried. */
static void take_free_block(UINT32 bank) {
    for (UINT32 b = FIRST_DATA_BLK; b < VBLKS_PER_BANK; b++) {
        if (g_state[bank][b] == BLK_FREE) {
            g_free[bank]--;
            if (!erase_block(bank, b)) {
                g_state[bank][b] = BLK_BAD;
                continue;
            }
            g_state[bank][b] = BLK_ACTIVE;
            g_active[bank] = b;
            g_next_page[bank] = 0;
            return;
        }
    }
}

/* Greedy collection: move the valid pages of the fullest-of-garbage block
 * to the last free block, checkpoint, erase the victim. */
static void collect(UINT32 bank) {
    UINT32 victim = VBLKS_PER_BANK, best = PAGES_PER_BLK;
    for (UINT32 b = FIRST_DATA_BLK; b < VBLKS_PER_BANK; b++) {
        if (g_state[bank][b] == BLK_DATA && g_vcount[bank][b] < best) {
            best = g_vcount[bank][b];
            victim = b;
        }
    }
    if (victim == VBLKS_PER_BANK) {
        uart_print("ftl_minimal: no block to collect");
        while (1)
            ;
    }
    take_free_block(bank);
    for (UINT32 p = 0; p < PAGES_PER_BLK; p++) {
        UINT32 row = victim * PAGES_PER_BLK + p;
        UINT32 lpn = read_dram_32(P2L_ENTRY(bank, row));
        if (lpn == INVALID32 || get_row(lpn) != row) continue;
        UINT32 new_row = g_active[bank] * PAGES_PER_BLK + g_next_page[bank]++;
        nand_page_read(bank, victim, p, COPY_BUF(bank));
        nand_page_program(bank, g_active[bank], new_row % PAGES_PER_BLK, COPY_BUF(bank));
        write_dram_32(MAP_ENTRY(bank, lpn), new_row);
        write_dram_32(P2L_ENTRY(bank, new_row), lpn);
        g_vcount[bank][g_active[bank]]++;
    }
    checkpoint(bank);
    g_vcount[bank][victim] = 0;
    if (!erase_block(bank, victim)) {
        g_state[bank][victim] = BLK_BAD;
        return;
    }
    g_state[bank][victim] = BLK_FREE;
    g_free[bank]++;
}

static void open_block(UINT32 bank) {
    if (g_state[bank][g_active[bank]] == BLK_ACTIVE) g_state[bank][g_active[bank]] = BLK_DATA;
    if (g_free[bank] <= 1) {
        collect(bank);
        if (g_next_page[bank] < PAGES_PER_BLK) return;
        g_state[bank][g_active[bank]] = BLK_DATA;
    }
    take_free_block(bank);
}

static UINT32 new_row(UINT32 bank) {
    if (g_next_page[bank] >= PAGES_PER_BLK) open_block(bank);
    return g_active[bank] * PAGES_PER_BLK + g_next_page[bank]++;
}

static void invalidate(UINT32 bank, UINT32 row) {
    if (row != 0) g_vcount[bank][row / PAGES_PER_BLK]--;
}

/* Blocks, counts and the reverse map from the map slices in DRAM. */
static void rebuild(void) {
    mem_set_dram(P2L_ADDR, 0xFFFFFFFF, NUM_BANKS * P2L_BYTES_PER_BANK);
    for (UINT32 bank = 0; bank < NUM_BANKS; bank++) {
        for (UINT32 b = 0; b < VBLKS_PER_BANK; b++) {
            g_vcount[bank][b] = 0;
            g_state[bank][b] = BLK_FREE;
        }
        for (UINT32 i = 0; i < LPNS_PER_BANK; i++) {
            UINT32 lpn = i * NUM_BANKS + bank;
            if (lpn >= NUM_LPAGES) break;
            UINT32 row = read_dram_32(MAP_ENTRY(bank, lpn));
            if (row == 0) continue;
            g_vcount[bank][row / PAGES_PER_BLK]++;
            g_state[bank][row / PAGES_PER_BLK] = BLK_DATA;
            write_dram_32(P2L_ENTRY(bank, row), lpn);
        }
        g_free[bank] = 0;
        for (UINT32 b = FIRST_DATA_BLK; b < VBLKS_PER_BANK; b++)
            if (g_state[bank][b] == BLK_FREE) g_free[bank]++;
        g_active[bank] = 0;
        g_next_page[bank] = PAGES_PER_BLK; /* the first write opens a block */
    }
}

/* The newest complete checkpoint of a bank: 1 and its map loaded, or 0. */
static BOOL32 load_checkpoint(UINT32 bank) {
    UINT32 best_blk = 0, best_seq = 0;
    for (UINT32 blk = CKPT_BLK0; blk <= CKPT_BLK1; blk++) {
        nand_page_ptread(bank, blk, MAP_PAGES_PER_BANK, 0, 1, FTL_BUF(bank), RETURN_WHEN_DONE);
        if (read_dram_32(FTL_BUF(bank)) == CKPT_MAGIC && read_dram_32(FTL_BUF(bank) + 4) >= best_seq) {
            best_seq = read_dram_32(FTL_BUF(bank) + 4);
            best_blk = blk;
        }
    }
    if (best_blk == 0) return FALSE;
    for (UINT32 p = 0; p < MAP_PAGES_PER_BANK; p++)
        nand_page_read(bank, best_blk, p, MAP_ADDR + bank * MAP_BYTES_PER_BANK + p * BYTES_PER_PAGE);
    g_ckpt_seq[bank] = best_seq;
    g_ckpt_blk[bank] = best_blk;
    return TRUE;
}

void ftl_open(void) {
    BOOL32 found = TRUE;
    for (UINT32 bank = 0; bank < NUM_BANKS; bank++) found = found && load_checkpoint(bank);
    if (!found) {
        mem_set_dram(MAP_ADDR, 0, NUM_BANKS * MAP_BYTES_PER_BANK);
        for (UINT32 bank = 0; bank < NUM_BANKS; bank++) {
            g_ckpt_seq[bank] = 0;
            g_ckpt_blk[bank] = CKPT_BLK1;
            checkpoint(bank);
        }
    }
    rebuild();
    g_ftl_read_buf_id = 0;
    g_ftl_write_buf_id = 0;
    flash_clear_irq();
#ifndef MINIMAL_BUG_NO_INTERRUPTS
    /* Bad-block flags raise the flash interrupt: ftl_isr handles them. */
    SETREG(INTR_MASK, FIRQ_BADBLK_L | FIRQ_BADBLK_H);
    enable_irq();
#endif
}

void ftl_read(UINT32 const lba, UINT32 const num_sectors) {
    UINT32 lpn = lba / SECTORS_PER_PAGE, offset = lba % SECTORS_PER_PAGE, remain = num_sectors;
    while (remain) {
        UINT32 count = MIN(SECTORS_PER_PAGE - offset, remain);
        UINT32 bank = lpn % NUM_BANKS, row = get_row(lpn);
        if (row != 0) {
            nand_page_ptread_to_host(bank, row / PAGES_PER_BLK, row % PAGES_PER_BLK, offset, count);
        } else {
            UINT32 next = (g_ftl_read_buf_id + 1) % NUM_RD_BUFFERS;
            while (next == GETREG(SATA_RBUF_PTR))
                ;
            mem_set_dram(RD_BUF_PTR(g_ftl_read_buf_id) + offset * BYTES_PER_SECTOR, 0, count * BYTES_PER_SECTOR);
            SETREG(BM_STACK_RDSET, next);
            SETREG(BM_STACK_RESET, 0x02);
            g_ftl_read_buf_id = next;
        }
        offset = 0;
        remain -= count;
        lpn++;
    }
}

#ifdef MINIMAL_MODIFIED_COPYBACK
/* A partial write over an existing page in one command: the old page
 * copied back within the bank with the written sectors taken from the
 * write buffer (FC_MODIFY_COPYBACK); the write buffer is then released to
 * the host by moving the write limit. New row first: taking it may run
 * garbage collection, which can move the old page. */
static void modify_page(UINT32 lpn, UINT32 offset, UINT32 count) {
    UINT32 bank = lpn % NUM_BANKS, row = new_row(bank), old = get_row(lpn);
#ifdef MINIMAL_BUG_COPYBACK_ADDRESS
    UINT32 data = WR_BUF_PTR(g_ftl_write_buf_id); /* the buffer's start, not the new sectors' */
#else
    UINT32 data = WR_BUF_PTR(g_ftl_write_buf_id) + offset * BYTES_PER_SECTOR;
#endif
    nand_page_modified_copyback(bank, old / PAGES_PER_BLK, old % PAGES_PER_BLK, row / PAGES_PER_BLK,
                                row % PAGES_PER_BLK, offset, data, count * BYTES_PER_SECTOR);
    g_ftl_write_buf_id = (g_ftl_write_buf_id + 1) % NUM_WR_BUFFERS;
    SETREG(BM_STACK_WRSET, g_ftl_write_buf_id);
    SETREG(BM_STACK_RESET, 0x01);
    invalidate(bank, old);
    write_dram_32(MAP_ENTRY(bank, lpn), row);
    write_dram_32(P2L_ENTRY(bank, row), lpn);
    g_vcount[bank][row / PAGES_PER_BLK]++;
}
#endif

static void write_page(UINT32 lpn, UINT32 offset, UINT32 count) {
    UINT32 bank = lpn % NUM_BANKS, old = get_row(lpn);
#ifdef MINIMAL_MODIFIED_COPYBACK
    if (old != 0 && count != SECTORS_PER_PAGE) {
        modify_page(lpn, offset, count);
        return;
    }
#endif
    if (old != 0 && count != SECTORS_PER_PAGE) {
        /* Read the page's other sectors into the write buffer. */
        if (offset != 0)
            nand_page_ptread(bank, old / PAGES_PER_BLK, old % PAGES_PER_BLK, 0, offset, WR_BUF_PTR(g_ftl_write_buf_id),
                             RETURN_WHEN_DONE);
#ifndef MINIMAL_BUG_FORGET_RIGHT_HOLE
        if (offset + count < SECTORS_PER_PAGE)
            nand_page_ptread(bank, old / PAGES_PER_BLK, old % PAGES_PER_BLK, offset + count,
                             SECTORS_PER_PAGE - offset - count, WR_BUF_PTR(g_ftl_write_buf_id), RETURN_WHEN_DONE);
#endif
        offset = 0;
        count = SECTORS_PER_PAGE;
    } else if (count != SECTORS_PER_PAGE) {
        /* A first write of part of a page: the rest reads as zeros. */
        if (offset != 0) mem_set_dram(WR_BUF_PTR(g_ftl_write_buf_id), 0, offset * BYTES_PER_SECTOR);
        if (offset + count < SECTORS_PER_PAGE)
            mem_set_dram(WR_BUF_PTR(g_ftl_write_buf_id) + (offset + count) * BYTES_PER_SECTOR, 0,
                         (SECTORS_PER_PAGE - offset - count) * BYTES_PER_SECTOR);
        offset = 0;
        count = SECTORS_PER_PAGE;
    }
    UINT32 row = new_row(bank);
    nand_page_ptprogram_from_host(bank, row / PAGES_PER_BLK, row % PAGES_PER_BLK, offset, count);
    if (old != 0) invalidate(bank, old);
    write_dram_32(MAP_ENTRY(bank, lpn), row);
    write_dram_32(P2L_ENTRY(bank, row), lpn);
    g_vcount[bank][row / PAGES_PER_BLK]++;
}

void ftl_write(UINT32 const lba, UINT32 const num_sectors) {
    UINT32 lpn = lba / SECTORS_PER_PAGE, offset = lba % SECTORS_PER_PAGE, remain = num_sectors;
    while (remain) {
        UINT32 count = MIN(SECTORS_PER_PAGE - offset, remain);
        write_page(lpn, offset, count);
        offset = 0;
        remain -= count;
        lpn++;
    }
}

void ftl_flush(void) {
    flash_finish();
    for (UINT32 bank = 0; bank < NUM_BANKS; bank++) checkpoint(bank);
}

/* The flash interrupt: for each bank with flags, clear them and, when an
 * erase failed, record the block for the code that erased it. */
void ftl_isr(void) {
    for (UINT32 bank = 0; bank < NUM_BANKS; bank++) {
        UINT32 flags = BSP_INTR(bank);
        if (flags == 0) continue;
        UINT32 cmd = GETREG(BSP_CMD(bank));
        CLR_BSP_INTR(bank, flags);
        if ((flags & (FIRQ_BADBLK_L | FIRQ_BADBLK_H)) && cmd == FC_ERASE)
            g_erase_failed[bank] = GETREG(BSP_ROW_H(bank)) / PAGES_PER_BLK + 1;
    }
}
