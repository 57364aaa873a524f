/*
 * ftl_minimal — a minimal page-mapped FTL written for nandlab against the
 * Jasmine OpenSSD API (MIT/Apache, like nandlab). Its header, as every
 * Jasmine FTL's, lays out the board's DRAM and declares the entry points.
 */
#ifndef FTL_H
#define FTL_H

/* DRAM: SATA read and write buffers, one copy and one FTL buffer per bank,
 * the page map (one slice per bank) and the reverse map. */
#define LPNS_PER_BANK ((NUM_LPAGES + NUM_BANKS - 1) / NUM_BANKS)
#define MAP_PAGES_PER_BANK ((LPNS_PER_BANK * sizeof(UINT32) + BYTES_PER_PAGE - 1) / BYTES_PER_PAGE)
#define MAP_BYTES_PER_BANK (MAP_PAGES_PER_BANK * BYTES_PER_PAGE)
#define P2L_BYTES_PER_BANK ((PAGES_PER_BANK * sizeof(UINT32) + BYTES_PER_SECTOR - 1) / BYTES_PER_SECTOR * BYTES_PER_SECTOR)

#define NUM_COPY_BUFFERS NUM_BANKS
#define NUM_FTL_BUFFERS NUM_BANKS
#define DRAM_BYTES_OTHER \
    ((NUM_COPY_BUFFERS + NUM_FTL_BUFFERS) * BYTES_PER_PAGE + NUM_BANKS * (MAP_BYTES_PER_BANK + P2L_BYTES_PER_BANK))
#define NUM_RW_BUFFERS ((DRAM_SIZE - DRAM_BYTES_OTHER) / BYTES_PER_PAGE - 1)
#define NUM_RD_BUFFERS (((NUM_RW_BUFFERS / 8) + NUM_BANKS - 1) / NUM_BANKS * NUM_BANKS)
#define NUM_WR_BUFFERS (NUM_RW_BUFFERS - NUM_RD_BUFFERS)

#define RD_BUF_ADDR DRAM_BASE
#define WR_BUF_ADDR (RD_BUF_ADDR + NUM_RD_BUFFERS * BYTES_PER_PAGE)
#define COPY_BUF_ADDR (WR_BUF_ADDR + NUM_WR_BUFFERS * BYTES_PER_PAGE)
#define FTL_BUF_ADDR (COPY_BUF_ADDR + NUM_COPY_BUFFERS * BYTES_PER_PAGE)
#define MAP_ADDR (FTL_BUF_ADDR + NUM_FTL_BUFFERS * BYTES_PER_PAGE)
#define P2L_ADDR (MAP_ADDR + NUM_BANKS * MAP_BYTES_PER_BANK)

#define RD_BUF_PTR(BUF_ID) (RD_BUF_ADDR + ((UINT32)(BUF_ID)) * BYTES_PER_PAGE)
#define WR_BUF_PTR(BUF_ID) (WR_BUF_ADDR + ((UINT32)(BUF_ID)) * BYTES_PER_PAGE)
#define COPY_BUF(BANK) (COPY_BUF_ADDR + (BANK) * BYTES_PER_PAGE)
#define FTL_BUF(BANK) (FTL_BUF_ADDR + (BANK) * BYTES_PER_PAGE)

void ftl_open(void);
void ftl_read(UINT32 const lba, UINT32 const num_sectors);
void ftl_write(UINT32 const lba, UINT32 const num_sectors);
void ftl_flush(void);
void ftl_isr(void);

#endif /* FTL_H */
