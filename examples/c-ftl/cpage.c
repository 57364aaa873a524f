/*
 * cpage: a page-mapped FTL with greedy garbage collection, written in C
 * against include/nandlab.h.
 *
 * - Mapping: one uint32_t per logical page (lpn -> ppn), a valid bit per
 *   physical page, the logical page each physical page was last programmed
 *   with (read by GC only), a valid-page count per block, in device DRAM.
 *   nandlab_ftl_prefetch warms the map entries of requests to come, then
 *   the state of the pages they point at.
 * - Allocation: a host write frontier per plane, planes taken round robin;
 *   a GC frontier per plane; a free-block stack per plane.
 * - Garbage collection (greedy): when a plane is down to `gc_free_blocks`
 *   free blocks (option, default 2: GC never takes a plane's last free
 *   block, so one is always there for recovery), the sealed block of that
 *   plane with the fewest valid pages is collected: its valid pages are
 *   copied within the plane by copyback (keeping their OOB), then it is
 *   erased. Victims are found by a scan of the plane's valid counters (a
 *   few KiB, in cache); overwriting a page costs a bit and a counter.
 * - Partial pages: read-modify-write through a one-page buffer; sectors
 *   never written read as zeros. A trim writes zeros (so it is durable at
 *   once and survives any power cut).
 * - Persistence: every page's OOB holds a magic, the logical page and a
 *   64-bit sequence number. Mount reads the OOB of every written page
 *   (newest sequence number wins), reads back the last written page of each
 *   block (a program torn by a power cut fails as uncorrectable and is
 *   ignored), erases blocks left undefined by a torn erase, and makes a
 *   block written in part (its last page sound) a frontier again. A clean
 *   shutdown therefore needs to write nothing; writes are durable when they
 *   complete (no write cache), so flush has nothing to do either.
 *
 * Built with CPAGE_BROKEN defined (cbroken.c) it is deliberately broken:
 * see there.
 */
#include "nandlab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CPAGE_BROKEN
#define CPAGE_NAME "cpage"
#else
#define CPAGE_NAME "cbroken"
#endif

#define UNMAPPED 0xFFFFFFFFu
#define NIL (-1)
#define OOB_MAGIC 0x31475043u /* "CPG1" */
#define OOB_BYTES 16u

enum block_state { B_FREE = 0, B_OPEN = 1, B_SEALED = 2, B_BAD = 3 };

typedef struct frontier {
    int32_t block; /* NIL: none */
    uint32_t next; /* next page in the block */
} frontier;

typedef struct cpage {
    nandlab_env env;
    uint32_t spp, ppb, bpp, planes, blocks, lpns;
    uint64_t pages;
    uint32_t *l2p;        /* lpn -> ppn */
    uint32_t *p2l;        /* ppn -> lpn of the page's last program (read by GC only) */
    uint64_t *vbits;      /* a valid bit per physical page */
    uint32_t *valid;      /* valid pages per block */
    uint8_t *state;       /* enum block_state per block */
    int32_t *free_stack;  /* per plane, bpp entries */
    uint32_t *free_count; /* per plane */
    frontier *host, *gc;  /* per plane */
    uint32_t next_plane;
    uint64_t seq;
    uint64_t tmp;         /* one-page buffer */
    int have_tmp;
    uint32_t gc_free_blocks;
    uint64_t dram_bytes;
    uint64_t hint_lba;     /* the previous prefetch hint (sectors 0: none) */
    uint32_t hint_sectors;
    /* stats */
    uint64_t gc_runs, gc_copies, host_programs, mount_scanned_pages, mount_torn_pages, mount_erased_blocks;
#ifdef CPAGE_BROKEN
    uint64_t crash_at_request;
    int crash_armed; /* the option was given */
#endif
} cpage;

static void say(char *msg, size_t len, const char *text) {
    if (msg && len) {
        snprintf(msg, len, "%s", text);
    }
}

/* ---- Options ------------------------------------------------------------ */

static int parse_u64(const char *text, uint64_t *out) {
    char *end = NULL;
    if (!text || !*text || *text == '-') {
        return 0;
    }
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0') {
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/* ---- Block lists -------------------------------------------------------- */

static uint32_t plane_of(const cpage *f, uint32_t block) { return block / f->bpp; }

static void push_free(cpage *f, uint32_t b) {
    uint32_t p = plane_of(f, b);
    f->state[b] = B_FREE;
    f->free_stack[(size_t)p * f->bpp + f->free_count[p]++] = (int32_t)b;
}

static void seal(cpage *f, uint32_t b) { f->state[b] = B_SEALED; }

/* ---- Mapping ------------------------------------------------------------ */

static int is_valid(const cpage *f, uint32_t ppn) { return (int)((f->vbits[ppn >> 6] >> (ppn & 63)) & 1); }

static void invalidate(cpage *f, uint32_t ppn) {
    if (ppn == UNMAPPED || !is_valid(f, ppn)) {
        return;
    }
    f->vbits[ppn >> 6] &= ~(1ull << (ppn & 63));
    uint32_t b = ppn / f->ppb;
    if (f->valid[b]) {
        f->valid[b]--;
    }
}

static void map(cpage *f, uint32_t lpn, uint32_t ppn) {
    invalidate(f, f->l2p[lpn]);
    f->l2p[lpn] = ppn;
    f->p2l[ppn] = lpn;
    f->vbits[ppn >> 6] |= 1ull << (ppn & 63);
    f->valid[ppn / f->ppb]++;
}

static void encode_oob(uint8_t oob[OOB_BYTES], uint32_t lpn, uint64_t seq) {
    uint32_t magic = OOB_MAGIC;
    for (int i = 0; i < 4; i++) {
        oob[i] = (uint8_t)(magic >> (8 * i));
        oob[4 + i] = (uint8_t)(lpn >> (8 * i));
    }
    for (int i = 0; i < 8; i++) {
        oob[8 + i] = (uint8_t)(seq >> (8 * i));
    }
}

static int decode_oob(const uint8_t oob[OOB_BYTES], uint32_t *lpn, uint64_t *seq) {
    uint32_t magic = 0, l = 0;
    uint64_t s = 0;
    for (int i = 0; i < 4; i++) {
        magic |= (uint32_t)oob[i] << (8 * i);
        l |= (uint32_t)oob[4 + i] << (8 * i);
    }
    for (int i = 0; i < 8; i++) {
        s |= (uint64_t)oob[8 + i] << (8 * i);
    }
    *lpn = l;
    *seq = s;
    return magic == OOB_MAGIC;
}

/* ---- Allocation and GC -------------------------------------------------- */

/* Take a free block of plane p into frontier fr (sealing the full one). */
static int32_t open_block(cpage *f, uint32_t p, frontier *fr) {
    if (fr->block != NIL) {
        seal(f, (uint32_t)fr->block);
        fr->block = NIL;
    }
    if (f->free_count[p] == 0) {
        return NANDLAB_E_NO_SPACE;
    }
    uint32_t b = (uint32_t)f->free_stack[(size_t)p * f->bpp + --f->free_count[p]];
    f->state[b] = B_OPEN;
    fr->block = (int32_t)b;
    fr->next = 0;
    return NANDLAB_OK;
}

static int32_t erase_block(cpage *f, const nandlab_flash *fl, uint8_t cause, uint32_t b) {
    int32_t rc = fl->erase(fl->ctx, cause, b);
    if (rc == NANDLAB_E_ERASE_FAILED || rc == NANDLAB_E_BAD_BLOCK) {
        f->state[b] = B_BAD;
        return NANDLAB_OK;
    }
    if (rc != NANDLAB_OK) {
        return rc;
    }
    push_free(f, b);
    return NANDLAB_OK;
}

/* The sealed block of plane p with the fewest valid pages (fewer than a
 * block's), or NIL: a scan of the plane's counters. */
static int32_t victim(cpage *f, uint32_t p) {
    uint32_t first = p * f->bpp, best_valid = f->ppb;
    int32_t best = NIL;
    for (uint32_t b = first; b < first + f->bpp; b++) {
        if (f->valid[b] < best_valid && f->state[b] == B_SEALED) {
            best_valid = f->valid[b];
            best = (int32_t)b;
            if (best_valid == 0) {
                break;
            }
        }
    }
    return best;
}

/* Collect one victim of plane p. *done = 0 when there is none. */
static int32_t collect(cpage *f, const nandlab_flash *fl, uint32_t p, int *done) {
    int32_t v = victim(f, p);
    *done = v != NIL;
    if (v == NIL) {
        return NANDLAB_OK;
    }
    uint32_t b = (uint32_t)v;
    f->state[b] = B_OPEN; /* being collected: not in any list */
    f->gc_runs++;
    uint32_t first = b * f->ppb;
    uint32_t copies = f->valid[b];
#ifdef CPAGE_BROKEN
    /* THE BUG: the last valid page of every victim with more than one is
     * forgotten; its mapping still points into the erased victim. */
    if (copies > 1) {
        copies--;
    }
#endif
    /* The map entries of the pages to move are random: fetch them ahead. */
    for (uint32_t i = 0; i < 8 && i < f->ppb; i++) {
        __builtin_prefetch(&f->l2p[f->p2l[first + i] < f->lpns ? f->p2l[first + i] : 0]);
    }
    for (uint32_t i = 0; i < f->ppb && copies > 0; i++) {
        uint32_t src = first + i;
        if (i + 8 < f->ppb) {
            uint32_t ahead = f->p2l[src + 8];
            __builtin_prefetch(&f->l2p[ahead < f->lpns ? ahead : 0]);
        }
        if (!is_valid(f, src)) {
            continue;
        }
        uint32_t lpn = f->p2l[src];
        frontier *fr = &f->gc[p];
        if (fr->block == NIL || fr->next == f->ppb) {
            int32_t rc = open_block(f, p, fr);
            if (rc != NANDLAB_OK) {
                return rc;
            }
        }
        uint32_t dst = (uint32_t)fr->block * f->ppb + fr->next++;
        int32_t rc = fl->copyback(fl->ctx, NANDLAB_CAUSE_GC, src, dst, NULL, 0);
        if (rc != NANDLAB_OK) {
            return rc;
        }
        map(f, lpn, dst);
        f->gc_copies++;
        copies--;
    }
#ifdef CPAGE_BROKEN
    for (uint32_t i = 0; i < f->ppb; i++) {
        f->vbits[(first + i) >> 6] &= ~(1ull << ((first + i) & 63)); /* left mapped by l2p */
    }
    f->valid[b] = 0;
#endif
    return erase_block(f, fl, NANDLAB_CAUSE_GC, b);
}

/* The next host page of plane p, collecting first if free blocks are short. */
static int32_t host_page(cpage *f, const nandlab_flash *fl, uint32_t *ppn) {
    uint32_t p = f->next_plane;
    f->next_plane = (p + 1) % f->planes;
    frontier *fr = &f->host[p];
    if (fr->block == NIL || fr->next == f->ppb) {
        while (f->free_count[p] <= f->gc_free_blocks) {
            int done = 0;
            int32_t rc = collect(f, fl, p, &done);
            if (rc != NANDLAB_OK) {
                return rc;
            }
            if (!done) {
                break;
            }
        }
        int32_t rc = open_block(f, p, fr);
        if (rc != NANDLAB_OK) {
            return rc;
        }
    }
    *ppn = (uint32_t)fr->block * f->ppb + fr->next++;
    return NANDLAB_OK;
}

/* Program one logical page from buffer buf at sector src_sector. */
static int32_t program_page(cpage *f, const nandlab_flash *fl, uint32_t lpn, uint64_t buf, uint32_t src_sector) {
    uint32_t ppn = 0;
    int32_t rc = host_page(f, fl, &ppn);
    if (rc != NANDLAB_OK) {
        return rc;
    }
    uint8_t oob[OOB_BYTES];
    encode_oob(oob, lpn, f->seq++);
    rc = fl->program(fl->ctx, NANDLAB_CAUSE_HOST, ppn, buf, src_sector, oob, OOB_BYTES);
    if (rc != NANDLAB_OK) {
        return rc;
    }
    map(f, lpn, ppn);
    f->host_programs++;
    return NANDLAB_OK;
}

/* ---- The exported functions --------------------------------------------- */

/* The tests build a copy with -DCPAGE_ABI_VERSION=99, as if for another
 * version of nandlab.h, to see it refused. */
#ifndef CPAGE_ABI_VERSION
#define CPAGE_ABI_VERSION NANDLAB_ABI_VERSION
#endif
uint32_t nandlab_ftl_abi_version(void) { return CPAGE_ABI_VERSION; }

/* The options nandlab_ftl_create accepts, for `nandlab ftls --ftl-lib`. */
static const nandlab_option_doc cpage_options[] = {
    {"gc_free_blocks", "2", "free blocks per plane at which garbage collection runs (1..64)"},
#ifdef CPAGE_BROKEN
    {"crash_at_request", "none", "dereference a wild pointer at this host request id (to test --isolate)"},
#endif
};

const nandlab_option_doc *nandlab_ftl_options(size_t *count) {
    *count = sizeof cpage_options / sizeof cpage_options[0];
    return cpage_options;
}

void nandlab_ftl_destroy(void *ftl) {
    cpage *f = ftl;
    if (!f) {
        return;
    }
    free(f->l2p);
    free(f->p2l);
    free(f->valid);
    free(f->state);
    free(f->vbits);
    free(f->free_stack);
    free(f->free_count);
    free(f->host);
    free(f->gc);
    free(f);
}

void *nandlab_ftl_create(const nandlab_env *env, const nandlab_option *options, size_t option_count, char *msg,
                         size_t msg_len) {
    const nandlab_geometry *g = &env->geometry;
    uint32_t gc_free_blocks = 2;
#ifdef CPAGE_BROKEN
    uint64_t crash_at_request = UINT64_MAX;
#endif
    for (size_t i = 0; i < option_count; i++) {
        const char *k = options[i].key, *v = options[i].value;
        uint64_t n = 0;
        char text[NANDLAB_MSG_BYTES];
        if (strcmp(k, "gc_free_blocks") == 0) {
            if (!parse_u64(v, &n) || n < 1 || n > 64) {
                snprintf(text, sizeof text, "ftl `" CPAGE_NAME "` option `gc_free_blocks`: `%s` is not a number of blocks in 1..64", v);
                say(msg, msg_len, text);
                return NULL;
            }
            gc_free_blocks = (uint32_t)n;
#ifdef CPAGE_BROKEN
        } else if (strcmp(k, "crash_at_request") == 0) {
            if (!parse_u64(v, &n)) {
                snprintf(text, sizeof text, "ftl `" CPAGE_NAME "` option `crash_at_request`: `%s` is not a request id", v);
                say(msg, msg_len, text);
                return NULL;
            }
            crash_at_request = n;
#endif
        } else {
            snprintf(text, sizeof text,
                     "ftl `" CPAGE_NAME "`: unknown option `%s` (valid options: `gc_free_blocks`"
#ifdef CPAGE_BROKEN
                     ", `crash_at_request`"
#endif
                     ")",
                     k);
            say(msg, msg_len, text);
            return NULL;
        }
    }
    if (g->pages > UINT32_MAX || g->blocks >= (uint32_t)INT32_MAX) {
        say(msg, msg_len, "ftl `" CPAGE_NAME "`: more than 2^32 pages");
        return NULL;
    }
    cpage *f = calloc(1, sizeof *f);
    if (!f) {
        say(msg, msg_len, "out of memory");
        return NULL;
    }
    f->env = *env;
    f->spp = g->sectors_per_page;
    f->ppb = g->pages_per_block;
    f->bpp = g->blocks_per_plane;
    f->planes = g->planes;
    f->blocks = g->blocks;
    f->pages = g->pages;
    f->lpns = (uint32_t)((env->logical_sectors + f->spp - 1) / f->spp);
    f->gc_free_blocks = gc_free_blocks;
    f->seq = 1;
#ifdef CPAGE_BROKEN
    f->crash_at_request = crash_at_request;
    f->crash_armed = crash_at_request != UINT64_MAX;
#endif
    f->dram_bytes = (uint64_t)f->lpns * 4 + f->pages * 4 + (f->pages + 63) / 64 * 8 + (uint64_t)f->blocks * (4 + 1) +
                    (uint64_t)f->planes * (4 + 2 * sizeof(frontier)) + (uint64_t)f->bpp * f->planes * 4;
    if (f->dram_bytes > env->dram_budget_bytes) {
        char text[NANDLAB_MSG_BYTES];
        snprintf(text, sizeof text,
                 "ftl `" CPAGE_NAME "` needs %llu bytes of device DRAM but the device has %llu; raise `device.dram_bytes`",
                 (unsigned long long)f->dram_bytes, (unsigned long long)env->dram_budget_bytes);
        say(msg, msg_len, text);
        free(f);
        return NULL;
    }
    f->l2p = malloc((size_t)f->lpns * sizeof *f->l2p);
    f->p2l = malloc((size_t)f->pages * sizeof *f->p2l);
    f->valid = calloc(f->blocks, sizeof *f->valid);
    f->state = calloc(f->blocks, 1);
    f->vbits = calloc((size_t)((f->pages + 63) / 64), sizeof *f->vbits);
    f->free_stack = malloc((size_t)f->planes * f->bpp * sizeof *f->free_stack);
    f->free_count = calloc(f->planes, sizeof *f->free_count);
    f->host = malloc((size_t)f->planes * sizeof *f->host);
    f->gc = malloc((size_t)f->planes * sizeof *f->gc);
    if (!f->l2p || !f->p2l || !f->valid || !f->state || !f->vbits || !f->free_stack ||
        !f->free_count || !f->host || !f->gc) {
        say(msg, msg_len, "out of memory");
        nandlab_ftl_destroy(f);
        return NULL;
    }
    memset(f->l2p, 0xFF, (size_t)f->lpns * sizeof *f->l2p);
    memset(f->p2l, 0xFF, (size_t)f->pages * sizeof *f->p2l);
    for (uint32_t p = 0; p < f->planes; p++) {
        f->host[p].block = f->gc[p].block = NIL;
        f->host[p].next = f->gc[p].next = 0;
    }
    return f;
}

void nandlab_ftl_info(const void *ftl, nandlab_info *info) {
    (void)ftl;
    info->name = CPAGE_NAME;
    info->guarantee = NANDLAB_GUARANTEE_BASELINE;
    info->oob_bytes = OOB_BYTES;
}

static int32_t alloc_tmp(cpage *f, const nandlab_flash *fl) {
    if (f->have_tmp) {
        return NANDLAB_OK;
    }
    int32_t rc = fl->buf_alloc(fl->ctx, f->spp, &f->tmp);
    f->have_tmp = rc == NANDLAB_OK;
    return rc;
}

int32_t nandlab_ftl_format(void *ftl, const nandlab_flash *fl, char *msg, size_t msg_len) {
    cpage *f = ftl;
    for (uint32_t b = 0; b < f->blocks; b++) {
        if (fl->is_factory_bad(fl->ctx, b)) {
            f->state[b] = B_BAD;
            continue;
        }
        int32_t rc = erase_block(f, fl, NANDLAB_CAUSE_FORMAT, b);
        if (rc != NANDLAB_OK) {
            say(msg, msg_len, "erase failed during format");
            return rc;
        }
    }
    return alloc_tmp(f, fl);
}

int32_t nandlab_ftl_mount(void *ftl, const nandlab_flash *fl, char *msg, size_t msg_len) {
    cpage *f = ftl;
    int32_t rc = alloc_tmp(f, fl);
    if (rc != NANDLAB_OK) {
        return rc;
    }
    /* Newest sequence number seen per logical page, and one block's OOBs
     * (only during mount). */
    uint64_t *newest = calloc(f->lpns ? f->lpns : 1, sizeof *newest);
    uint32_t *blk_lpn = malloc((size_t)f->ppb * sizeof *blk_lpn);
    uint64_t *blk_seq = malloc((size_t)f->ppb * sizeof *blk_seq);
    if (!newest || !blk_lpn || !blk_seq) {
        free(newest);
        free(blk_lpn);
        free(blk_seq);
        say(msg, msg_len, "out of memory");
        return NANDLAB_E_MOUNT;
    }
    uint8_t oob[OOB_BYTES];
    rc = NANDLAB_OK;
    for (uint32_t b = 0; b < f->blocks && rc == NANDLAB_OK; b++) {
        if (fl->is_factory_bad(fl->ctx, b)) {
            f->state[b] = B_BAD;
            continue;
        }
        uint32_t written = 0;
        int undefined = 0;
        for (uint32_t i = 0; i < f->ppb; i++) {
            rc = fl->read_oob(fl->ctx, NANDLAB_CAUSE_RECOVERY, (uint64_t)b * f->ppb + i, oob, OOB_BYTES);
            f->mount_scanned_pages++;
            if (rc == NANDLAB_E_UNCORRECTABLE) {
                rc = NANDLAB_OK;
                undefined = 1; /* an erase torn by a power cut */
                break;
            }
            if (rc != NANDLAB_OK || !decode_oob(oob, &blk_lpn[i], &blk_seq[i])) {
                break; /* an error, or erased: the end of what this block holds */
            }
            written = i + 1;
        }
        if (rc != NANDLAB_OK) {
            break;
        }
        if (undefined) {
            f->mount_erased_blocks++;
            rc = erase_block(f, fl, NANDLAB_CAUSE_RECOVERY, b);
            continue;
        }
        if (written == 0) {
            push_free(f, b);
            continue;
        }
        /* The last written page may be a torn program: read it back. */
        uint32_t usable = written;
        rc = fl->read(fl->ctx, NANDLAB_CAUSE_RECOVERY, (uint64_t)b * f->ppb + written - 1, 0, f->spp, f->tmp, 0, NULL,
                      0);
        if (rc == NANDLAB_E_UNCORRECTABLE) {
            rc = NANDLAB_OK;
            usable = written - 1;
            f->mount_torn_pages++;
        } else if (rc != NANDLAB_OK) {
            break;
        }
        for (uint32_t i = 0; i < usable; i++) {
            uint32_t lpn = blk_lpn[i];
            uint64_t seq = blk_seq[i];
            if (lpn >= f->lpns) {
                continue;
            }
            if (seq >= f->seq) {
                f->seq = seq + 1;
            }
            if (seq > newest[lpn]) {
                newest[lpn] = seq;
                map(f, lpn, b * f->ppb + i);
            }
        }
        /* A block written in part, whose last page is sound, becomes the
         * plane's GC frontier (then its host frontier): recovery can collect
         * without a free block. Any other block with data is sealed. */
        uint32_t p = plane_of(f, b);
        if (usable == written && written < f->ppb && (f->gc[p].block == NIL || f->host[p].block == NIL)) {
            frontier *fr = f->gc[p].block == NIL ? &f->gc[p] : &f->host[p];
            f->state[b] = B_OPEN;
            fr->block = (int32_t)b;
            fr->next = written;
        } else {
            seal(f, b);
        }
    }
    free(newest);
    free(blk_lpn);
    free(blk_seq);
    if (rc != NANDLAB_OK) {
        say(msg, msg_len, "flash error during the mount scan");
    }
    return rc;
}

/* Fill `sectors` sectors of logical page lpn from `off` with buffer data (or zeros). */
static int32_t write_lpn(cpage *f, const nandlab_flash *fl, uint32_t lpn, uint32_t off, uint32_t n, uint64_t buf,
                         uint32_t buf_sector, int zeros) {
    if (n == f->spp && !zeros) {
        return program_page(f, fl, lpn, buf, buf_sector);
    }
    int32_t rc;
    uint32_t old = f->l2p[lpn];
    if (old == UNMAPPED) {
        if (zeros) {
            return NANDLAB_OK; /* already reads as zeros */
        }
        rc = fl->buf_zero(fl->ctx, f->tmp, 0, f->spp);
    } else {
        rc = fl->read(fl->ctx, NANDLAB_CAUSE_HOST, old, 0, f->spp, f->tmp, 0, NULL, 0);
    }
    if (rc != NANDLAB_OK) {
        return rc;
    }
    rc = zeros ? fl->buf_zero(fl->ctx, f->tmp, off, n) : fl->buf_copy(fl->ctx, f->tmp, off, buf, buf_sector, n);
    if (rc != NANDLAB_OK) {
        return rc;
    }
    return program_page(f, fl, lpn, f->tmp, 0);
}

static int32_t check_range(const cpage *f, uint64_t lba, uint64_t sectors, char *msg, size_t msg_len) {
    if (lba > f->env.logical_sectors || sectors > f->env.logical_sectors - lba) {
        say(msg, msg_len, "request beyond the logical capacity");
        return NANDLAB_E_OUT_OF_RANGE;
    }
    return NANDLAB_OK;
}

/* Walk the logical pages of sectors lba .. lba+sectors. */
#define FOR_EACH_PAGE(f, lba, sectors)                                                         \
    for (uint64_t at_ = (lba), end_ = (lba) + (sectors); at_ < end_;)                          \
        for (uint32_t lpn = (uint32_t)(at_ / (f)->spp), off = (uint32_t)(at_ % (f)->spp),      \
                      n = (uint32_t)((end_ - at_) < (uint64_t)((f)->spp - off) ? (end_ - at_)  \
                                                                              : ((f)->spp - off)), \
                      once_ = 1;                                                               \
             once_; once_ = 0, at_ += n)

int32_t nandlab_ftl_read(void *ftl, const nandlab_flash *fl, const nandlab_request *req, char *msg,
                         size_t msg_len) {
    cpage *f = ftl;
#ifdef CPAGE_BROKEN
    if (f->crash_armed && req->id == f->crash_at_request) {
        volatile uint32_t *wild = NULL; /* see nandlab_ftl_write */
        *wild = 1;
    }
#endif
    int32_t rc = check_range(f, req->lba, req->sectors, msg, msg_len);
    if (rc != NANDLAB_OK) {
        return rc;
    }
    FOR_EACH_PAGE(f, req->lba, req->sectors) {
        uint32_t dst = (uint32_t)(at_ - req->lba);
        uint32_t ppn = f->l2p[lpn];
        if (ppn == UNMAPPED) {
            rc = fl->buf_zero(fl->ctx, req->buf, dst, n);
        } else {
            rc = fl->read(fl->ctx, NANDLAB_CAUSE_HOST, ppn, off, n, req->buf, dst, NULL, 0);
        }
        if (rc != NANDLAB_OK) {
            return rc;
        }
    }
    return NANDLAB_OK;
}

int32_t nandlab_ftl_write(void *ftl, const nandlab_flash *fl, const nandlab_request *req, uint32_t *durability,
                          char *msg, size_t msg_len) {
    cpage *f = ftl;
    *durability = NANDLAB_DURABLE;
#ifdef CPAGE_BROKEN
    if (f->crash_armed && req->id == f->crash_at_request) {
        /* THE OTHER BUG (option crash_at_request=N): a wild pointer. */
        volatile uint32_t *wild = NULL;
        *wild = 1;
    }
#endif
    int32_t rc = check_range(f, req->lba, req->sectors, msg, msg_len);
    if (rc != NANDLAB_OK) {
        return rc;
    }
    FOR_EACH_PAGE(f, req->lba, req->sectors) {
        rc = write_lpn(f, fl, lpn, off, n, req->buf, (uint32_t)(at_ - req->lba), 0);
        if (rc != NANDLAB_OK) {
            say(msg, msg_len, rc == NANDLAB_E_NO_SPACE ? "no free block" : "write failed");
            return rc;
        }
    }
    return NANDLAB_OK;
}

int32_t nandlab_ftl_trim(void *ftl, const nandlab_flash *fl, uint64_t lba, uint64_t sectors, char *msg,
                         size_t msg_len) {
    cpage *f = ftl;
    int32_t rc = check_range(f, lba, sectors, msg, msg_len);
    if (rc != NANDLAB_OK) {
        return rc;
    }
    FOR_EACH_PAGE(f, lba, sectors) {
        if (f->l2p[lpn] == UNMAPPED) {
            continue;
        }
        if (n == f->spp) {
            rc = fl->buf_zero(fl->ctx, f->tmp, 0, f->spp);
            if (rc == NANDLAB_OK) {
                rc = program_page(f, fl, lpn, f->tmp, 0);
            }
        } else {
            rc = write_lpn(f, fl, lpn, off, n, 0, 0, 1);
        }
        if (rc != NANDLAB_OK) {
            say(msg, msg_len, rc == NANDLAB_E_NO_SPACE ? "no free block" : "trim failed");
            return rc;
        }
    }
    return NANDLAB_OK;
}

int32_t nandlab_ftl_flush(void *ftl, const nandlab_flash *fl, char *msg, size_t msg_len) {
    (void)ftl;
    (void)fl;
    (void)msg;
    (void)msg_len;
    return NANDLAB_OK; /* every completed write is on flash already */
}

int32_t nandlab_ftl_emergency_flush(void *ftl, const nandlab_flash *fl, char *msg, size_t msg_len) {
    return nandlab_ftl_flush(ftl, fl, msg, msg_len);
}

int32_t nandlab_ftl_idle(void *ftl, const nandlab_flash *fl, uint32_t *outcome, char *msg, size_t msg_len) {
    cpage *f = ftl;
    *outcome = NANDLAB_IDLE_NOTHING;
    /* Background GC: one victim in the plane with the fewest free blocks,
     * while it has fewer than twice the foreground threshold. */
    uint32_t best = 0;
    for (uint32_t p = 1; p < f->planes; p++) {
        if (f->free_count[p] < f->free_count[best]) {
            best = p;
        }
    }
    if (f->free_count[best] >= 2 * f->gc_free_blocks + 2) {
        return NANDLAB_OK;
    }
    int32_t v = victim(f, best);
    if (v == NIL || f->valid[v] > f->ppb / 2) {
        return NANDLAB_OK;
    }
    int done = 0;
    int32_t rc = collect(f, fl, best, &done);
    if (rc != NANDLAB_OK) {
        say(msg, msg_len, "background GC failed");
        return rc;
    }
    *outcome = done ? NANDLAB_IDLE_WORKED : NANDLAB_IDLE_NOTHING;
    return NANDLAB_OK;
}

int32_t nandlab_ftl_shutdown(void *ftl, const nandlab_flash *fl, char *msg, size_t msg_len) {
    cpage *f = ftl;
    (void)msg;
    (void)msg_len;
    if (f->have_tmp) {
        fl->buf_free(fl->ctx, f->tmp);
        f->have_tmp = 0;
    }
    return NANDLAB_OK; /* mount rebuilds everything from the pages' OOB */
}

/* The logical pages of sectors lba .. lba+sectors, clamped to the capacity
 * and to 16 pages; 0 if none. */
static uint32_t hint_pages(const cpage *f, uint64_t lba, uint32_t sectors, uint32_t *first) {
    if (sectors == 0 || lba >= f->env.logical_sectors) {
        return 0;
    }
    uint64_t end = lba + sectors < f->env.logical_sectors ? lba + sectors : f->env.logical_sectors;
    uint64_t a = lba / f->spp, b = (end - 1) / f->spp + 1;
    *first = (uint32_t)a;
    return (uint32_t)(b - a < 16 ? b - a : 16);
}

/* Two stages: the map entries of this hint now; for the previous hint,
 * whose entries are cached by now, the valid bits and counters of the
 * pages they point at. (flash->prefetch_page is not used: it cost more
 * than it saved here.) */
void nandlab_ftl_prefetch(void *ftl, const nandlab_flash *fl, uint64_t lba, uint32_t sectors) {
    cpage *f = ftl;
    (void)fl;
    uint32_t first = 0, n = hint_pages(f, f->hint_lba, f->hint_sectors, &first);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t ppn = f->l2p[first + i];
        if (ppn != UNMAPPED) {
            __builtin_prefetch(&f->vbits[ppn >> 6]);
            __builtin_prefetch(&f->valid[ppn / f->ppb]);
        }
    }
    n = hint_pages(f, lba, sectors, &first);
    for (uint32_t i = 0; i < n; i += 16) {
        __builtin_prefetch(&f->l2p[first + i]);
    }
    if (n) {
        __builtin_prefetch(&f->l2p[first + n - 1]);
    }
    f->hint_lba = lba;
    f->hint_sectors = sectors;
}

size_t nandlab_ftl_stats(const void *ftl, nandlab_stat *stats, size_t capacity) {
    const cpage *f = ftl;
    uint64_t free_blocks = 0;
    for (uint32_t p = 0; p < f->planes; p++) {
        free_blocks += f->free_count[p];
    }
    const nandlab_stat all[] = {
        {"gc_runs", (double)f->gc_runs},
        {"dram_bytes", (double)f->dram_bytes},
        {"free_blocks", (double)free_blocks},
        {"gc_copied_pages", (double)f->gc_copies},
        {"host_programs", (double)f->host_programs},
        {"mount_scanned_pages", (double)f->mount_scanned_pages},
        {"mount_torn_pages", (double)f->mount_torn_pages},
        {"mount_erased_blocks", (double)f->mount_erased_blocks},
    };
    size_t count = sizeof all / sizeof all[0];
    for (size_t i = 0; i < count && i < capacity; i++) {
        stats[i] = all[i];
    }
    return count;
}
