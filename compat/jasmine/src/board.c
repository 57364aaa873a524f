/*
 * board.c — nandlab's Jasmine board: the nandlab_ftl_* entry points of
 * include/nandlab.h over the firmware's ftl_open / ftl_read / ftl_write /
 * ftl_flush, the board's memory map, the host side of the SATA buffers,
 * and the two guards against firmware that goes wrong (a watchdog on polls
 * without progress, a report on a fault outside the emulated memory).
 *
 * Design (docs/jasmine.md has the reasons):
 * - One board per process. The board's DRAM (DRAM_BASE, DRAM_SIZE bytes)
 *   and SRAM (SRAM_BASE) ranges are reserved at their board addresses,
 *   with a guard region on each side, once per process. One instance at
 *   a time holds the board: its memory is mapped there and the library's
 *   writable data (the firmware's globals) is its own. A power-on (format
 *   or mount) gives the instance fresh memory and the globals' initial
 *   values, so nothing but flash survives a power cycle. When a call
 *   comes for another instance (a crash campaign keeps several), the
 *   holder's memory is moved aside (mremap: pages move, nothing is
 *   copied) with a copy of its globals, and the caller's are put back.
 *   Instances therefore never run at the same time: the library exports
 *   nandlab_ftl_single_instance, and nandlab then runs them on one thread.
 * - Every flash command runs to completion when it is issued; a read the
 *   firmware addresses to the host (FO_B_SATA_R) or a read limit it moves
 *   (BM_STACK_RDSET) hands the read buffers to the host at once; a host
 *   write fills the write buffers before ftl_write is called.
 * - A layer error (an impossible command, a poll that never ends, host
 *   data that lost its identity) and a power loss leave the firmware by
 *   longjmp back to the entry point, which returns the error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "layer.h"

#ifndef JASMINE_NAME
#define JASMINE_NAME "jasmine"
#endif

/* Polls of one register returning one value, with nothing else happening
 * in between, after which the wait is declared endless. Every register
 * the layer emulates already holds its final value when it is read, so a
 * correct firmware never polls the same value twice in a row for long. */
#define POLL_LIMIT 1000000ULL

/* Guard regions around DRAM and SRAM, in bytes. */
#define GUARD_BYTES (16UL << 20)
#define SRAM_MAP_BYTES (128UL << 10)

struct jasmine_layer *volatile jasmine_layer;
struct jasmine_process *volatile jasmine_process;

/* The board's globals that firmware declares extern. */
UINT8 c_bank_map[NUM_BANKS_MAX];
UINT8 c_bank_rmap[NUM_BANKS_MAX];
UINT8 g_temp_mem[BYTES_PER_SECTOR];

struct jasmine_instance {
    nandlab_env env;
    int powered; /* formatted or mounted */
    /* While another instance holds the board: this one's DRAM and SRAM
     * (moved aside, not copied) and firmware globals. */
    void *dram, *sram;
    unsigned char *globals;
    struct jasmine_layer state;
};

/* ---- Errors ------------------------------------------------------------ */

_Noreturn void jasmine_fatal(int32_t code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(L->error_msg, sizeof L->error_msg, "jasmine layer (%s): ", L->entry ? L->entry : "?");
    if (n < 0 || (size_t)n >= sizeof L->error_msg) n = 0;
    vsnprintf(L->error_msg + n, sizeof L->error_msg - (size_t)n, fmt, ap);
    va_end(ap);
    L->error_code = code;
    longjmp(L->escape, 1);
}

/* A flash operation's result: power loss and failures leave the firmware. */
void jasmine_check_flash(int32_t code, const char *what) {
    if (code == NANDLAB_OK) return;
    if (code == NANDLAB_E_POWER_LOSS) jasmine_fatal(code, "power loss during %s", what);
    jasmine_fatal(code, "%s failed with nandlab error %d", what, (int)code);
}

/* ---- Watchdog ---------------------------------------------------------- */

void jasmine_progress(void) { L->poll_count = 0; }

static void describe_code(void *caller, char *out, size_t len) {
    Dl_info info;
    if (caller && dladdr(caller, &info) && info.dli_fbase) {
        unsigned long off = (unsigned long)((char *)caller - (char *)info.dli_fbase);
        if (info.dli_sname)
            snprintf(out, len, "code at library offset 0x%lx, after the exported symbol `%s`", off, info.dli_sname);
        else
            snprintf(out, len, "code at library offset 0x%lx", off);
    } else {
        snprintf(out, len, "code at %p", caller);
    }
}

void jasmine_poll(uint32_t addr, uint32_t value, void *caller) {
    L->polls++;
    if (addr == L->poll_addr && value == L->poll_value) {
        if (++L->poll_count >= POLL_LIMIT) {
            char where[160];
            describe_code(caller, where, sizeof where);
            jasmine_fatal(JASMINE_E_LAYER,
                          "busy wait that never ends: the firmware polls %s (0x%08x), which stays 0x%x, %llu times "
                          "with no other progress (%s); on the board this would hang",
                          jasmine_register_name(addr), addr, value, (unsigned long long)L->poll_count, where);
        }
    } else {
        L->poll_addr = addr;
        L->poll_value = value;
        L->poll_count = 1;
    }
}

/* ---- Memory map ------------------------------------------------------------ */

static unsigned long round_up_page(unsigned long n) {
    unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

static unsigned long dram_map_bytes(void) { return round_up_page(DRAM_SIZE); }

static int map_guard(unsigned long addr, unsigned long bytes, char *msg, size_t msg_len) {
    void *p = mmap((void *)addr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED || p != (void *)addr) {
        if (p != MAP_FAILED) munmap(p, bytes);
        snprintf(msg, msg_len,
                 "jasmine layer: cannot reserve the board's address range at 0x%08lx (%lu bytes): it is taken in "
                 "this process",
                 addr, bytes);
        return -1;
    }
    return 0;
}

/* Reserve the board's DRAM and SRAM ranges with a guard region on each
 * side (all inaccessible until an instance holds the board). */
static int reserve_board_memory(char *msg, size_t msg_len) {
    if (P->guards_mapped) return 0;
    if (map_guard(DRAM_BASE - GUARD_BYTES, dram_map_bytes() + 2 * GUARD_BYTES, msg, msg_len)) return -1;
    if (map_guard(SRAM_BASE - GUARD_BYTES, SRAM_MAP_BYTES + 2 * GUARD_BYTES, msg, msg_len)) {
        munmap((void *)(DRAM_BASE - GUARD_BYTES), dram_map_bytes() + 2 * GUARD_BYTES);
        return -1;
    }
    P->guards_mapped = 1;
    return 0;
}

/* Fresh (zero) memory at a board address: power-on. */
static void map_fresh(unsigned long addr, unsigned long bytes) {
    void *p = mmap((void *)addr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) jasmine_fatal(JASMINE_E_LAYER, "cannot map the board's memory at 0x%08lx", addr);
    /* Transparent huge pages where the kernel offers them (a hint; no
     * harm if refused): the firmware's map lookups land all over DRAM,
     * and with 4 KiB pages most of them missed the TLB. */
    madvise(p, bytes, MADV_HUGEPAGE);
}

/* Move the memory at a board address aside (its pages, not a copy); the
 * board address becomes inaccessible. */
static void *move_aside(unsigned long addr, unsigned long bytes) {
    void *spot = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (spot == MAP_FAILED) jasmine_fatal(JASMINE_E_LAYER, "cannot set the board's memory aside: out of address space");
    void *moved = mremap((void *)addr, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, spot);
    if (moved == MAP_FAILED) jasmine_fatal(JASMINE_E_LAYER, "cannot move the board's memory at 0x%08lx aside", addr);
    if (mmap((void *)addr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) ==
        MAP_FAILED)
        jasmine_fatal(JASMINE_E_LAYER, "cannot guard the board's memory at 0x%08lx", addr);
    return moved;
}

static void move_back(void *from, unsigned long addr, unsigned long bytes) {
    if (mremap(from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)addr) == MAP_FAILED)
        jasmine_fatal(JASMINE_E_LAYER, "cannot move memory back to the board at 0x%08lx", addr);
}

/* ---- A fault outside the emulated memory ------------------------------- */

static void put_str(const char *s) {
    ssize_t ignored = write(2, s, strlen(s));
    (void)ignored;
}

static void put_hex(unsigned long v) {
    char buf[19] = "0x";
    for (int i = 0; i < 16; i++) buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 15];
    buf[18] = 0;
    put_str(buf);
}

static void on_fault(int sig, siginfo_t *info, void *ucontext) {
    unsigned long addr = (unsigned long)info->si_addr;
    struct sigaction *previous = sig == SIGSEGV ? &P->previous_segv : &P->previous_bus;
    if (addr < (1UL << 32)) {
        put_str("nandlab jasmine: the firmware accessed address ");
        put_hex(addr);
        put_str(" outside the emulated board memory (DRAM ");
        put_hex(DRAM_BASE);
        put_str("..");
        put_hex(DRAM_BASE + DRAM_SIZE);
        put_str(", SRAM ");
        put_hex(SRAM_BASE);
        put_str("..");
        put_hex(SRAM_BASE + SRAM_SIZE);
        put_str(") in ");
        put_str(P && P->in_call && L && L->entry ? L->entry : "no firmware call");
        put_str("\n");
    }
    /* Let the previous handler (or the default action) deal with it. */
    if (previous->sa_flags & SA_SIGINFO) {
        if (previous->sa_sigaction) {
            previous->sa_sigaction(sig, info, ucontext);
            return;
        }
    } else if (previous->sa_handler != SIG_DFL && previous->sa_handler != SIG_IGN) {
        previous->sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);
}

static void install_fault_handlers(void) {
    if (P->handlers_installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &P->previous_segv);
    sigaction(SIGBUS, &sa, &P->previous_bus);
    P->handlers_installed = 1;
}

/* ---- Fresh firmware globals at every power-on ------------------------------ */

static int find_own_data(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    unsigned long self = (unsigned long)arg;
    unsigned long relro_end = 0, w_start = 0, w_file_end = 0, w_mem_end = 0;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        unsigned long start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && self >= start && self < start + ph->p_memsz) mine = 1;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W)) {
            w_start = start;
            w_file_end = start + ph->p_filesz;
            w_mem_end = start + ph->p_memsz;
        }
        if (ph->p_type == PT_GNU_RELRO) relro_end = round_up_page(start + ph->p_memsz);
    }
    if (!mine || !w_start) return 0;
    if (relro_end > w_start && relro_end <= w_file_end) w_start = relro_end;
    P->data_start = (unsigned char *)w_start;
    P->data_end = (unsigned char *)w_file_end;
    P->bss_end = (unsigned char *)w_mem_end;
    return 1;
}

__attribute__((constructor)) static void layer_init(void) {
    struct jasmine_process *process = calloc(1, sizeof *process);
    if (!process) abort();
    jasmine_process = process;
    dl_iterate_phdr(find_own_data, (void *)(unsigned long)&layer_init);
    if (!process->data_start || process->data_end < process->data_start) abort();
    size_t n = (size_t)(process->data_end - process->data_start);
    process->data_initial = malloc(n ? n : 1);
    if (!process->data_initial) abort();
    memcpy(process->data_initial, process->data_start, n);
}

/* The library is unloaded: give the board's address ranges and the fault
 * handlers back, so that a later load maps them afresh and no handler
 * points into unloaded code. */
__attribute__((destructor)) static void layer_fini(void) {
    if (P->handlers_installed) {
        sigaction(SIGSEGV, &P->previous_segv, NULL);
        sigaction(SIGBUS, &P->previous_bus, NULL);
        P->handlers_installed = 0;
    }
    if (P->guards_mapped) {
        munmap((void *)(DRAM_BASE - GUARD_BYTES), dram_map_bytes() + 2 * GUARD_BYTES);
        munmap((void *)(SRAM_BASE - GUARD_BYTES), SRAM_MAP_BYTES + 2 * GUARD_BYTES);
        P->guards_mapped = 0;
    }
}

/* Overwrite the library's writable data (the firmware's and the board's
 * globals): from `saved` (.data and .bss), or the initial .data and a zero
 * .bss when `saved` is NULL. The two layer pointers in it are kept. */
static void load_globals(const unsigned char *saved) {
    struct jasmine_layer *keep_layer = jasmine_layer;
    struct jasmine_process *keep = jasmine_process;
    if (saved) {
        memcpy(keep->data_start, saved, (size_t)(keep->bss_end - keep->data_start));
    } else {
        memcpy(keep->data_start, keep->data_initial, (size_t)(keep->data_end - keep->data_start));
        memset(keep->data_end, 0, (size_t)(keep->bss_end - keep->data_end));
    }
    jasmine_process = keep;
    jasmine_layer = keep_layer;
}

/* Make `inst` hold the board: the current holder's memory and globals are
 * set aside; `inst` gets fresh ones (power-on) or its own back. */
static void hold_board(struct jasmine_instance *inst, int fresh) {
    struct jasmine_instance *cur = P->active;
    if (cur && cur != inst) {
        size_t n = (size_t)(P->bss_end - P->data_start);
        if (!cur->globals && !(cur->globals = malloc(n ? n : 1)))
            jasmine_fatal(JASMINE_E_LAYER, "out of memory setting a board aside");
        memcpy(cur->globals, P->data_start, n);
        cur->dram = move_aside(DRAM_BASE, dram_map_bytes());
        cur->sram = move_aside(SRAM_BASE, SRAM_MAP_BYTES);
        P->active = NULL;
    }
    if (fresh) {
        if (inst->dram) munmap(inst->dram, dram_map_bytes());
        if (inst->sram) munmap(inst->sram, SRAM_MAP_BYTES);
        inst->dram = inst->sram = NULL;
        map_fresh(DRAM_BASE, dram_map_bytes());
        map_fresh(SRAM_BASE, SRAM_MAP_BYTES);
        load_globals(NULL);
    } else if (P->active != inst) {
        move_back(inst->dram, DRAM_BASE, dram_map_bytes());
        move_back(inst->sram, SRAM_BASE, SRAM_MAP_BYTES);
        inst->dram = inst->sram = NULL;
        load_globals(inst->globals);
    }
    P->active = inst;
}

/* ---- The host side of the SATA buffers --------------------------------- */

/* A host write: the host fills consecutive write buffers (one page each,
 * the first from sector lba % SECTORS_PER_PAGE) before the firmware runs. */
static void host_fill_write_buffers(const nandlab_request *req) {
    uint32_t offset = (uint32_t)(req->lba % SECTORS_PER_PAGE), done = 0;
    uint32_t pages = (offset + req->sectors + SECTORS_PER_PAGE - 1) / SECTORS_PER_PAGE;
    if (pages >= NUM_WR_BUFFERS)
        jasmine_fatal(JASMINE_E_LAYER,
                      "a host write of %u sectors needs %u write buffers; the firmware has %u", req->sectors, pages,
                      (unsigned)NUM_WR_BUFFERS);
    while (done < req->sectors) {
        uint32_t count = MIN(SECTORS_PER_PAGE - offset, req->sectors - done);
        unsigned long addr = WR_BUF_PTR(L->wbuf_ptr) + (unsigned long)offset * BYTES_PER_SECTOR;
        uint32_t sector = jasmine_dram_sector(addr);
        jasmine_shadow_check(sector, count, "a SATA write buffer");
        jasmine_shadow_in(sector, req->buf, done, count, "copying host data into a write buffer");
        memset(&L->tags[sector], TAG_HOST, count);
        done += count;
        offset = 0;
        L->wbuf_ptr = (L->wbuf_ptr + 1) % NUM_WR_BUFFERS;
    }
}

/* What DRAM sector `sector` gives the host at request sector `i`: a host
 * sector, erased or zero bytes; anything else stops the run. */
static inline uint8_t take_kind(uint32_t sector, uint32_t i) {
    uint8_t kind = jasmine_sector_kind(L->tags, sector);
    if (kind == TAG_BYTES)
        jasmine_fatal(JASMINE_E_LAYER,
                      "the host read of sector %llu got DRAM 0x%08lx, which holds bytes the firmware wrote, not a "
                      "host sector (neither all 0x00 nor all 0xFF)",
                      (unsigned long long)(L->host_lba + i), DRAM_BASE + (unsigned long)sector * BYTES_PER_SECTOR);
    return kind;
}

/* Give `count` (at most a page) DRAM sectors from `sector` on to the host
 * at request sector `i`, a run of sectors of one kind per buffer call. */
static void host_take_sectors(uint32_t sector, uint32_t i, uint32_t count) {
    const nandlab_flash *f = L->flash;
    const uint8_t *tags = L->tags;
    uint32_t k = 0;
    while (k < count) {
        uint8_t kind = take_kind(sector + k, i + k);
        uint32_t run = 1;
        while (k + run < count && (tags[sector + k + run] == kind || take_kind(sector + k + run, i + k + run) == kind))
            run++;
        if (kind == TAG_HOST)
            jasmine_shadow_out(L->host_buf, i + k, sector + k, run, "a read buffer to the host");
        else if (kind == TAG_ERASED)
            jasmine_check_flash(f->buf_copy(f->ctx, L->host_buf, i + k, L->erased, 0, run),
                                "an erased sector to the host");
        else
            jasmine_check_flash(f->buf_zero(f->ctx, L->host_buf, i + k, run), "a zero sector to the host");
        k += run;
    }
}

/* The read limit moved to `limit`: the host takes every read buffer up to
 * it, each holding the next page's part of the request. */
void jasmine_host_take_read_buffers(uint32_t limit) {
    if (limit >= NUM_RD_BUFFERS)
        jasmine_fatal(JASMINE_E_LAYER, "read buffer limit %u is beyond the %u read buffers", limit,
                      (unsigned)NUM_RD_BUFFERS);
    while (L->rbuf_ptr != limit) {
        if (L->host_done >= L->host_sectors)
            jasmine_fatal(JASMINE_E_LAYER,
                          "the firmware handed read buffer %u to the host, but the host asked for no more sectors",
                          L->rbuf_ptr);
        uint32_t offset = L->host_done == 0 ? (uint32_t)(L->host_lba % SECTORS_PER_PAGE) : 0;
        uint32_t count = MIN(SECTORS_PER_PAGE - offset, L->host_sectors - L->host_done);
        uint32_t sector = jasmine_dram_sector(RD_BUF_PTR(L->rbuf_ptr) + (unsigned long)offset * BYTES_PER_SECTOR);
        jasmine_shadow_check(sector, count, "a SATA read buffer");
        host_take_sectors(sector, L->host_done, count);
        L->host_done += count;
        L->rbuf_ptr = (L->rbuf_ptr + 1) % NUM_RD_BUFFERS;
    }
}

/* ---- Entry points ------------------------------------------------------ */

uint32_t nandlab_ftl_abi_version(void) { return NANDLAB_ABI_VERSION; }

/* Optional symbol: a Jasmine firmware takes no options. */
const nandlab_option_doc *nandlab_ftl_options(size_t *count) {
    static const nandlab_option_doc none[1] = {{NULL, NULL, NULL}};
    *count = 0;
    return none;
}

/* Optional symbol: one instance of this library per process at a time
 * (nandlab runs its crash campaigns on one thread). */
uint32_t nandlab_ftl_single_instance(void) { return 1; }

static int check_geometry(const nandlab_env *env, char *msg, size_t msg_len) {
    const nandlab_geometry *g = &env->geometry;
    struct {
        const char *field;
        uint64_t got, want;
    } checks[] = {
        {"banks (channels x chips_per_channel x dies_per_chip)", (uint64_t)g->channels * g->chips_per_channel * g->dies_per_chip, NUM_BANKS},
        {"planes_per_die", g->planes_per_die, 1},
        {"blocks_per_plane", g->blocks_per_plane, VBLKS_PER_BANK},
        {"pages_per_block", g->pages_per_block, PAGES_PER_VBLK},
        {"sector_size_bytes", g->sector_size_bytes, BYTES_PER_SECTOR},
        {"sectors_per_page", g->sectors_per_page, SECTORS_PER_PAGE},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        if (checks[i].got != checks[i].want) {
            snprintf(msg, msg_len,
                     "jasmine layer: the firmware was built for %s = %llu, the device has %llu (rebuild it for this "
                     "geometry)",
                     checks[i].field, (unsigned long long)checks[i].want, (unsigned long long)checks[i].got);
            return -1;
        }
    }
    if (env->logical_sectors > (uint64_t)NUM_LSECTORS) {
        snprintf(msg, msg_len, "jasmine layer: the device exports %llu logical sectors, the firmware serves %llu",
                 (unsigned long long)env->logical_sectors, (unsigned long long)NUM_LSECTORS);
        return -1;
    }
    if (g->oob_size_bytes < 1) {
        snprintf(msg, msg_len, "jasmine layer: the layer keeps one OOB byte per page; oob_size_bytes is 0");
        return -1;
    }
    return 0;
}

void *nandlab_ftl_create(const nandlab_env *env, const nandlab_option *options, size_t option_count, char *msg,
                         size_t msg_len) {
    if (option_count > 0) {
        snprintf(msg, msg_len, "jasmine layer: unknown option `%s` (a Jasmine firmware takes no options)",
                 options[0].key);
        return NULL;
    }
    if (check_geometry(env, msg, msg_len) || reserve_board_memory(msg, msg_len)) return NULL;
    install_fault_handlers();
    struct jasmine_instance *inst = calloc(1, sizeof *inst);
    if (inst) inst->state.page_kind = calloc(KIND_BYTES(NL_PAGES), 1);
    if (!inst || !inst->state.page_kind) {
        free(inst);
        snprintf(msg, msg_len, "jasmine layer: out of memory");
        return NULL;
    }
    inst->env = *env;
    return inst;
}

void nandlab_ftl_destroy(void *ftl) {
    struct jasmine_instance *inst = ftl;
    if (!inst) return;
    if (P->active == inst) P->active = NULL; /* its memory stays until the next power-on maps over it */
    if (inst->dram) munmap(inst->dram, dram_map_bytes());
    if (inst->sram) munmap(inst->sram, SRAM_MAP_BYTES);
    free(inst->globals);
    free(inst->state.page_kind);
    free(inst);
}

void nandlab_ftl_info(const void *ftl, nandlab_info *info) {
    (void)ftl;
    info->name = JASMINE_NAME;
    info->guarantee = NANDLAB_GUARANTEE_BASELINE;
    info->oob_bytes = 1;
}

/* The board powers on: fresh DRAM, SRAM, registers and globals; the
 * layer's DRAM shadow allocated in nandlab's device DRAM. */
static void power_on(struct jasmine_instance *inst) {
    const nandlab_flash *f = L->flash;
    hold_board(inst, 1);
    inst->powered = 1;
    memset(L->tags, TAG_ZERO, sizeof L->tags); /* fresh DRAM reads as zeros */
    memset(L->page_kind, KIND_UNKNOWN, KIND_BYTES(NL_PAGES));
    memset(L->freg, 0, sizeof L->freg);
    memset(L->mreg, 0, sizeof L->mreg);
    memset(L->bsreg, 0, sizeof L->bsreg);
    memset(L->bsp_intr, 0, sizeof L->bsp_intr);
    /* The board's start-up enables interrupts before it calls ftl_open. */
    L->irq_enabled = 1;
    L->in_isr = 0;
    L->rbuf_ptr = L->wbuf_ptr = 0;
    L->host_sectors = L->host_done = 0;
    L->poll_count = 0;
    for (int i = 0; i < NUM_BANKS_MAX; i++) c_bank_map[i] = c_bank_rmap[i] = (UINT8)(i < NUM_BANKS ? i : 0xFF);
    jasmine_flash_reset_state();
    /* Shadow as much DRAM as nandlab's DRAM budget allows, keeping two
     * pages for the staging and erased buffers. */
    uint64_t budget_sectors = f->dram_budget_bytes(f->ctx) / BYTES_PER_SECTOR;
    uint64_t room = budget_sectors > 2 * SECTORS_PER_PAGE ? budget_sectors - 2 * SECTORS_PER_PAGE : 0;
    L->shadow_sectors = (uint32_t)MIN((uint64_t)DRAM_SECTORS, room);
    if (L->shadow_sectors < SECTORS_PER_PAGE)
        jasmine_fatal(NANDLAB_E_DRAM, "nandlab's DRAM budget (%llu bytes) is too small for the board's buffers",
                      (unsigned long long)f->dram_budget_bytes(f->ctx));
    L->shadow_chunks = (L->shadow_sectors + SHADOW_CHUNK - 1) / SHADOW_CHUNK;
    for (uint32_t c = 0; c < L->shadow_chunks; c++)
        jasmine_check_flash(f->buf_alloc(f->ctx, MIN(SHADOW_CHUNK, L->shadow_sectors - c * SHADOW_CHUNK), &L->shadow[c]),
                            "allocating the DRAM shadow");
    jasmine_check_flash(f->buf_alloc(f->ctx, SECTORS_PER_PAGE, &L->staging), "allocating the staging page");
    jasmine_check_flash(f->buf_alloc(f->ctx, SECTORS_PER_PAGE, &L->erased), "allocating the erased page");
}

enum call { CALL_FORMAT, CALL_MOUNT, CALL_READ, CALL_WRITE, CALL_FLUSH };

static const char *call_entry(enum call c) {
    switch (c) {
    case CALL_FORMAT:
    case CALL_MOUNT: return "ftl_open";
    case CALL_READ: return "ftl_read";
    case CALL_WRITE: return "ftl_write";
    default: return "ftl_flush";
    }
}

static void run_body(struct jasmine_instance *inst, enum call c, const nandlab_request *req) {
    if (c != CALL_FORMAT && c != CALL_MOUNT) hold_board(inst, 0);
    switch (c) {
    case CALL_FORMAT:
        power_on(inst);
        /* The board as the installer leaves it: a scan list in each bank. */
        jasmine_write_scan_lists();
        ftl_open();
        break;
    case CALL_MOUNT:
        power_on(inst);
        ftl_open();
        break;
    case CALL_READ:
        L->host_buf = req->buf;
        L->host_lba = req->lba;
        L->host_sectors = req->sectors;
        L->host_done = 0;
        ftl_read((UINT32)req->lba, req->sectors);
        if (L->host_done != L->host_sectors)
            jasmine_fatal(JASMINE_E_LAYER,
                          "ftl_read returned after handing %u of the %u sectors asked to the host (on the board the "
                          "host would wait forever)",
                          L->host_done, L->host_sectors);
        L->host_sectors = L->host_done = 0;
        break;
    case CALL_WRITE:
        host_fill_write_buffers(req);
        ftl_write((UINT32)req->lba, req->sectors);
        break;
    case CALL_FLUSH: ftl_flush(); break;
    }
}

static int32_t run(void *ftl, const nandlab_flash *flash, enum call c, const nandlab_request *req, char *msg,
                   size_t msg_len) {
    struct jasmine_instance *inst = ftl;
    if (P->in_call) {
        snprintf(msg, msg_len,
                 "jasmine layer: a call while another is in progress (the board exists once per process: one "
                 "thread at a time)");
        return JASMINE_E_LAYER;
    }
    if (c != CALL_FORMAT && c != CALL_MOUNT && !inst->powered) {
        snprintf(msg, msg_len, "jasmine layer: %s before the board was powered on (format or mount)", call_entry(c));
        return JASMINE_E_LAYER;
    }
    P->in_call = 1;
    jasmine_layer = &inst->state;
    L->flash = flash;
    L->entry = call_entry(c);
    L->error_code = NANDLAB_OK;
    L->poll_count = 0;
    L->in_isr = 0; /* an entry point never starts inside ftl_isr (a power loss may have left one) */
    if (setjmp(L->escape) == 0) run_body(inst, c, req);
    L->flash = NULL;
    P->in_call = 0;
    if (L->error_code != NANDLAB_OK) snprintf(msg, msg_len, "%s", L->error_msg);
    return L->error_code;
}

int32_t nandlab_ftl_format(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len) {
    return run(ftl, flash, CALL_FORMAT, NULL, msg, msg_len);
}

int32_t nandlab_ftl_mount(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len) {
    return run(ftl, flash, CALL_MOUNT, NULL, msg, msg_len);
}

int32_t nandlab_ftl_read(void *ftl, const nandlab_flash *flash, const nandlab_request *req, char *msg,
                         size_t msg_len) {
    return run(ftl, flash, CALL_READ, req, msg, msg_len);
}

int32_t nandlab_ftl_write(void *ftl, const nandlab_flash *flash, const nandlab_request *req, uint32_t *durability,
                          char *msg, size_t msg_len) {
    /* The board acknowledges a write when its data is in the write
     * buffers; it is durable after ftl_flush. */
    *durability = NANDLAB_VOLATILE;
    return run(ftl, flash, CALL_WRITE, req, msg, msg_len);
}

int32_t nandlab_ftl_trim(void *ftl, const nandlab_flash *flash, uint64_t lba, uint64_t sectors, char *msg,
                         size_t msg_len) {
    (void)ftl;
    (void)flash;
    snprintf(msg, msg_len,
             "jasmine layer: the Jasmine FTL API has no trim (ATA DATA SET MANAGEMENT is not passed to the FTL); "
             "trim of %llu sectors at %llu refused",
             (unsigned long long)sectors, (unsigned long long)lba);
    return JASMINE_E_LAYER;
}

int32_t nandlab_ftl_flush(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len) {
    return run(ftl, flash, CALL_FLUSH, NULL, msg, msg_len);
}

int32_t nandlab_ftl_emergency_flush(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len) {
    return run(ftl, flash, CALL_FLUSH, NULL, msg, msg_len);
}

int32_t nandlab_ftl_idle(void *ftl, const nandlab_flash *flash, uint32_t *outcome, char *msg, size_t msg_len) {
    (void)ftl;
    (void)flash;
    (void)msg;
    (void)msg_len;
    *outcome = NANDLAB_IDLE_NOTHING;
    return NANDLAB_OK;
}

/* A clean power-off: the board's firmware has no shutdown hook; the SATA
 * layer flushes (STANDBY IMMEDIATE / FLUSH CACHE call ftl_flush). */
int32_t nandlab_ftl_shutdown(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len) {
    return run(ftl, flash, CALL_FLUSH, NULL, msg, msg_len);
}

size_t nandlab_ftl_stats(const void *ftl, nandlab_stat *stats, size_t capacity) {
    const struct jasmine_layer *st = &((const struct jasmine_instance *)ftl)->state;
    nandlab_stat all[] = {
        {"jasmine_flash_commands", (double)st->flash_commands},
        {"jasmine_host_pages_programmed", (double)st->host_pages_programmed},
        {"jasmine_meta_pages_programmed", (double)st->meta_pages_programmed},
        {"jasmine_register_polls", (double)st->polls},
        {"jasmine_interrupts", (double)st->interrupts},
        {"jasmine_modified_copybacks", (double)st->modified_copybacks},
    };
    size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n && i < capacity; i++) stats[i] = all[i];
    return n;
}

/* The board's linker script defines size_of_firmware_image, an absolute
 * symbol whose address is the firmware image's size in bytes; an FTL puts
 * its format mark in block 0 after the image. nandlab keeps no image in
 * flash; the layer says 32 KiB (16 pages of BYTES_PER_FW_PAGE). */
#define STRINGIFY(x) #x
#define SET_SYMBOL(name, value) __asm__(".globl " #name "\n.set " #name ", " STRINGIFY(value))
SET_SYMBOL(size_of_firmware_image, JASMINE_FIRMWARE_IMAGE_BYTES);

/* ---- The CPU's interrupt masks ------------------------------------------- */

/* disable_irq returns 1 if IRQs were already disabled, else 0, as the
 * board's routine does. The flash interrupt is an IRQ; FIQ is the SATA
 * controller's, which the layer plays itself, so its mask changes nothing. */
UINT32 disable_irq(void) {
    UINT32 was_disabled = !L->irq_enabled;
    L->irq_enabled = 0;
    return was_disabled;
}
void enable_irq(void) {
    L->irq_enabled = 1;
    jasmine_deliver_interrupt();
}
UINT32 disable_fiq(void) { return 0; }
void enable_fiq(void) {}
void enable_interrupt(void) { enable_irq(); }
void disable_interrupt(void) { (void)disable_irq(); }

/* ---- Board functions with nothing to do in nandlab ---------------------- */

void delay(UINT32 const count) { (void)count; }
void led(BOOL32 on) { (void)on; }
void led_blink(void) {}
void start_interval_measurement(UINT32 const timer, UINT32 const prescale) {
    (void)timer;
    (void)prescale;
}
void start_timer(UINT32 const timer, UINT32 const prescale, UINT32 const init_val) {
    (void)timer;
    (void)prescale;
    (void)init_val;
}
void send_status_to_host(UINT32 const err_code) { (void)err_code; }

#if defined(JASMINE_UART) && JASMINE_UART
void uart_init(void) {}
void uart_print(const char *string) { fprintf(stderr, "uart: %s\n", string); }
void uart_print_32(UINT32 num) { fprintf(stderr, "uart: %u\n", num); }
void uart_print_hex(UINT32 num) { fprintf(stderr, "uart: 0x%x\n", num); }
void uart_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("uart: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
#endif
