/*
 * nandlab.h — an FTL written in C, loaded by nandlab from a shared library.
 *
 * This is the C form of the `Ftl` trait and the `Flash` interface of the
 * nandlab crate (crates/nandlab/src/ftl/mod.rs, section "Over a C ABI").
 * A library FTL exports the `nandlab_ftl_*` functions declared at the end
 * of this file; nandlab loads it with `--ftl-lib PATH.so` (or `lib = "..."`
 * in a device file's [ftl] table) and checks it exactly as a Rust FTL.
 *
 * The Rust side checks this header in `cargo test` (crates/nandlab/src/
 * ftl/foreign/drift_tests.rs): every struct's size and field offsets, and
 * every constant, are compared with the Rust definitions by a C compiler.
 *
 * Conventions:
 * - Every function that can fail returns an int32_t code: NANDLAB_OK (0) or
 *   one of the NANDLAB_E_* codes below. FTL functions also write a
 *   NUL-terminated message into the caller's `msg` buffer (`msg_len` bytes,
 *   at least NANDLAB_MSG_BYTES) on failure.
 * - Addresses are linear: a page address counts pages in hierarchy order
 *   channel -> chip -> die -> plane -> block -> page, so the pages of a
 *   block are consecutive (page = block * pages_per_block + page_in_block)
 *   and the blocks of a plane are consecutive (plane = block /
 *   blocks_per_plane; die = plane / planes_per_die).
 * - Sectors are host sectors (geometry.sector_size_bytes); a page holds
 *   geometry.sectors_per_page of them.
 * - Host data lives in buffers the FTL holds by handle (uint64_t) and
 *   never looks inside; metadata and OOB are plain bytes.
 * - Nothing survives a power cycle but flash: nandlab destroys the FTL and
 *   creates a fresh one that mounts. An FTL keeps no global state.
 * - One FTL instance is called from one thread at a time; different
 *   instances may run on different threads at once (crash campaigns),
 *   unless the library exports nandlab_ftl_single_instance (below).
 */
#ifndef NANDLAB_H
#define NANDLAB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this contract. nandlab refuses a library whose
 * nandlab_ftl_abi_version() returns another number. */
#define NANDLAB_ABI_VERSION 1

/* Smallest size of the message buffers passed to the FTL, in bytes. */
#define NANDLAB_MSG_BYTES 512

/* ---- Error codes (stable: never reused or renumbered) ------------------ */

#define NANDLAB_OK 0
/* 1 ... 10: a flash operation failed (returned by the flash table; an FTL
 * passes them through to nandlab unchanged). */
#define NANDLAB_E_ADDRESS_OUT_OF_RANGE 1 /* page or block beyond the device */
#define NANDLAB_E_BAD_BLOCK 2            /* the block is bad */
#define NANDLAB_E_PROGRAM_FAILED 3       /* the program failed */
#define NANDLAB_E_ERASE_FAILED 4         /* the erase failed */
#define NANDLAB_E_UNCORRECTABLE 5        /* uncorrectable read (ECC failed) */
#define NANDLAB_E_POWER_LOSS 6           /* the power is gone: stop, return it */
#define NANDLAB_E_OOB_TOO_LONG 7         /* more OOB than info.oob_bytes */
#define NANDLAB_E_INVALID_BUFFER 8       /* bad buffer handle or sector range */
#define NANDLAB_E_DRAM_EXHAUSTED 9       /* device DRAM budget exhausted */
#define NANDLAB_E_INVALID_ARGUMENT 10    /* any other bad argument */
/* 101 ...: the FTL's own errors. */
#define NANDLAB_E_OUT_OF_RANGE 101 /* request beyond the logical capacity */
#define NANDLAB_E_NO_SPACE 102     /* no free block to write or collect */
#define NANDLAB_E_MOUNT 103        /* mount / recovery failed */
#define NANDLAB_E_DRAM 104         /* not enough device DRAM */
/* Any other code is reported as a failure naming the code and the message. */

/* ---- Small enumerations ----------------------------------------------- */

/* Why a flash operation is issued (a uint8_t argument of every operation). */
#define NANDLAB_CAUSE_HOST 0          /* host data for a host request */
#define NANDLAB_CAUSE_GC 1            /* garbage collection */
#define NANDLAB_CAUSE_WEAR_LEVELING 2 /* wear leveling */
#define NANDLAB_CAUSE_METADATA 3      /* maps, summaries, checkpoints */
#define NANDLAB_CAUSE_RECOVERY 4      /* mount and recovery scans */
#define NANDLAB_CAUSE_FORMAT 5        /* first power-on */

/* nandlab_info.guarantee: the crash guarantee `crash` checks. */
#define NANDLAB_GUARANTEE_BASELINE 0 /* flushed writes are durable */
#define NANDLAB_GUARANTEE_OPTR 1     /* baseline + prefix + atomic requests */

/* *durability written by nandlab_ftl_write. */
#define NANDLAB_DURABLE 0 /* on flash: survives a power cut */
#define NANDLAB_VOLATILE 1 /* in a volatile cache: durable after a flush */

/* *outcome written by nandlab_ftl_idle. */
#define NANDLAB_IDLE_NOTHING 0 /* nothing to do */
#define NANDLAB_IDLE_WORKED 1  /* did a step; call again if time allows */

/* ---- Plain structs ----------------------------------------------------- */

/* The device's geometry (all counts are whole-device unless named per-). */
typedef struct nandlab_geometry {
    uint32_t channels;                  /* channels */
    uint32_t chips_per_channel;         /* chips on each channel */
    uint32_t dies_per_chip;             /* dies in each chip */
    uint32_t planes_per_die;            /* planes in each die */
    uint32_t blocks_per_plane;          /* blocks in each plane */
    uint32_t pages_per_block;           /* pages in each block */
    uint32_t page_size_bytes;           /* data bytes of a page */
    uint32_t oob_size_bytes;            /* spare (OOB) bytes of a page */
    uint32_t sector_size_bytes;         /* bytes of a host sector */
    uint32_t sectors_per_page;          /* page_size_bytes / sector_size_bytes */
    uint32_t bits_per_cell;             /* 1 SLC, 2 MLC, 3 TLC, 4 QLC */
    uint32_t partial_programs_per_page; /* programs allowed per page (NOP) */
    uint32_t dies;                      /* dies in the device */
    uint32_t planes;                    /* planes in the device */
    uint32_t blocks;                    /* blocks in the device */
    uint32_t reserved;                  /* 0 */
    uint64_t pages;                     /* pages in the device */
} nandlab_geometry;

/* What an FTL is built with (nandlab_ftl_create). */
typedef struct nandlab_env {
    nandlab_geometry geometry;
    uint64_t logical_sectors;   /* capacity exported to the host, in sectors */
    uint64_t dram_budget_bytes; /* device DRAM the FTL may use, in bytes */
    uint64_t seed;              /* seed of the FTL's own random stream */
} nandlab_env;

/* One FTL option, exactly as `--ftl-opt KEY=VALUE` or the device file's
 * [ftl] table gives it: `value` is the TOML text of a scalar (`3`, `true`,
 * `"greedy"` with its quotes). Both strings live for the create call only. */
typedef struct nandlab_option {
    const char *key;
    const char *value;
} nandlab_option;

/* Static facts about an FTL (nandlab_ftl_info). */
typedef struct nandlab_info {
    const char *name;   /* short name, static storage; reported as lib:NAME */
    uint32_t guarantee; /* NANDLAB_GUARANTEE_* */
    uint32_t oob_bytes; /* OOB bytes per page the FTL writes (NAND keeps these) */
} nandlab_info;

/* A host read or write: sectors lba .. lba+sectors, data in (write) or to
 * be placed in (read) buffer `buf`, whose sector 0 is `lba`. */
typedef struct nandlab_request {
    uint64_t id;      /* host request id (for reports) */
    uint64_t lba;     /* first sector */
    uint32_t sectors; /* number of sectors (>= 1) */
    uint32_t reserved; /* 0 */
    uint64_t buf;     /* buffer handle */
} nandlab_request;

/* One page of a multi-plane program. */
typedef struct nandlab_program_op {
    uint64_t page;       /* page address */
    uint64_t src;        /* buffer handle holding the page's data */
    uint32_t src_sector; /* first sector of the page in `src` */
    uint32_t reserved;   /* 0 */
    const uint8_t *oob;  /* OOB bytes (may be NULL when oob_len is 0) */
    size_t oob_len;      /* bytes of oob */
} nandlab_program_op;

/* One page of a multi-plane read (a whole page into a buffer). */
typedef struct nandlab_read_op {
    uint64_t page;       /* page address */
    uint64_t dst;        /* buffer handle */
    uint32_t dst_sector; /* where the page's sector 0 goes in `dst` */
    uint32_t reserved;   /* 0 */
} nandlab_read_op;

/* One page of a multi-plane copyback (same plane, no channel transfer). */
typedef struct nandlab_copyback_op {
    uint64_t src;       /* source page */
    uint64_t dst;       /* destination page */
    const uint8_t *oob; /* new OOB for dst, or NULL to keep the source's */
    size_t oob_len;     /* bytes of oob */
} nandlab_copyback_op;

/* One statistic: a key (static storage or owned by the FTL until its next
 * call) and a number. */
typedef struct nandlab_stat {
    const char *key;
    double value;
} nandlab_stat;

/* ---- The flash: a table of function pointers --------------------------- */

/* Everything an FTL may do to the device. Pass `ctx` as the first argument
 * of every function. The table is valid for the duration of the FTL call it
 * was passed to only: never keep it. Operations return NANDLAB_OK or a
 * flash error code (1 ... 10). */
typedef struct nandlab_flash {
    void *ctx;
    /* Read sectors first_sector .. first_sector+sectors of `page` into
     * buffer `dst` at dst_sector, and the page's OOB into oob (oob_len may
     * be 0). */
    int32_t (*read)(void *ctx, uint8_t cause, uint64_t page, uint32_t first_sector, uint32_t sectors, uint64_t dst,
                    uint32_t dst_sector, uint8_t *oob, size_t oob_len);
    /* Read only the OOB of `page` (erased OOB reads as 0xFF). */
    int32_t (*read_oob)(void *ctx, uint8_t cause, uint64_t page, uint8_t *oob, size_t oob_len);
    /* Read a metadata page's bytes (at most a page) and its OOB. */
    int32_t (*read_meta)(void *ctx, uint8_t cause, uint64_t page, uint8_t *data, size_t data_len, uint8_t *oob,
                         size_t oob_len);
    /* Read bytes offset_bytes .. offset_bytes+data_len of a metadata page. */
    int32_t (*read_meta_at)(void *ctx, uint8_t cause, uint64_t page, uint32_t offset_bytes, uint8_t *data,
                            size_t data_len);
    /* Program `page` with one page of host data from buffer `src` starting
     * at src_sector, and oob. Erased sectors of the source stay erased. */
    int32_t (*program)(void *ctx, uint8_t cause, uint64_t page, uint64_t src, uint32_t src_sector,
                       const uint8_t *oob, size_t oob_len);
    /* Program `page` with metadata bytes (at most a page) and oob. */
    int32_t (*program_meta)(void *ctx, uint8_t cause, uint64_t page, const uint8_t *data, size_t data_len,
                            const uint8_t *oob, size_t oob_len);
    /* Copy page src to page dst on the same plane; oob NULL keeps the
     * source's OOB. */
    int32_t (*copyback)(void *ctx, uint8_t cause, uint64_t src, uint64_t dst, const uint8_t *oob, size_t oob_len);
    /* Erase a block (block address). */
    int32_t (*erase)(void *ctx, uint8_t cause, uint64_t block);
    /* Multi-plane forms: one page or block on each of several planes of a die. */
    int32_t (*program_multi)(void *ctx, uint8_t cause, const nandlab_program_op *ops, size_t count);
    int32_t (*read_multi)(void *ctx, uint8_t cause, const nandlab_read_op *ops, size_t count);
    int32_t (*erase_multi)(void *ctx, uint8_t cause, const uint64_t *blocks, size_t count);
    int32_t (*copyback_multi)(void *ctx, uint8_t cause, const nandlab_copyback_op *ops, size_t count);
    /* A data buffer of `sectors` sectors in device DRAM, initially erased;
     * its handle is written to *buf. Buffers do not survive a power cycle. */
    int32_t (*buf_alloc)(void *ctx, uint32_t sectors, uint64_t *buf);
    void (*buf_free)(void *ctx, uint64_t buf);
    int32_t (*buf_copy)(void *ctx, uint64_t dst, uint32_t dst_sector, uint64_t src, uint32_t src_sector,
                        uint32_t sectors);
    /* Fill sectors of a buffer with zeros. */
    int32_t (*buf_zero)(void *ctx, uint64_t dst, uint32_t dst_sector, uint32_t sectors);
    /* 1 if the block carries the factory bad-block mark, else 0. */
    int32_t (*is_factory_bad)(void *ctx, uint64_t block);
    /* Device DRAM available to the FTL, in bytes. */
    uint64_t (*dram_budget_bytes)(void *ctx);
    /* Simulated time in ns: 1 and *ns set in timed modes, else 0. */
    int32_t (*now_ns)(void *ctx, uint64_t *ns);
    /* When die `die` finishes its queued work, in ns: 1 and *ns set in
     * timed modes, else 0. */
    int32_t (*die_busy_until_ns)(void *ctx, uint32_t die, uint64_t *ns);
    /* Hints that a page (or bytes of a metadata page) will be read soon:
     * no effect on state, timing or counters. */
    void (*prefetch_page)(void *ctx, uint64_t page);
    void (*prefetch_meta)(void *ctx, uint64_t page, uint32_t offset_bytes);
} nandlab_flash;

/* ---- What the library exports ------------------------------------------ */

/* NANDLAB_ABI_VERSION as the library was built. */
uint32_t nandlab_ftl_abi_version(void);

/* Build an FTL: parse and validate the options (failing with a message
 * naming the bad option), allocate its DRAM state. Returns NULL and writes
 * msg on failure. Nothing is done to flash here. */
void *nandlab_ftl_create(const nandlab_env *env, const nandlab_option *options, size_t option_count, char *msg,
                         size_t msg_len);

/* Free everything create allocated (called once, also after a failure). */
void nandlab_ftl_destroy(void *ftl);

/* Static facts about the FTL. */
void nandlab_ftl_info(const void *ftl, nandlab_info *info);

/* First power-on: erase what must be erased, build empty state. */
int32_t nandlab_ftl_format(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len);

/* Power-on over existing flash: rebuild all state from flash alone. */
int32_t nandlab_ftl_mount(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len);

/* Place the current data of req's sectors into req->buf. */
int32_t nandlab_ftl_read(void *ftl, const nandlab_flash *flash, const nandlab_request *req, char *msg,
                         size_t msg_len);

/* Store req->buf as the data of req's sectors; *durability is
 * NANDLAB_DURABLE or NANDLAB_VOLATILE. */
int32_t nandlab_ftl_write(void *ftl, const nandlab_flash *flash, const nandlab_request *req, uint32_t *durability,
                          char *msg, size_t msg_len);

/* Discard sectors lba .. lba+sectors; afterwards they read as zeros. */
int32_t nandlab_ftl_trim(void *ftl, const nandlab_flash *flash, uint64_t lba, uint64_t sectors, char *msg,
                         size_t msg_len);

/* Make every completed write durable. */
int32_t nandlab_ftl_flush(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len);

/* Power is failing on a drive with power-loss protection: make every
 * completed write durable now (may simply flush). */
int32_t nandlab_ftl_emergency_flush(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len);

/* One step of background work; *outcome is NANDLAB_IDLE_*. */
int32_t nandlab_ftl_idle(void *ftl, const nandlab_flash *flash, uint32_t *outcome, char *msg, size_t msg_len);

/* Clean power-off: persist whatever a later mount needs. */
int32_t nandlab_ftl_shutdown(void *ftl, const nandlab_flash *flash, char *msg, size_t msg_len);

/* Write up to `capacity` statistics into `stats` and return how many the
 * FTL has (nandlab calls again with a larger array if that is more).
 * Keys `gc_runs` and `dram_bytes` are nandlab's typed counters,
 * `free_blocks` the free (erased) blocks now, keys starting `mount_` what
 * the last mount did; any other key is shown as an FTL metric. */
size_t nandlab_ftl_stats(const void *ftl, nandlab_stat *stats, size_t capacity);

/* Optional (nandlab calls it when the library exports it): a hint that a
 * request for sectors lba .. lba+sectors comes soon (nandlab looks ahead
 * three requests in the workload). The FTL may prefetch its map into the
 * CPU cache and pass hints on (flash->prefetch_page, prefetch_meta); it
 * must not change state or touch flash: in this call every flash function
 * but the hints and the queries (is_factory_bad, dram_budget_bytes,
 * now_ns, die_busy_until_ns) fails with NANDLAB_E_INVALID_ARGUMENT. */
void nandlab_ftl_prefetch(void *ftl, const nandlab_flash *flash, uint64_t lba, uint32_t sectors);

/* Optional: return nonzero when the library's instances share state that
 * exists once per process (e.g. memory at fixed addresses, as the Jasmine
 * layer's board), so that no two of them may be called at the same time.
 * nandlab then calls all instances from one thread (a crash campaign runs
 * on one thread). Several instances may still exist at once. */
uint32_t nandlab_ftl_single_instance(void);

/* One option `create` accepts, as `nandlab ftls --ftl-lib PATH.so` lists it
 * (all strings in static storage). */
typedef struct nandlab_option_doc {
    const char *name;          /* the KEY of --ftl-opt KEY=VALUE */
    const char *default_value; /* the default, as TOML text ("2", "\"greedy\"") */
    const char *help;          /* one line: what it sets, with its unit */
} nandlab_option_doc;

/* Optional: the options `create` accepts; writes their number to *count
 * and returns a table of that many (static storage). Without it, `nandlab
 * ftls` says the library does not list its options. */
const nandlab_option_doc *nandlab_ftl_options(size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* NANDLAB_H */
