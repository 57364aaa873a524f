/*
 * flash.c — the flash controller of nandlab's Jasmine: the register file
 * behind SETREG/GETREG, the flash commands a write to FCP_ISSUE runs on
 * nandlab's flash, and the board's flash wrappers (nand_page_*,
 * nand_block_erase, flash_*), written from their documented behaviour.
 *
 * Addressing: bank b, row r (= vblock * PAGES_PER_VBLK + page) is nandlab
 * page b * PAGES_PER_BANK + r; block b * VBLKS_PER_BANK + vblock.
 *
 * Interrupts: after each command, a bank flag that INTR_MASK selects
 * calls the firmware's ftl_isr when the CPU takes IRQs (the board's IRQ
 * handler); see jasmine_deliver_interrupt.
 *
 * Payloads: a program decides from the tags of the DRAM sectors it takes
 * (mem.c) whether the page carries host data (every sector a host sector
 * or all-0xFF bytes: programmed from the DRAM shadow buffer, identities
 * kept) or metadata (every sector firmware bytes: programmed as bytes).
 * Anything else is reported. The page's first OOB byte records which
 * (KIND_HOST / KIND_META), so a read knows what the page holds; the layer
 * caches that in page_kind and forgets it at power-on.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "layer.h"

#define REG_IN(addr, base, bytes) ((addr) >= (base) && (addr) < (base) + (bytes))

static uint32_t *reg_slot(uint32_t addr) {
    if (addr % 4) return NULL;
    if (REG_IN(addr, FREG_BASE, FREG_BYTES)) return &L->freg[(addr - FREG_BASE) / 4];
    if (REG_IN(addr, MREG_BASE, MREG_BYTES)) return &L->mreg[(addr - MREG_BASE) / 4];
    if (REG_IN(addr, BS_BASE, BSREG_BYTES)) return &L->bsreg[(addr - BS_BASE) / 4];
    return NULL;
}

#define FREG(a) L->freg[((a) - FREG_BASE) / 4]
#define MREG(a) L->mreg[((a) - MREG_BASE) / 4]

const char *jasmine_register_name(uint32_t addr) {
    static const struct {
        uint32_t addr;
        const char *name;
    } names[] = {
        {SATA_WBUF_PTR, "SATA_WBUF_PTR"}, {SATA_RBUF_PTR, "SATA_RBUF_PTR"},   {WR_STAT, "WR_STAT"},
        {BM_WRITE_LIMIT, "BM_WRITE_LIMIT"}, {BM_READ_LIMIT, "BM_READ_LIMIT"}, {MON_CHABANKIDLE, "MON_CHABANKIDLE"},
        {MU_RESULT, "MU_RESULT"},         {INTR_BSP, "INTR_BSP"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].addr == addr) return names[i].name;
    if (addr >= BSP_INTR_BASE && addr < BSP_INTR_BASE + NUM_BANKS_MAX) return "BSP_INTR(bank)";
    if (addr >= BSP_FSM_BASE && addr < BSP_FSM_BASE + NUM_BANKS_MAX) return "BSP_FSM(bank)";
    if (addr >= BSP_BASE && addr < BSP_BASE + SIZE_OF_BSP * NUM_BANKS_MAX) return "a bank status port register";
    return "a register";
}

void jasmine_flash_reset_state(void) {
    /* Write buffers the host may fill, the read limit. */
    MREG(BM_WRITE_LIMIT) = 0;
    MREG(BM_READ_LIMIT) = 0;
}

/* ---- Interrupts ------------------------------------------------------------ */

/* The flash interrupt: raised while a bank holds a flag (BSP_INTR) that
 * INTR_MASK selects; the flags stay until the firmware clears them. */
static int flash_interrupt_line(void) {
    uint32_t mask = FREG(INTR_MASK) & 0xFF;
    if (!mask) return 0;
    for (uint32_t b = 0; b < NUM_BANKS; b++)
        if (L->bsp_intr[b] & mask) return 1;
    return 0;
}

/* The board's IRQ handler for a flash interrupt: when the line is up and
 * the CPU takes IRQs, call the firmware's ftl_isr with IRQs masked (as the
 * CPU does in its IRQ mode). Commands complete at issue here, so the
 * interrupt arrives right after the command that raised the flag, or when
 * the firmware enables IRQs again. The line is level: a ftl_isr that
 * returns with it still up would be entered again at once, forever, on
 * the board; that is reported. */
void jasmine_deliver_interrupt(void) {
    if (!L->irq_enabled || L->in_isr || !flash_interrupt_line()) return;
    L->in_isr = 1;
    L->interrupts++;
    ftl_isr();
    L->in_isr = 0;
    if (flash_interrupt_line()) {
        uint32_t b = 0;
        while (b + 1 < NUM_BANKS && !(L->bsp_intr[b] & FREG(INTR_MASK))) b++;
        jasmine_fatal(JASMINE_E_LAYER,
                      "ftl_isr returned with bank %u's interrupt flags 0x%02x still set (INTR_MASK 0x%02x): on the "
                      "board the flash interrupt would be taken again at once, forever",
                      b, L->bsp_intr[b], FREG(INTR_MASK) & 0xFF);
    }
}

/* A bank flag that FCONF_PAUSE names stops the flash controller until the
 * firmware clears it: a command issued meanwhile would never run. */
static void check_not_paused(uint32_t cmd) {
    uint32_t pause = FREG(FCONF_PAUSE) & 0xFF;
    if (!pause) return;
    for (uint32_t b = 0; b < NUM_BANKS; b++)
        if (L->bsp_intr[b] & pause)
            jasmine_fatal(JASMINE_E_LAYER,
                          "flash command 0x%x issued while the flash controller is paused: bank %u holds interrupt "
                          "flags 0x%02x, which FCONF_PAUSE (0x%02x) names, and nothing cleared them; on the board "
                          "the command would never run",
                          cmd, b, L->bsp_intr[b], pause);
}

/* ---- SETREG / GETREG ---------------------------------------------------- */

void jasmine_setreg(UINT32 addr, UINT32 val) {
    jasmine_progress();
    uint32_t *slot = reg_slot(addr);
    if (!slot) {
        /* Peripheral set-up registers (SDRAM, interrupt controller, GPIO,
         * UART, timers): accepted and forgotten. */
        return;
    }
    *slot = val;
    if (addr == FCP_ISSUE) {
        jasmine_flash_command(FREG(FCP_BANK));
    } else if (addr == BM_STACK_RESET) {
        if (val & 0x02) {
            MREG(BM_READ_LIMIT) = MREG(BM_STACK_RDSET);
            jasmine_host_take_read_buffers(MREG(BM_STACK_RDSET));
        }
        if (val & 0x01) MREG(BM_WRITE_LIMIT) = MREG(BM_STACK_WRSET);
    } else if (addr >= BSP_INTR_BASE && addr < BSP_INTR_BASE + NUM_BANKS_MAX) {
        /* Four banks' flags per word; a 1 bit clears that flag. */
        for (uint32_t k = 0; k < 4; k++) L->bsp_intr[addr - BSP_INTR_BASE + k] &= (uint8_t) ~(val >> (8 * k));
        *slot = 0;
    } else if (addr == INTR_BSP) {
        /* Writing the bank interrupt summary clears it. */
        *slot = 0;
    }
}

UINT32 jasmine_getreg(UINT32 addr) {
    uint32_t value;
    if (addr == APB_INT_STS) {
        value = flash_interrupt_line() ? INTR_FLASH : 0;
    } else if (addr == SATA_WBUF_PTR) {
        value = L->wbuf_ptr;
    } else if (addr == SATA_RBUF_PTR) {
        value = L->rbuf_ptr;
    } else if (addr == WR_STAT || addr == MON_CHABANKIDLE) {
        /* No command is ever in flight: the write port is free (WR_STAT
         * bit 0 clear), the waiting room empty and every bank idle
         * (MON_CHABANKIDLE zero). */
        value = 0;
    } else if (addr == MU_RESULT) {
        value = 0;
    } else {
        uint32_t *slot = reg_slot(addr);
        value = slot ? *slot : 0;
    }
    jasmine_poll(addr, value, __builtin_return_address(0));
    return value;
}

UINT8 jasmine_bsp_intr(UINT32 rbank) {
    UINT8 v = rbank < NUM_BANKS_MAX ? L->bsp_intr[rbank] : 0;
    jasmine_poll(BSP_INTR_BASE + rbank, v, __builtin_return_address(0));
    return v;
}

UINT8 jasmine_bsp_fsm(UINT32 rbank) {
    jasmine_poll(BSP_FSM_BASE + rbank, BANK_IDLE, __builtin_return_address(0));
    return BANK_IDLE;
}

void jasmine_clr_bsp_intr(UINT32 rbank, UINT32 flags) {
    jasmine_progress();
    if (rbank < NUM_BANKS_MAX) L->bsp_intr[rbank] &= (UINT8)~flags;
}

/* ---- Pages and their kinds --------------------------------------------- */

static uint64_t nl_page(uint32_t rbank, uint32_t row) {
    if (rbank >= NUM_BANKS)
        jasmine_fatal(JASMINE_E_LAYER, "flash command on bank %u; the board has %u banks", rbank,
                      (unsigned)NUM_BANKS);
    if (row >= PAGES_PER_BANK)
        jasmine_fatal(JASMINE_E_LAYER,
                      "flash command on bank %u row %u (vblock %u page %u); a bank has %u vblocks of %u pages", rbank,
                      row, row / PAGES_PER_VBLK, row % PAGES_PER_VBLK, (unsigned)VBLKS_PER_BANK,
                      (unsigned)PAGES_PER_VBLK);
    return (uint64_t)rbank * PAGES_PER_BANK + row;
}

static uint8_t page_kind(uint64_t page) {
    uint8_t kind = kind_get(L->page_kind, page);
    if (kind == KIND_UNKNOWN) {
        uint8_t oob = 0xFF;
        jasmine_check_flash(L->flash->read_oob(L->flash->ctx, NANDLAB_CAUSE_METADATA, page, &oob, 1),
                            "reading a page's OOB");
        kind = oob == KIND_HOST || oob == KIND_META ? oob : KIND_ERASED;
        kind_set(L->page_kind, page, kind);
    }
    return kind;
}

static uint8_t cause_of(uint32_t option, uint8_t fallback) {
    return (option & (FO_B_SATA_R | FO_B_SATA_W)) ? NANDLAB_CAUSE_HOST : fallback;
}

/* A flash error that is not a power loss: the bank raises its interrupt
 * flags, as the board's ECC and status check would. */
static int flash_failed(int32_t code, uint32_t rbank, const char *what) {
    if (code == NANDLAB_E_UNCORRECTABLE) {
        L->bsp_intr[rbank] |= FIRQ_DATA_CORRUPT;
        return 1;
    }
    if (code == NANDLAB_E_PROGRAM_FAILED || code == NANDLAB_E_ERASE_FAILED || code == NANDLAB_E_BAD_BLOCK) {
        L->bsp_intr[rbank] |= FIRQ_BADBLK_L;
        return 1;
    }
    jasmine_check_flash(code, what);
    return 0;
}

/* ---- Commands ------------------------------------------------------------ */

static void check_dma(unsigned long addr, unsigned long bytes, const char *what) {
    if (!jasmine_in_dram(addr, bytes) && !jasmine_in_sram(addr, bytes))
        jasmine_fatal(JASMINE_E_LAYER,
                      "%s: DMA address 0x%08lx (+%lu bytes) is outside the board's DRAM and SRAM", what, addr, bytes);
}

/* Read sectors col .. col+n of a page into memory at dma + col*512. */
static void do_read(uint32_t rbank, uint32_t row, uint32_t col, uint32_t n, unsigned long dma, uint32_t option) {
    uint64_t page = nl_page(rbank, row);
    if (col + n > SECTORS_PER_PAGE)
        jasmine_fatal(JASMINE_E_LAYER, "read of sectors %u..%u of a %u-sector page", col, col + n,
                      (unsigned)SECTORS_PER_PAGE);
    unsigned long addr = dma + (unsigned long)col * BYTES_PER_SECTOR;
    unsigned long bytes = (unsigned long)n * BYTES_PER_SECTOR;
    check_dma(addr, bytes, "flash read");
    uint8_t kind = page_kind(page);
    const nandlab_flash *f = L->flash;
    if (kind == KIND_HOST && jasmine_in_dram(addr, bytes) && addr % BYTES_PER_SECTOR == 0) {
        uint32_t sector = jasmine_dram_sector(addr);
        jasmine_shadow_check(sector, n, "a flash read of host data");
        uint8_t cause = cause_of(option, NANDLAB_CAUSE_GC);
        int32_t code;
        if (sector % SHADOW_CHUNK + n <= SHADOW_CHUNK) {
            code = f->read(f->ctx, cause, page, col, n, L->shadow[sector / SHADOW_CHUNK], sector % SHADOW_CHUNK, NULL, 0);
            if (code != NANDLAB_OK && flash_failed(code, rbank, "flash read")) return;
        } else {
            /* Across two shadow chunks: through the staging page. */
            code = f->read(f->ctx, cause, page, col, n, L->staging, col, NULL, 0);
            if (code != NANDLAB_OK && flash_failed(code, rbank, "flash read")) return;
            jasmine_shadow_in(sector, L->staging, col, n, "a flash read of host data");
        }
        memset(&L->tags[sector], TAG_HOST, n);
    } else if (kind == KIND_HOST) {
        jasmine_fatal(JASMINE_E_LAYER,
                      "host data of bank %u row %u read to 0x%08lx, which is not whole DRAM sectors", rbank, row, addr);
    } else if (kind == KIND_META) {
        int32_t code = f->read_meta_at(f->ctx, NANDLAB_CAUSE_METADATA, page, col * BYTES_PER_SECTOR, (uint8_t *)addr,
                                       bytes);
        if (code != NANDLAB_OK && flash_failed(code, rbank, "flash read")) return;
        jasmine_tag_bytes(addr, bytes);
    } else {
        memset((void *)addr, 0xFF, bytes);
        jasmine_tag_fill(addr, bytes, 0xFF);
        L->bsp_intr[rbank] |= FIRQ_ALL_FF;
    }
    if ((option & FO_B_SATA_R) && jasmine_in_dram(dma, 1) && dma >= RD_BUF_ADDR &&
        dma < RD_BUF_ADDR + (unsigned long)NUM_RD_BUFFERS * BYTES_PER_PAGE) {
        uint32_t id = (uint32_t)((dma - RD_BUF_ADDR) / BYTES_PER_PAGE);
        MREG(BM_READ_LIMIT) = (id + 1) % NUM_RD_BUFFERS;
        jasmine_host_take_read_buffers((id + 1) % NUM_RD_BUFFERS);
    }
}

/* Put DRAM sectors `sector` .. +n (host identities, erased or zero bytes)
 * into sectors col .. col+n of the staging page, one buffer call per run
 * of sectors of one kind; erased runs only when `erased_too` (else the
 * staging page is erased there already). */
static void overlay_host_sectors(uint32_t sector, uint32_t col, uint32_t n, int erased_too) {
    const nandlab_flash *f = L->flash;
    const uint8_t *tags = L->tags;
    uint32_t k = 0;
    while (k < n) {
        uint8_t kind = jasmine_sector_kind(tags, sector + k);
        uint32_t run = 1;
        while (k + run < n && jasmine_sector_kind(tags, sector + k + run) == kind) run++;
        if (kind == TAG_HOST)
            jasmine_shadow_out(L->staging, col + k, sector + k, run, "staging");
        else if (kind == TAG_ZERO)
            jasmine_check_flash(f->buf_zero(f->ctx, L->staging, col + k, run), "staging");
        else if (erased_too)
            jasmine_check_flash(f->buf_copy(f->ctx, L->staging, col + k, L->erased, 0, run), "staging");
        k += run;
    }
}

/* After a program of `page` as `kind`: the page's kind, or on a failure
 * the bank's flags (and the kind unknown until the page is looked up). */
static void programmed(uint32_t rbank, uint64_t page, int32_t code, uint8_t kind, const char *what) {
    if (code != NANDLAB_OK) {
        flash_failed(code, rbank, what);
        kind_set(L->page_kind, page, KIND_UNKNOWN);
        return;
    }
    kind_set(L->page_kind, page, kind);
}

/* Stage a host page in L->staging: sectors col .. col+n from DRAM sector
 * `sector` on, the rest erased. */
static void stage_host_sectors(uint32_t sector, uint32_t col, uint32_t n) {
    int whole = col == 0 && n == SECTORS_PER_PAGE;
    if (!whole)
        jasmine_check_flash(L->flash->buf_copy(L->flash->ctx, L->staging, 0, L->erased, 0, SECTORS_PER_PAGE),
                            "staging");
    overlay_host_sectors(sector, col, n, whole);
}

/* Program sectors col .. col+n of a page from memory at dma + col*512 (the
 * other sectors stay erased). */
static void do_program(uint32_t rbank, uint32_t row, uint32_t col, uint32_t n, unsigned long dma, uint32_t option) {
    uint64_t page = nl_page(rbank, row);
    if (n == 0 || col + n > SECTORS_PER_PAGE)
        jasmine_fatal(JASMINE_E_LAYER, "program of sectors %u..%u of a %u-sector page", col, col + n,
                      (unsigned)SECTORS_PER_PAGE);
    unsigned long addr = dma + (unsigned long)col * BYTES_PER_SECTOR;
    unsigned long bytes = (unsigned long)n * BYTES_PER_SECTOR;
    check_dma(addr, bytes, "flash program");
    const nandlab_flash *f = L->flash;
    uint32_t host = 0, other = 0;
    uint32_t sector = 0;
    int in_dram = jasmine_in_dram(addr, bytes) && addr % BYTES_PER_SECTOR == 0;
    if (in_dram) sector = jasmine_dram_sector(addr);
    /* Without a host sector the page is metadata, whatever its bytes. */
    if (in_dram && memchr(&L->tags[sector], TAG_HOST, n)) {
        const uint8_t *tags = L->tags;
        for (uint32_t k = 0; k < n; k++) {
            uint8_t kind = jasmine_sector_kind(tags, sector + k);
            host += kind == TAG_HOST;
            other += kind == TAG_BYTES;
        }
    }
    int32_t code;
    uint8_t oob;
    uint8_t cause = cause_of(option, NANDLAB_CAUSE_GC);
    if (host > 0 && other > 0) {
        jasmine_fatal(JASMINE_E_LAYER,
                      "program of bank %u row %u from DRAM 0x%08lx mixes %u host sectors with %u sectors of bytes the "
                      "firmware wrote; nandlab cannot keep both in one page",
                      rbank, row, addr, host, other);
    } else if (host > 0) {
        oob = KIND_HOST;
        jasmine_shadow_check(sector, n, "a flash program of host data");
        if (col == 0 && n == SECTORS_PER_PAGE && host == n && sector % SHADOW_CHUNK == 0) {
            code = f->program(f->ctx, cause, page, L->shadow[sector / SHADOW_CHUNK], 0, &oob, 1);
        } else {
            stage_host_sectors(sector, col, n);
            code = f->program(f->ctx, cause, page, L->staging, 0, &oob, 1);
        }
        L->host_pages_programmed++;
    } else {
        /* Metadata: the page's bytes up to the last sector programmed (the
         * NAND keeps no trailing erased bytes: the rest reads as 0xFF). */
        static unsigned char page_bytes[BYTES_PER_PAGE];
        unsigned long before = (unsigned long)col * BYTES_PER_SECTOR;
        oob = KIND_META;
        memset(page_bytes, 0xFF, before);
        memcpy(page_bytes + before, (const void *)addr, bytes);
        code = f->program_meta(f->ctx, NANDLAB_CAUSE_METADATA, page, page_bytes, before + bytes, &oob, 1);
        L->meta_pages_programmed++;
    }
    programmed(rbank, page, code, oob, "flash program");
}

static void do_erase(uint32_t rbank, uint32_t row) {
    uint64_t first = nl_page(rbank, row - row % PAGES_PER_VBLK);
    uint64_t block = first / PAGES_PER_VBLK;
    int32_t code = L->flash->erase(L->flash->ctx, NANDLAB_CAUSE_GC, block);
    for (uint64_t p = first; p < first + PAGES_PER_VBLK; p++)
        kind_set(L->page_kind, p, code == NANDLAB_OK ? KIND_ERASED : KIND_UNKNOWN);
    if (code != NANDLAB_OK) flash_failed(code, rbank, "block erase");
}

static void do_copyback(uint32_t rbank, uint32_t src_row, uint32_t dst_row) {
    uint64_t src = nl_page(rbank, src_row), dst = nl_page(rbank, dst_row);
    uint8_t kind = page_kind(src);
    int32_t code = L->flash->copyback(L->flash->ctx, NANDLAB_CAUSE_GC, src, dst, NULL, 0);
    if (code != NANDLAB_OK) {
        kind_set(L->page_kind, dst, KIND_UNKNOWN);
        flash_failed(code, rbank, "copyback");
        return;
    }
    kind_set(L->page_kind, dst, kind);
}

/* FC_MODIFY_COPYBACK: the page at src_row, with sectors col .. col+n
 * replaced by memory at dma + col*512, programmed at dst_row of the same
 * bank. As on the board (the source page passes through the controller's
 * copy buffer), it is a read and a program; identities are kept: a host
 * page takes host sectors (or erased / zero bytes), a metadata page takes
 * bytes; a mix is reported as for a program. An erased source makes it a
 * program of the new sectors alone. A source that cannot be read raises
 * the bank's FIRQ_DATA_CORRUPT and nothing is programmed. */
static void do_modify_copyback(uint32_t rbank, uint32_t src_row, uint32_t dst_row, uint32_t col, uint32_t n,
                               unsigned long dma, uint32_t option) {
    uint64_t src = nl_page(rbank, src_row), dst = nl_page(rbank, dst_row);
    if (col + n > SECTORS_PER_PAGE)
        jasmine_fatal(JASMINE_E_LAYER, "modified copyback of sectors %u..%u of a %u-sector page (FCP_DST_COL, FCP_DMA_CNT)",
                      col, col + n, (unsigned)SECTORS_PER_PAGE);
    if (n == 0) {
        do_copyback(rbank, src_row, dst_row);
        return;
    }
    unsigned long addr = dma + (unsigned long)col * BYTES_PER_SECTOR, bytes = (unsigned long)n * BYTES_PER_SECTOR;
    check_dma(addr, bytes, "modified copyback");
    uint8_t kind = page_kind(src);
    if (kind == KIND_ERASED) {
        do_program(rbank, dst_row, col, n, dma, option);
        return;
    }
    const nandlab_flash *f = L->flash;
    int in_dram = jasmine_in_dram(addr, bytes) && addr % BYTES_PER_SECTOR == 0;
    uint32_t sector = in_dram ? jasmine_dram_sector(addr) : 0;
    uint8_t oob = kind;
    int32_t code;
    if (kind == KIND_HOST) {
        for (uint32_t k = 0; k < n; k++)
            if (!in_dram || jasmine_sector_kind(L->tags, sector + k) == TAG_BYTES)
                jasmine_fatal(JASMINE_E_LAYER,
                              "modified copyback of bank %u row %u (host data) to row %u takes sector %u from 0x%08lx, "
                              "which holds bytes the firmware wrote, not a host sector; nandlab cannot keep both in "
                              "one page",
                              rbank, src_row, dst_row, col + k, addr + (unsigned long)k * BYTES_PER_SECTOR);
        jasmine_shadow_check(sector, n, "a modified copyback of host data");
        code = f->read(f->ctx, NANDLAB_CAUSE_GC, src, 0, SECTORS_PER_PAGE, L->staging, 0, NULL, 0);
        if (code != NANDLAB_OK && flash_failed(code, rbank, "modified copyback (source read)")) return;
        overlay_host_sectors(sector, col, n, 1);
        code = f->program(f->ctx, cause_of(option, NANDLAB_CAUSE_GC), dst, L->staging, 0, &oob, 1);
        L->host_pages_programmed++;
    } else {
        static unsigned char page_bytes[BYTES_PER_PAGE];
        if (in_dram && memchr(&L->tags[sector], TAG_HOST, n))
            jasmine_fatal(JASMINE_E_LAYER,
                          "modified copyback of bank %u row %u (metadata) to row %u takes host sectors from DRAM "
                          "0x%08lx; nandlab cannot keep both in one page",
                          rbank, src_row, dst_row, addr);
        code = f->read_meta_at(f->ctx, NANDLAB_CAUSE_METADATA, src, 0, page_bytes, sizeof page_bytes);
        if (code != NANDLAB_OK && flash_failed(code, rbank, "modified copyback (source read)")) return;
        memcpy(page_bytes + (size_t)col * BYTES_PER_SECTOR, (const void *)addr, bytes);
        code = f->program_meta(f->ctx, NANDLAB_CAUSE_METADATA, dst, page_bytes, sizeof page_bytes, &oob, 1);
        L->meta_pages_programmed++;
    }
    programmed(rbank, dst, code, oob, "modified copyback");
}

/* Run the command in the command port on real bank `rbank`, to the end. */
void jasmine_flash_command(uint32_t rbank) {
    uint32_t cmd = FREG(FCP_CMD), option = FREG(FCP_OPTION);
    uint32_t dma = FREG(FCP_DMA_ADDR), cnt = FREG(FCP_DMA_CNT), col = FREG(FCP_COL);
    if (rbank >= NUM_BANKS)
        jasmine_fatal(JASMINE_E_LAYER, "flash command 0x%x on bank %u; the board has %u banks", cmd,
                      rbank, (unsigned)NUM_BANKS);
    uint32_t row = FREG(_FCP_ROW_L(rbank));
    uint32_t dst_row = FREG(FCP_DST_ROW_L), dst_col = FREG(FCP_DST_COL);
    check_not_paused(cmd);
    L->flash_commands++;
    /* The bank status port shows the last command of the bank. */
    uint32_t *bsp = &L->freg[(_BSP_CMD(rbank) - FREG_BASE) / 4];
    bsp[0] = cmd;
    bsp[1] = option;
    bsp[2] = dma;
    bsp[3] = cnt;
    bsp[4] = col;
    bsp[5] = row;
    bsp[6] = row;
    bsp[7] = dst_col;
    bsp[8] = dst_row;
    bsp[9] = dst_row;
    if (cnt % BYTES_PER_SECTOR && (cmd == FC_COL_ROW_READ_OUT || cmd == FC_COL_ROW_IN_PROG || cmd == FC_MODIFY_COPYBACK))
        jasmine_fatal(JASMINE_E_LAYER, "flash command 0x%x with FCP_DMA_CNT = %u, not whole sectors", cmd,
                      cnt);
    switch (cmd) {
    case FC_COL_ROW_READ_OUT: do_read(rbank, row, col, cnt / BYTES_PER_SECTOR, dma, option); break;
    case FC_COL_ROW_IN_PROG: do_program(rbank, row, col, cnt / BYTES_PER_SECTOR, dma, option); break;
    case FC_ERASE: do_erase(rbank, row); break;
    case FC_COPYBACK: do_copyback(rbank, row, dst_row); break;
    case FC_MODIFY_COPYBACK:
        L->modified_copybacks++;
        do_modify_copyback(rbank, row, dst_row, dst_col, cnt / BYTES_PER_SECTOR, dma, option);
        break;
    default:
        jasmine_fatal(JASMINE_E_LAYER,
                      "flash command 0x%x is not implemented by nandlab's Jasmine layer (it runs FC_COL_ROW_READ_OUT, "
                      "FC_COL_ROW_IN_PROG, FC_ERASE, FC_COPYBACK and FC_MODIFY_COPYBACK)",
                      cmd);
    }
    jasmine_progress();
    jasmine_deliver_interrupt();
}

/* Block 0 of every bank as the board's installer leaves it, programmed
 * in order from page 0: the scan list (no initial bad blocks) in page
 * SCAN_LIST_PAGE_OFFSET, then pages up to the stamp page and the firmware
 * image (FW_PAGE_OFFSET on, size_of_firmware_image bytes: board.c), as
 * metadata. An FTL writes its format mark after the image. */
void jasmine_write_scan_lists(void) {
    static unsigned char page_bytes[BYTES_PER_PAGE];
    uint8_t oob = KIND_META;
    uint32_t pages = FW_PAGE_OFFSET + (JASMINE_FIRMWARE_IMAGE_BYTES + BYTES_PER_FW_PAGE - 1) / BYTES_PER_FW_PAGE;
    if (pages > PAGES_PER_VBLK) pages = PAGES_PER_VBLK;
    for (uint32_t bank = 0; bank < NUM_BANKS; bank++) {
        for (uint32_t p = 0; p < pages; p++) {
            memset(page_bytes, 0, sizeof page_bytes);
            if (p == SCAN_LIST_PAGE_OFFSET) {
                memset(page_bytes, 0xFF, sizeof page_bytes);
                ((scan_list_t *)page_bytes)->num_entries = 0;
            }
            uint64_t page = nl_page(bank, p);
            jasmine_check_flash(L->flash->program_meta(L->flash->ctx, NANDLAB_CAUSE_FORMAT, page, page_bytes,
                                                       sizeof page_bytes, &oob, 1),
                                "writing block 0 as the installer does");
            kind_set(L->page_kind, page, KIND_META);
        }
    }
}

/* ---- The board's flash functions -------------------------------------- */

/* The wrappers below are the layer's own: they fill the command port
 * directly (what SETREG would store) rather than through jasmine_setreg. */
#define PUT(ADDR, VAL) (FREG(ADDR) = (UINT32)(VAL))

static void set_command(UINT32 cmd, UINT32 option, UINT32 dma, UINT32 bytes, UINT32 col, UINT32 bank, UINT32 row) {
    PUT(FCP_CMD, cmd);
    PUT(FCP_OPTION, option);
    PUT(FCP_DMA_ADDR, dma);
    PUT(FCP_DMA_CNT, bytes);
    PUT(FCP_COL, col);
    PUT(FCP_ROW_L(bank), row);
    PUT(FCP_ROW_H(bank), row);
}

#define ROW(VBLOCK, PAGE) ((VBLOCK) * PAGES_PER_BLK + (PAGE))

void flash_issue_cmd(UINT32 const bank, UINT32 const sync) {
    (void)sync; /* every command completes at issue */
    PUT(FCP_BANK, REAL_BANK(bank));
    PUT(FCP_ISSUE, 0);
    jasmine_flash_command(REAL_BANK(bank));
}

void flash_finish(void) { jasmine_progress(); }
void flash_reset(void) {}
void flash_clear_irq(void) {
    memset(L->bsp_intr, 0, sizeof L->bsp_intr);
    L->freg[(INTR_BSP - FREG_BASE) / 4] = 0;
}

void flash_copy(UINT32 const bank, UINT32 const dst_row, UINT32 const src_row) {
    PUT(FCP_CMD, FC_COPYBACK);
    PUT(FCP_OPTION, FO_E | FO_B_W_DRDY);
    PUT(FCP_COL, 0);
    PUT(FCP_ROW_L(bank), src_row);
    PUT(FCP_ROW_H(bank), src_row);
    PUT(FCP_DST_ROW_L, dst_row);
    PUT(FCP_DST_ROW_H, dst_row);
    PUT(FCP_DST_COL, 0);
    flash_issue_cmd(bank, RETURN_ON_ISSUE);
}

void flash_erase(UINT32 const bank, UINT16 const vblk_offset) {
    PUT(FCP_CMD, FC_ERASE);
    PUT(FCP_OPTION, 0);
    PUT(FCP_ROW_L(bank), (UINT32)vblk_offset * PAGES_PER_VBLK);
    PUT(FCP_ROW_H(bank), (UINT32)vblk_offset * PAGES_PER_VBLK);
    flash_issue_cmd(bank, RETURN_WHEN_DONE);
}

void nand_page_read(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const buf_addr) {
    set_command(FC_COL_ROW_READ_OUT, FO_E, buf_addr, BYTES_PER_PAGE, 0, bank, ROW(vblock, page_num));
    flash_issue_cmd(bank, RETURN_WHEN_DONE);
}

void nand_page_ptread(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const sect_offset,
                      UINT32 const num_sectors, UINT32 const buf_addr, UINT32 const issue_flag) {
    set_command(FC_COL_ROW_READ_OUT, FO_E, buf_addr, num_sectors * BYTES_PER_SECTOR, sect_offset, bank,
                ROW(vblock, page_num));
    flash_issue_cmd(bank, issue_flag);
}

/* A read into the next read buffer, handed to the host when done. */
static void read_to_host(UINT32 bank, UINT32 row, UINT32 sect_offset, UINT32 num_sectors) {
    extern UINT32 g_ftl_read_buf_id;
    UINT32 buf = RD_BUF_PTR(g_ftl_read_buf_id);
    set_command(FC_COL_ROW_READ_OUT, FO_E | FO_B_SATA_R, buf, num_sectors * BYTES_PER_SECTOR, sect_offset, bank, row);
    g_ftl_read_buf_id = (g_ftl_read_buf_id + 1) % NUM_RD_BUFFERS;
    /* Wait while the read buffers are all full (the host is slow). */
    while (g_ftl_read_buf_id == GETREG(SATA_RBUF_PTR))
        ;
    flash_issue_cmd(bank, RETURN_ON_ISSUE);
}

void nand_page_read_to_host(UINT32 const bank, UINT32 const vblock, UINT32 const page_num) {
    read_to_host(bank, ROW(vblock, page_num), 0, SECTORS_PER_PAGE);
}

void nand_page_ptread_to_host(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const sect_offset,
                              UINT32 const num_sectors) {
    read_to_host(bank, ROW(vblock, page_num), sect_offset, num_sectors);
}

void nand_page_program(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const buf_addr) {
    set_command(FC_COL_ROW_IN_PROG, FO_E | FO_B_W_DRDY, buf_addr, BYTES_PER_PAGE, 0, bank, ROW(vblock, page_num));
    flash_issue_cmd(bank, RETURN_ON_ISSUE);
}

void nand_page_ptprogram(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const sect_offset,
                         UINT32 const num_sectors, UINT32 const buf_addr) {
    set_command(FC_COL_ROW_IN_PROG, FO_E | FO_B_W_DRDY, buf_addr, num_sectors * BYTES_PER_SECTOR, sect_offset, bank,
                ROW(vblock, page_num));
    flash_issue_cmd(bank, RETURN_ON_ISSUE);
}

/* A program from the next write buffer, which the host has filled. */
static void program_from_host(UINT32 bank, UINT32 row, UINT32 sect_offset, UINT32 num_sectors) {
    extern UINT32 g_ftl_write_buf_id;
    set_command(FC_COL_ROW_IN_PROG, FO_E | FO_B_SATA_W, WR_BUF_PTR(g_ftl_write_buf_id), num_sectors * BYTES_PER_SECTOR,
                sect_offset, bank, row);
    flash_issue_cmd(bank, RETURN_ON_ISSUE);
    g_ftl_write_buf_id = (g_ftl_write_buf_id + 1) % NUM_WR_BUFFERS;
}

void nand_page_program_from_host(UINT32 const bank, UINT32 const vblock, UINT32 const page_num) {
    program_from_host(bank, ROW(vblock, page_num), 0, SECTORS_PER_PAGE);
}

void nand_page_ptprogram_from_host(UINT32 const bank, UINT32 const vblock, UINT32 const page_num,
                                   UINT32 const sect_offset, UINT32 const num_sectors) {
    program_from_host(bank, ROW(vblock, page_num), sect_offset, num_sectors);
}

void nand_page_copyback(UINT32 const bank, UINT32 const src_vblock, UINT32 const src_page, UINT32 const dst_vblock,
                        UINT32 const dst_page) {
    flash_copy(bank, ROW(dst_vblock, dst_page), ROW(src_vblock, src_page));
}

/* The new data of sectors sect_offset .. is at dma_addr; the command port
 * takes the page's base (FCP_DMA_ADDR + FCP_DST_COL * 512 is the first
 * modified sector). The board's wrapper falls back to a read and a program
 * where its NAND cannot copy back between the two rows; nandlab's banks
 * are single-plane, so it always can. */
void nand_page_modified_copyback(UINT32 const bank, UINT32 const src_vblock, UINT32 const src_page,
                                 UINT32 const dst_vblock, UINT32 const dst_page, UINT32 const sect_offset,
                                 UINT32 dma_addr, UINT32 const dma_count) {
    UINT32 src_row = ROW(src_vblock, src_page), dst_row = ROW(dst_vblock, dst_page);
    PUT(FCP_CMD, FC_MODIFY_COPYBACK);
    PUT(FCP_OPTION, FO_E | FO_B_W_DRDY);
    PUT(FCP_DMA_ADDR, dma_addr - sect_offset * BYTES_PER_SECTOR);
    PUT(FCP_DMA_CNT, dma_count);
    PUT(FCP_COL, 0);
    PUT(FCP_ROW_L(bank), src_row);
    PUT(FCP_ROW_H(bank), src_row);
    PUT(FCP_DST_ROW_L, dst_row);
    PUT(FCP_DST_ROW_H, dst_row);
    PUT(FCP_DST_COL, sect_offset);
    flash_issue_cmd(bank, RETURN_ON_ISSUE);
}

void nand_block_erase(UINT32 const bank, UINT32 const vblock) { flash_erase(bank, (UINT16)vblock); }
void nand_block_erase_sync(UINT32 const bank, UINT32 const vblock) { flash_erase(bank, (UINT16)vblock); }
