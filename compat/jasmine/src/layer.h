/* layer.h — the internals of nandlab's Jasmine layer, shared by its C
 * files (board.c: entry points, memory map, host interface, watchdog;
 * flash.c: registers and flash commands; mem.c: the memory utility
 * functions and the payload tags of DRAM sectors). See docs/jasmine.md. */
#ifndef JASMINE_LAYER_H
#define JASMINE_LAYER_H

#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "nandlab.h"
#include "jasmine.h"

/* The error code of everything the layer itself reports (a firmware
 * doing what the board cannot do, a poll that never ends, host data that
 * lost its identity): not a flash error code, so nandlab shows the
 * message as the FTL's failure. */
#define JASMINE_E_LAYER 900

/* The firmware image's size the layer reports (size_of_firmware_image). */
#define JASMINE_FIRMWARE_IMAGE_BYTES 0x8000

#define DRAM_SECTORS (DRAM_SIZE / BYTES_PER_SECTOR)
#define SHADOW_CHUNK SECTORS_PER_PAGE
#define SHADOW_CHUNKS_MAX ((DRAM_SECTORS + SHADOW_CHUNK - 1) / SHADOW_CHUNK)
#define NL_PAGES ((uint64_t)NUM_BANKS * VBLKS_PER_BANK * PAGES_PER_VBLK)

/* What a DRAM sector holds (one byte per sector). TAG_ERASED and TAG_ZERO
 * are bytes the layer knows without reading them: it wrote them itself
 * (mem_set_dram, a read of an erased page, a power-on's fresh DRAM) and has
 * seen no store to the sector since. A read of never-written sectors
 * (mem_set_dram of a read buffer to 0xFF) thus goes to the host without
 * the 512 bytes of each sector being compared. */
#define TAG_BYTES 0  /* bytes the firmware wrote: read them to know */
#define TAG_HOST 1   /* a host sector: its identity is in the shadow buffer */
#define TAG_ERASED 2 /* all 0xFF */
#define TAG_ZERO 3   /* all 0x00 */

/* What a flash page holds, as the layer records it in the page's first
 * OOB byte (Jasmine firmware never writes OOB) and caches in page_kind. */
#define KIND_UNKNOWN 0 /* not looked up since this power-on */
#define KIND_ERASED 0xFF
#define KIND_HOST 1
#define KIND_META 2
/* page_kind packs four pages a byte, two bits each (the kind's low two
 * bits: UNKNOWN 0, HOST 1, META 2, ERASED 3), so that the lookup every
 * flash command makes (a random page on host reads) lands in 1 MiB for
 * vst-jasmine's 4 Mi pages instead of 4 MiB, and mostly in cache. */
#define KIND_BYTES(PAGES) (((PAGES) + 3) / 4)
static inline uint8_t kind_get(const uint8_t *kinds, uint64_t page) {
    uint8_t code = (uint8_t)((kinds[page >> 2] >> ((page & 3) * 2)) & 3);
    return code == 3 ? KIND_ERASED : code;
}
static inline void kind_set(uint8_t *kinds, uint64_t page, uint8_t kind) {
    unsigned shift = (unsigned)(page & 3) * 2;
    kinds[page >> 2] = (uint8_t)((kinds[page >> 2] & ~(3u << shift)) | ((kind & 3u) << shift));
}

/* The register files (byte offsets from each base). */
#define FREG_BYTES 0x800
#define MREG_BYTES 0x40
#define BSREG_BYTES 0x300

struct jasmine_instance;

/* The board as one instance sees it: its registers, the tags of its DRAM
 * sectors, its page kinds, its host side, the call in progress. The
 * instance holding the board is the one `jasmine_layer` points to. */
struct jasmine_layer {
    /* The call in progress. */
    const nandlab_flash *flash;
    jmp_buf escape;
    int32_t error_code;
    char error_msg[NANDLAB_MSG_BYTES];
    const char *entry; /* the firmware entry point running ("ftl_write") */

    /* Device DRAM in nandlab: host identities of DRAM sectors. */
    /* The shadow is one nandlab buffer per DRAM page (SHADOW_CHUNK
     * sectors, the last one shorter): a buffer's sector ranges are found
     * by walking its runs, so one buffer for all of DRAM made every copy
     * cost the number of runs of the whole DRAM. */
    uint64_t shadow[SHADOW_CHUNKS_MAX];
    uint32_t shadow_chunks;
    uint64_t staging, erased;
    uint32_t shadow_sectors;
    uint8_t tags[DRAM_SECTORS];
    uint8_t *page_kind; /* NL_PAGES entries of two bits (kind_get, kind_set) */

    /* Registers. */
    uint32_t freg[FREG_BYTES / 4];
    uint32_t mreg[MREG_BYTES / 4];
    uint32_t bsreg[BSREG_BYTES / 4];
    uint8_t bsp_intr[NUM_BANKS_MAX];

    /* The CPU's IRQ state (disable_irq / enable_irq), and whether the
     * firmware's ftl_isr is running (interrupts are masked meanwhile). */
    uint8_t irq_enabled, in_isr;

    /* The host side of the SATA buffers. */
    uint64_t host_buf;  /* request buffer of the host read in progress */
    uint64_t host_lba;  /* first sector of that request */
    uint32_t host_sectors, host_done; /* sectors asked, delivered */
    uint32_t rbuf_ptr;  /* next read buffer the host takes */
    uint32_t wbuf_ptr;  /* next write buffer the host fills */

    /* Watchdog on polls without progress. */
    uint32_t poll_addr, poll_value;
    uint64_t poll_count;

    /* Statistics. */
    uint64_t flash_commands, host_pages_programmed, meta_pages_programmed, polls, interrupts,
        modified_copybacks;
};

/* What exists once per process (board.c). */
struct jasmine_process {
    int guards_mapped, handlers_installed, in_call;
    struct sigaction previous_segv, previous_bus;
    /* The library's writable data: .data (start .. end) and .bss (end ..
     * bss_end), and the bytes of .data when the library was loaded. */
    unsigned char *data_start, *data_end, *bss_end;
    unsigned char *data_initial;
    struct jasmine_instance *active; /* the instance holding the board */
};

/* Both live on the heap; these pointers are the layer's only globals in
 * the library's writable data, volatile so that restoring that data
 * (board.c) can put them back. */
extern struct jasmine_layer *volatile jasmine_layer;
extern struct jasmine_process *volatile jasmine_process;
#define L (jasmine_layer)
#define P (jasmine_process)

/* board.c */
_Noreturn void jasmine_fatal(int32_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jasmine_check_flash(int32_t code, const char *what);
void jasmine_progress(void);
void jasmine_poll(uint32_t addr, uint32_t value, void *caller);
void jasmine_host_take_read_buffers(uint32_t limit);
const char *jasmine_register_name(uint32_t addr);

/* flash.c */
void jasmine_flash_reset_state(void);
void jasmine_flash_command(uint32_t rbank);
void jasmine_deliver_interrupt(void);
void jasmine_write_scan_lists(void);

/* mem.c */
int jasmine_in_dram(unsigned long addr, unsigned long bytes);
int jasmine_in_sram(unsigned long addr, unsigned long bytes);
void jasmine_tag_bytes(unsigned long addr, unsigned long bytes);
void jasmine_tag_fill(unsigned long addr, unsigned long bytes, unsigned char byte);
/* What DRAM sector `sector` holds: TAG_HOST, TAG_ERASED, TAG_ZERO, or
 * TAG_BYTES for bytes that are neither all 0xFF nor all 0x00 (the bytes
 * are read only when the tag does not already say). */
uint8_t jasmine_sector_kind_of_bytes(uint32_t sector);
static inline uint8_t jasmine_sector_kind(const uint8_t *tags, uint32_t sector) {
    uint8_t tag = tags[sector];
    return tag != TAG_BYTES ? tag : jasmine_sector_kind_of_bytes(sector);
}
uint32_t jasmine_dram_sector(unsigned long addr);
void jasmine_shadow_check(uint32_t sector, uint32_t count, const char *what);
/* Host identities moved between the shadow (DRAM sectors) and a nandlab
 * buffer, split at the shadow's chunks; `jasmine_shadow_move` has
 * memmove semantics. */
void jasmine_shadow_in(uint32_t sector, uint64_t src, uint32_t src_at, uint32_t n, const char *what);
void jasmine_shadow_out(uint64_t dst, uint32_t dst_at, uint32_t sector, uint32_t n, const char *what);
void jasmine_shadow_move(uint32_t ds, uint32_t ss, uint32_t n, const char *what);

#endif /* JASMINE_LAYER_H */
